/* What a training step reports: the console line every steps_per_print and
 * one JSON line per step in RUN_DIR/metrics.jsonl (rank 0 only). */
#ifndef FABULA_TRAIN_TRAIN_LOG_H
#define FABULA_TRAIN_TRAIN_LOG_H

#include "config/config.h"
#include "io/rundir.h"
#include "train/eta.h"
#include "train/evaluate.h"
#include "train/moe_metrics.h"
#include "train/step_monitor.h"
#include "train/train_tboard.h"

typedef struct step_record {
    long step;              /* 1-based */
    double loss, lm_loss, aux_loss, z_loss;
    double lr, grad_norm;       /* grad_norm of the unscaled gradients */
    double loss_scale;          /* fp16 loss scale this step used (1 otherwise) */
    int skipped;                /* fp16 overflow: no update this step */
    long tokens, dropped, samples;
    double imbalance, packing;  /* balancer cost imbalance; packing efficiency */
    int max_len;                /* sequence-length cap this step */
    double plan_cost;           /* the step plan's cost, sum of len + c len^2 over its samples (train/eta.h) */
    double step_time, elapsed;
    double step_cpu_time;       /* rank 0's process CPU seconds in the step, all threads */
    double valid_lm_loss;       /* LM loss on the validation samples this step; NaN: not evaluated */
    const eval_result_t *valid; /* the whole evaluation (perplexity, per genre); NULL: not evaluated */
    const moe_metrics_t *moe;   /* per-expert, per-layer and per-genre MoE statistics; NULL: none */
    double model_flops;         /* model FLOPs of the global batch (docs/monitoring.md) */
    const monitor_report_t *mon; /* phase times, MFU, gathered ranks, verdict; NULL: none */
} step_record_t;

typedef struct train_log {
    const config_t *cfg;
    int active;             /* rank 0 */
    metrics_t *metrics;
    train_tboard_t tb;      /* TensorBoard and csv_monitor files (every rank: histograms are collective) */
    double first_loss, last_loss;
    double tokens_total, time_total;
    long steps_logged;
    int have_final;             /* final_mon holds the run's verdict */
    monitor_report_t final_mon;
    eta_t eta;                  /* the time left, from the schedule of work per step */
    char shown_verdict[800];    /* the verdict the console printed in full last */
} train_log_t;

/* `lens`, `n`: the training samples' lengths, for the ETA's schedule. */
void train_log_open(train_log_t *log, const config_t *cfg, int active, const int64_t *lens, int64_t n);
void train_log_step(train_log_t *log, const step_record_t *rec);
void train_log_close(train_log_t *log, int exit_code);

#endif
