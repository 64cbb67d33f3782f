/* The bottleneck verdict of a print interval (or of the whole run): which
 * share of the iteration (step + checkpoint) over all ranks crossed its
 * threshold, with the evidence and the knob that would help. A pure
 * function of the gathered times and the config, so tests can feed it
 * numbers (docs/monitoring.md, "Reading the verdicts"). */
#ifndef FABULA_MONITOR_BOTTLENECK_H
#define FABULA_MONITOR_BOTTLENECK_H

#include "config/config.h"
#include "monitor/ranks.h"

/* Shares of the iteration (mean over ranks) at or above which a class is a
 * candidate; the candidate with the largest share wins, compute otherwise. */
#define BOTTLENECK_IO_SHARE 0.20
#define BOTTLENECK_INPUT_SHARE 0.20
#define BOTTLENECK_IMBALANCE_SHARE 0.15
#define BOTTLENECK_COMM_SHARE 0.25
/* The pipeline's waits (its sends and receives: the 1F1B bubble, pp > 1),
 * apart from the other groups' communication. */
#define BOTTLENECK_PIPELINE_SHARE 0.20
/* CPU starvation, checked after memory: every rank got less than this
 * fraction of the CPU its threads could use while busy (CPU backends). */
#define BOTTLENECK_CPU_SHARE 0.50
/* Memory pressure: the high-water mark of some rank at or above this
 * fraction of what it may use (its node's RAM over the ranks there; its
 * GPU's memory). Checked first: it ends runs. */
#define BOTTLENECK_MEMORY_FRACTION 0.90

typedef struct bottleneck_input {
    const span_over_ranks_t *span;
    int world;
    double plan_imbalance;      /* mean over the span of the balancer's cost max/mean - 1 */
    double mfu;                 /* of the span; < 0 unknown */
    double memory_fraction;     /* largest high-water / what that rank may use; < 0 unknown */
    int memory_rank;
    const char *memory_what;    /* "host RSS" or "device memory" */
    /* the step plan, mean over the span: micro-batches used (all ranks) of
     * the micro_batches a step has (M = gradient_accumulation_steps x dp);
     * 0: unknown */
    double plan_bins;
    int micro_batches;
    int max_len_min;            /* the smallest sequence-length cap of the span; 0: unknown */
    int device;                 /* a GPU backend: the CPU share means nothing there */
    int threads;                /* each rank's CPU threads (rank 0's) */
    int ranks_per_node, node_cpus; /* 0: unknown */
} bottleneck_input_t;

typedef struct bottleneck {
    /* "compute", "communication", "pipeline", "imbalance", "input", "memory", "io", "cpu" */
    const char *verdict;
    char evidence[400];
    char advice[600];
} bottleneck_t;

void bottleneck_classify(const config_t *cfg, const bottleneck_input_t *in, bottleneck_t *out);

#endif
