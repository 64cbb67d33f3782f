/* The machine measurements of `fabula plan calibrate --write-machine`
 * (probe_machine.c). Collective over the world: every rank calls each. */
#ifndef FABULA_PROBE_PROBE_MACHINE_H
#define FABULA_PROBE_PROBE_MACHINE_H

#include <stddef.h>

#include "ops.h"

/* Bytes one parameter moves through AdamW (p, g, m, v read; p, m, v
 * written, fp32): plan_time.c counts the same. */
#define PROBE_ADAMW_BYTES 28.0

typedef struct probe_machine {
    const char *name, *command, *config, *cpu, *nodes, *mpi, *links_why;
    int ranks, local, threads, tokens, shortlen, longlen, repeats;
    double dense_flops, attention_flops, gemm_flops, adamw_bandwidth;
    /* the experts' rate (0: not measured) and what it came from: the long
     * passes' kept share of the assignments as configured and at
     * PROBE_LOW_CAPACITY, and the pairs timed */
    double expert_flops, kept_configured, kept_low;
    int expert_pairs;
    int have_links;
    int cpu_clock;              /* the passes timed in process CPU seconds (--clock cpu) */
    double latency, bandwidth;
    /* the slowest rank's lag over the ranks' mean, meeting once a pass and
     * at every block (docs/plan.md, "Synchronisation waits") */
    double wait_pass, wait_block;
    double spread;              /* the long passes' (slowest - fastest) / median */
    int node_cpus;              /* CPUs the node's ranks run on (0: unknown) */
    int have_overlap;
    double overlap, overlap_comm_s; /* probe_overlap's */
    const char *init_from;      /* the passes' weights (NULL: train's initialisation) */
    const char *data;           /* the passes' tokens (NULL: random ids) */
    /* The CUDA backend (run.backend): the GPU's name (NULL: the CPU
     * backend), its memory (0: NVML could not say) and the pinned
     * host-to-device copy rate (docs/plan.md, "Calibrating a GPU"). */
    const char *device;
    double device_memory, host_link;
} probe_machine_t;

/* A spread of the timed passes above which calibrate warns: the share by
 * which the machine's speed moved during the calibration, a bound on how
 * well any prediction from the file can do (the CPU-speed and plan
 * validations on a 2-core VM moved 10-30% within minutes). */
#define PROBE_SPREAD_WARN 0.15

/* The capacity factor of the passes that time the experts against the
 * model as configured: with a router near even it keeps about half the
 * assignments, a difference the timer resolves, and its GEMMs stay within
 * a factor two of training's (a trained router drops a fifth at 1.25). */
#define PROBE_LOW_CAPACITY 0.5

/* An expert rate over this many times gemm_flops is left out as noise. */
#define PROBE_EXPERT_OVER_PEAK 1.5

/* The median of v[0..n) (sorts v). */
double probe_median(double *v, int n);
/* The largest x over the ranks. */
double probe_max_over_ranks(double x);
/* Bytes/s of the ops table's AdamW (PROBE_ADAMW_BYTES a parameter), the
 * slowest rank's; on a device, over PROBE_ADAMW_DEVICE_PARAMS parameters. */
double probe_adamw_bandwidth(const ops_t *o);
#define PROBE_ADAMW_DEVICE_PARAMS ((size_t)1 << 26)
/* A device's matmul rate: the best of batches of PROBE_DEVICE_GEMM-square
 * products in the compute dtype, the slowest rank's. */
double probe_device_gemm_flops(const ops_t *o, double seconds);
#define PROBE_DEVICE_GEMM 8192
/* Bytes/s of 256 MiB copies from page-locked host memory to the device,
 * median of 5, the slowest rank's. */
double probe_host_link(const ops_t *o);
/* MPI latency and bandwidth over the world (plan_coll_time's all-reduce
 * inverted); -1 and why when there is one rank or the figures make no
 * sense. */
int probe_links(double *latency, double *bandwidth, char *why, size_t whylen);
/* The share of a non-blocking all-gather (a ZeRO-3 prefetch's) that
 * completes while the rank computes without calling MPI: MPI progresses
 * most transfers only inside its calls unless it runs a progress thread.
 * -1 and why on one rank. *comm_s: the gather alone. */
int probe_overlap(double *overlap, double *comm_s, char *why, size_t whylen);
/* Rank 0: writes the machine file. */
void probe_write_machine(const char *path, const probe_machine_t *c);

#endif
