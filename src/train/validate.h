/* The reference job of `fabula validate` and how its losses are judged
 * against a committed curve (docs/validation-format.md "Loss curves"). */
#ifndef FABULA_TRAIN_VALIDATE_H
#define FABULA_TRAIN_VALIDATE_H

#include "io/loss_curve.h"

/* The job's name, recorded in every curve it wrote: a curve of another job
 * (an older definition) is refused rather than compared. Bump it with any
 * change to validate_job_sets. */
#define VALIDATE_JOB_NAME "sample-moe-h64-v1"
/* Steps of the whole job (the curves' length; the LR schedule spans them). */
#define VALIDATE_JOB_STEPS 300
/* Micro-batches per step (train_batch_size 8 / 2 samples each): the world
 * size must divide it. */
#define VALIDATE_JOB_MICRO_BATCHES 4

/* Tolerances on |loss - curve loss| per step (docs/validation-format.md):
 * the CPU backend on another world size or BLAS (the same micro-batches,
 * summed in another order: 1, 2 and 4 ranks differ by < 1e-6 over the 300
 * steps), and another backend or precision (GPU bf16; not yet measured on a
 * GPU). */
#define VALIDATE_TOL_LAYOUT 1e-4
#define VALIDATE_TOL_BF16 0.1

/* The job as --set overrides of the built-in default config, for
 * config_load; `steps` the steps to run (<= VALIDATE_JOB_STEPS), backend
 * "cpu" or "cuda" (with bf16), run_dir where it writes. The strings live
 * until validate_job_free. */
typedef struct validate_job {
    const char **sets;
    int nsets;
    char *owned[4];
} validate_job_t;

void validate_job_make(validate_job_t *j, long steps, const char *backend, const char *run_dir);
void validate_job_free(validate_job_t *j);

/* The judgement of `steps` losses against a curve. */
typedef struct validate_result {
    long steps;             /* steps compared */
    double max_diff;        /* max over them of |loss - curve| */
    long worst_step;        /* 1-based step of max_diff; 0 when every diff is 0 */
    double tolerance;       /* 0: bit-exact */
    const char *rule;       /* "bit-exact (same backend, precision, world size)" or why the tolerance */
    int pass;
} validate_result_t;

/* Compares losses[0..steps) with c's first steps (steps <= c->steps) for a
 * run on `backend` / `precision` with `world_size` ranks and BLAS `blas`
 * (validate_blas_line). */
validate_result_t validate_compare(const double *losses, long steps, const loss_curve_t *c, const char *backend,
                                   const char *precision, int world_size, const char *blas);

/* The BLAS of the CPU backend as kernels_print_backends names it, from the
 * text it printed: "OpenBLAS 0.3.21 ... Prescott MAX_THREADS=64" (a new
 * string; "unknown" when the text has none). */
char *validate_blas_line(const char *backends_text);

#endif
