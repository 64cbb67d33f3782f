/* The training loop's side of src/monitor: the peak FLOP/s the MFU is
 * measured against, the phase timers of each step, the gather of every
 * rank's record at print steps, NVML and memory high-water marks, and the
 * bottleneck verdicts (docs/monitoring.md). */
#ifndef FABULA_TRAIN_STEP_MONITOR_H
#define FABULA_TRAIN_STEP_MONITOR_H

#include "config/config.h"
#include "monitor/bottleneck.h"
#include "monitor/ranks.h"
#include "parallel/groups.h"
#include "train/backend.h"

/* What rank 0 logs for one step (train_log.c). */
typedef struct monitor_report {
    int active;                 /* monitor on: the fields below are meaningful */
    double time[PHASE_COUNT];   /* rank 0's seconds */
    double model_flops;         /* of the global batch */
    double flops_per_s;         /* model_flops / step time */
    double mfu;                 /* of world x peak; < 0: no peak known */
    double rss;                 /* rank 0's high-water, bytes */
    double overhead;            /* rank 0's seconds of monitoring in this step (docs/monitoring.md, "Cost") */
    int gathered;               /* a print step: ranks and bottleneck hold */
    int device;                 /* ranks.device_max is meaningful */
    ranks_summary_t ranks;
    bottleneck_t bottleneck;    /* of the interval since the last gather */
    int final;                  /* the run's last step: run_* hold */
    bottleneck_t run_bottleneck;
    double run_mfu, run_flops_per_s;
} monitor_report_t;

/* Device phases per step with event timing (CUDA): 3 per micro-batch and
 * the optimizer; beyond it, the rest of the step keeps host times. */
#define STEP_MONITOR_DEVICE_PAIRS 200

typedef struct step_monitor {
    int active;
    const config_t *cfg;
    const backend_t *be;
    const groups_t *groups;     /* whose waits are told apart; NULL: none */
    int rank, world, threads;
    double group_wait0[MONITOR_NGROUPS]; /* the groups' waits at the step's start */
    double ivl_bins, tot_bins;  /* micro-batches the plans used */
    int ivl_max_len, tot_max_len; /* the smallest sequence-length cap */
    double peak;                /* one rank's FLOP/s; 0 unknown */
    double peak_total;          /* over the ranks */
    rank_monitor_t ranks;
    double ivl_flops, ivl_time, ivl_plan_imb, tot_flops, tot_time, tot_plan_imb;
    double ivl_steps, tot_steps;
    /* CUDA: event pairs of this step's device phases */
    struct { int phase, from, to; } dev[STEP_MONITOR_DEVICE_PAIRS];
    int ndev, dev_from;
} step_monitor_t;

/* Collective: measures or looks up the peak and prints one line about it
 * (rank 0), opens NVML on GPUs. `threads`: the CPU backend's threads;
 * `groups`: the job's process groups, whose waits the verdicts tell apart
 * (NULL: not told apart). */
void step_monitor_open(step_monitor_t *m, const config_t *cfg, const backend_t *be, int threads,
                       const groups_t *groups);
void step_monitor_close(step_monitor_t *m);
/* At the start of a step. */
void step_monitor_begin(step_monitor_t *m);
/* On CUDA, brackets device work of phase p (forward, backward, optimizer)
 * with events on the compute stream: the step's time of p becomes the
 * device time between them, not the host's. Nothing elsewhere. */
void step_monitor_device_begin(step_monitor_t *m, phase_id_t p);
void step_monitor_device_end(step_monitor_t *m, phase_id_t p);
/* What the loop knows of a step when it ends. */
typedef struct step_monitor_step {
    long step;                  /* 1-based */
    double step_time;           /* seconds */
    double cpu_time;            /* this process's CPU seconds in the step, all threads */
    double flops;               /* the global batch's model FLOPs */
    double plan_imbalance;      /* the balancer's cost max/mean - 1 */
    long plan_bins;             /* micro-batches the step's plan used, all ranks */
    int micro_batches;          /* micro-batches a step has, all ranks */
    int max_len;                /* the step's sequence-length cap */
} step_monitor_step_t;

/* After the step (collective). Fills *r on rank 0. */
void step_monitor_end(step_monitor_t *m, const step_monitor_step_t *st, monitor_report_t *r);

/* The largest sgemm rate (FLOP/s) the CPU backend reaches with its current
 * threads in about `seconds`, on the PEAK_GEMM_SHAPE shape. */
#define PEAK_GEMM_SHAPE "1024x256x256"
double peak_flops_cpu(double seconds);
/* bf16 dense tensor-core peak of a GPU by name (docs/monitoring.md has the
 * table); 0 when the name is not in it. */
double peak_flops_gpu(const char *name);

#endif
