/* Every rank's phase times, gathered to rank 0: the record each rank keeps
 * (this step, the print interval, the whole run), one MPI_Gather of it at
 * each print step, and the min/mean/max over ranks rank 0 derives
 * (docs/monitoring.md). */
#ifndef FABULA_MONITOR_RANKS_H
#define FABULA_MONITOR_RANKS_H

#include "monitor/nvml.h"
#include "monitor/phase.h"
#include "parallel/comm.h"

/* The process groups whose waits the monitor tells apart (the group of the
 * collective a rank blocked in): the gradient reduction and ZeRO's gathers
 * (dp, with the experts' edp), tensor parallelism's all-reduces, expert
 * parallelism's all-to-alls, the pipeline's sends and receives. */
enum { MONITOR_GROUP_DP, MONITOR_GROUP_TP, MONITOR_GROUP_EP, MONITOR_GROUP_PP, MONITOR_NGROUPS };
const char *monitor_group_name(int g);

/* Sums over some steps of one rank. */
typedef struct span_sums {
    double s[PHASE_COUNT];
    double step_time, busy, steps;
    double cpu;                         /* the process's CPU seconds (all threads) */
    double group_wait[MONITOR_NGROUPS]; /* seconds blocked in each group's collectives */
    double threads;                     /* the rank's threads (not summed) */
    counter_sums_t ctr[PHASE_COUNT];    /* PAPI, 0 without */
    double counted, llc;                /* 1: this rank counted (LLC misses too) */
    double team_threads;                /* threads in ctr[].team; 0: team not counted */
} span_sums_t;

/* What each rank sends: a fixed struct of doubles, so that one gather of
 * sizeof bytes carries it on any layout. */
typedef struct rank_record {
    span_sums_t step, interval, total;
    double rss_peak;        /* bytes */
    double device_peak;     /* bytes, 0 without a device */
    nvml_sample_t gpu;      /* -1 fields without NVML */
} rank_record_t;

/* A span over all ranks. Phase sums are per rank; "min", "median",
 * "mean" and "max" over the ranks (the median of an even count is the mean
 * of the middle two); the step time's min/mean/max likewise. slowest_rank
 * is the rank with the largest busy time (the one the others waited for). */
typedef struct span_over_ranks {
    double min[PHASE_COUNT], median[PHASE_COUNT], mean[PHASE_COUNT], max[PHASE_COUNT];
    int max_rank[PHASE_COUNT];
    double step_min, step_mean, step_max;
    double busy_min, busy_mean, busy_max;
    int slowest_rank;
    double steps;
    double group_wait_mean[MONITOR_NGROUPS]; /* mean over ranks */
    double blocked_mean;                /* mean over ranks of comm_wait + imbalance */
    /* CPU seconds the process got per second of compute (forward, backward,
     * optimizer) per thread: min and max over ranks; < 0 where some rank
     * has no compute time or no thread count */
    double cpu_share_min, cpu_share_max;
    int cpu_share_min_rank;
    int counted, llc;                   /* every rank counted (LLC misses too) */
    int team_threads;                   /* summed over ranks; 0 unless every rank counted its team */
    counter_sums_t ctr[PHASE_COUNT];    /* sums over ranks */
} span_over_ranks_t;

typedef struct ranks_summary {
    int world;
    span_over_ranks_t step, interval, total;
    double rss_max;
    int rss_max_rank;
    double device_max;      /* 0 without a device */
    int device_max_rank;
    int have_gpu;           /* some rank read NVML */
    double gpu_util_min, gpu_util_mean, gpu_temp_max, gpu_power_sum, gpu_sm_mhz_min, gpu_mem_used_max,
        gpu_mem_total;
} ranks_summary_t;

/* One rank's running sums. */
typedef struct rank_monitor {
    rank_record_t rec;
    rank_record_t *all;     /* rank 0: world records */
    double *scratch;        /* rank 0: world doubles, for the medians */
    int rank, world;
} rank_monitor_t;

void rank_monitor_init(rank_monitor_t *m, comm_t *world);
void rank_monitor_free(rank_monitor_t *m);
/* What a rank measured in a step besides its phase times. */
typedef struct rank_step_extra {
    double cpu;                         /* process CPU seconds in the step */
    double group_wait[MONITOR_NGROUPS]; /* seconds blocked in each group */
    int threads;                        /* the rank's CPU threads */
} rank_step_extra_t;

/* Adds a step's times to the interval and the run. */
void rank_monitor_add(rank_monitor_t *m, const phase_times_t *t, const rank_step_extra_t *x);
/* Collective over `world`: one MPI_Gather of every rank's record; on rank
 * 0 fills *out (untouched elsewhere). Then starts a new interval. */
void rank_monitor_gather(rank_monitor_t *m, comm_t *world, double rss_peak, double device_peak,
                         const nvml_sample_t *gpu, ranks_summary_t *out);

#endif
