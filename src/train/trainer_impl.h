/* The trainer's state, shared by the files that make up the training loop
 * (not for callers: train/trainer.h is the interface):
 *   trainer.c             open, step, close: the run's life
 *   trainer_micro_batch.c one micro-batch's forward and backward, and the
 *                         schedules that order them within a step
 *   trainer_startup.c     the start-up checks every rank must agree on
 *   trainer_report.c      what the run prints about its set-up and its end */
#ifndef FABULA_TRAIN_TRAINER_IMPL_H
#define FABULA_TRAIN_TRAINER_IMPL_H

#include "ckpt/ckpt.h"
#include "config/config.h"
#include "loader/batch.h"
#include "loader/data_source.h"
#include "loader/step_plan.h"
#include "model/model.h"
#include "monitor/phase.h"
#include "monitor/watchdog.h"
#include "parallel/groups.h"
#include "train/backend.h"
#include "train/ckpt_policy.h"
#include "train/evaluate.h"
#include "train/moe_metrics.h"
#include "train/pipeline.h"
#include "train/step_monitor.h"
#include "train/step_stats.h"
#include "train/train_log.h"
#include "train/trainer.h"
#include "zero/zero.h"

/* A phase of the step: host timer and, on CUDA, device events. */
#define TIMED(tr, phase, stmt)                                                                                 \
    do {                                                                                                       \
        PHASE_BEGIN(phase);                                                                                    \
        step_monitor_device_begin(&(tr)->mon, phase);                                                          \
        stmt;                                                                                                  \
        step_monitor_device_end(&(tr)->mon, phase);                                                            \
        PHASE_END(phase);                                                                                      \
    } while (0)

struct trainer {
    const config_t *cfg;    /* the job's, or &grown */
    config_t grown;         /* the job with a grown vocabulary (model.init_from); effective_json ours */
    int rank, world;        /* world rank and size */
    int dp_rank, dp_size;   /* data-parallel position: which micro-batches */
    groups_t groups;
    zero_t *zero;
    model_t *model;
    data_source_t data;
    data_source_t valid;    /* the validation split (run.eval_interval > 0) */
    step_plan_t plan;
    batch_t batch;
    long *routed;           /* [L * E] top-K choices of the step, the global-batch aux pass */
    double *aux_freq;       /* [L * E] routed / the step's tokens: the global-batch f_e */
    moe_metrics_t moe;      /* per-expert, per-layer and per-genre MoE statistics of the step */
    train_log_t log;
    int threads;
    ckpt_policy_t ckpt;
    backend_t be;
    long skipped;           /* steps skipped by the scaler in this process */
    int64_t skip_hash;      /* of the skipped steps' numbers, in order (trainer_report_skipped) */
    step_monitor_t mon;     /* phase times, MFU, the gather and the verdicts */
    watchdog_t *watchdog;   /* ends a hung step (monitor.hang_check); NULL when off */
    pipeline_t *pipe;       /* pipeline parallelism; NULL without */
    /* the step in progress: the figures its micro-batch passes add up */
    long step;              /* 0-based */
    step_stats_t stats;
    int *mb_tokens;         /* [mb_cap] each micro-batch's tokens, for its backward's transfers */
    int mb_cap;
    double pipe_wait, pipe_time; /* this stage's waits and step times, all steps */
    /* the run */
    ckpt_progress_t prog;   /* steps done, tokens seen */
    long first_step;        /* of this process (a resume starts past 0) */
    double t_start;
    int code;               /* FB_EXIT_OK while the run goes on */
    int sig;                /* the preemption signal the ranks agreed on; 0: none */
    char message[256];      /* why the run failed, for the job log; "": nothing to say */
    /* what the last step's record points at */
    monitor_report_t mrep;
    eval_result_t valid_result;
};

/* trainer_micro_batch.c: the forward and backward passes of step `step`'s
 * micro-batches on this rank, in the order of its schedule, and the
 * step's loss figures summed over every rank into rec (collective). */
void trainer_forward_backward(trainer_t *tr, long step, step_record_t *rec);

/* trainer_startup.c: each ends the job on every rank alike, one message,
 * when its check fails. */
/* model.init_from: a tokenizer whose appended specials need more vocabulary
 * rows than the imported model has points tr->cfg at tr->grown. */
void trainer_grow_vocab(trainer_t *tr);
void trainer_lock_run_dir(const trainer_t *tr);
void trainer_data_open(trainer_t *tr);
void trainer_outputs_prepare(trainer_t *tr);

/* trainer_report.c */
/* The model, layout and memory lines (collective under pp). */
void trainer_report_setup(trainer_t *tr);
/* fp16: every rank skipped the same steps (collective over the world). */
void trainer_report_skipped(trainer_t *tr);
/* rank 0's tensor-parallel traffic over this process's steps */
void trainer_report_tp_comm(const trainer_t *tr);
/* each stage's measured pipeline bubble (collective over pp) */
void trainer_report_pipeline(trainer_t *tr);

#endif
