/* What `fabula report --scaling` reads from each run directory of a sweep
 * and how the runs of one point (repeats: the same rank count and tokens
 * per step) reduce to the point's figures (docs/monitoring.md, "Scaling
 * table"). No output here: scaling_table.c and scaling_chart.c print. */
#ifndef FABULA_REPORT_SCALING_DATA_H
#define FABULA_REPORT_SCALING_DATA_H

#include <stddef.h>

/* The phases of metrics.jsonl's "time" object, in its order. */
enum { SCALING_PHASES = 7 };
extern const char *const scaling_phase_names[SCALING_PHASES];

/* One run directory. NaN marks a figure the run does not record. */
typedef struct scaling_run {
    const char *dir;
    int ranks;
    size_t nsteps;          /* measured steps */
    double tokens_per_step; /* mean global batch, tokens */
    double tps;             /* tokens over step time of the measured steps */
    double step_s;          /* mean step time of the measured steps */
    /* sums over the measured steps with "time": step + checkpoint time,
     * compute, comm_wait, imbalance; split_steps: how many */
    double split_wall, split_comp, split_comm, split_imb;
    size_t split_steps;
    /* per phase, sums over the measured gather steps of "ranks.time_min",
     * "time_median", "time_max"; rank_steps: how many */
    double rank_min[SCALING_PHASES], rank_med[SCALING_PHASES], rank_max[SCALING_PHASES];
    size_t rank_steps[SCALING_PHASES];
    double mem_bytes;
    /* jobs.jsonl's start line with the most threads per CPU (0: unknown) */
    int node_ranks, node_cpus, threads;
    /* DIR/plan_time.json (`fabula plan time --json`): have_pred 0 without */
    int have_pred;
    double pred_step_s, pred_tps;
    char machine[128];
} scaling_run_t;

/* Reads RUN_DIR (fb_fatal on what report_run_load refuses, on a run
 * without a rank count or a timed step, on a plan_time.json that is not
 * `plan time --json` of this run's rank count: exit 3, 4 unreadable). */
void scaling_run_read(const char *dir, scaling_run_t *out);

/* How a point's node was loaded: ranks and threads against its CPUs. */
typedef enum {
    SCALING_FITS = 0,     /* or unknown */
    SCALING_OVER_RANKS,   /* more ranks than CPUs on the node */
    SCALING_OVER_THREADS, /* ranks fit, ranks x threads do not */
} scaling_load_t;

/* A point: the runs of one rank count and batch, and their reduction. */
typedef struct scaling_point {
    int ranks;
    const scaling_run_t **runs;
    size_t nruns;
    size_t nsteps;          /* measured steps of all its runs */
    double tokens_per_step; /* of its first run (the runs agree within 1%) */
    /* tokens/s: the median over the runs, their min and max, and
     * (max - min) / median in % */
    double tps, tps_min, tps_max, spread_pct;
    double tps_rank, eff;   /* median / ranks; over the smallest point's */
    double compute, comm, imbalance; /* % of step + checkpoint time, pooled over runs */
    /* s per step, mean over the measured gather steps of all runs */
    double rank_min[SCALING_PHASES], rank_med[SCALING_PHASES], rank_max[SCALING_PHASES];
    double mem_mib;         /* largest over the runs */
    int node_ranks, node_cpus, threads; /* of the most loaded run (0: unknown) */
    scaling_load_t load;
    double step_s;          /* median over the runs of the mean step time */
    int have_pred;
    double pred_step_s, pred_tps, err_pct; /* err: (predicted - measured) / measured step time */
    const char *machine;
} scaling_point_t;

/* Groups runs[n] into points sorted by ranks (then tokens per step) and
 * reduces each; efficiency against the first point. Returns how many; the
 * points point into runs, which must outlive them. */
size_t scaling_points(const scaling_run_t *runs, size_t n, scaling_point_t **points);
void scaling_points_free(scaling_point_t *p, size_t n);

#endif
