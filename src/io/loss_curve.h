/* Loss-curve files (validation/curves/JOB/NAME.json, docs/validation-format.md):
 * every recorded quantity of each step of one reference job on one layout,
 * written by `fabula validate --write-curve` and compared by `fabula
 * validate`. */
#ifndef FABULA_IO_LOSS_CURVE_H
#define FABULA_IO_LOSS_CURVE_H

#include <stddef.h>
#include <stdint.h>

#define LOSS_CURVE_FORMAT "fabula-loss-curve"
#define LOSS_CURVE_VERSION 2

/* The real-valued quantities of a step, in the order of the file's records. */
enum {
    CURVE_LOSS,
    CURVE_LM_LOSS,
    CURVE_AUX_LOSS,
    CURVE_Z_LOSS,
    CURVE_GRAD_NORM,
    CURVE_LR,
    CURVE_LOSS_SCALE,
    CURVE_VALID_LM_LOSS, /* NaN on a step without a validation pass */
    CURVE_NREAL
};
/* "loss", "lm_loss", ..., "valid_lm_loss": the keys of metrics.jsonl. */
extern const char *const curve_real_names[CURVE_NREAL];

typedef struct loss_curve {
    char *name;             /* e.g. "cpu-np1" */
    char *job;              /* the reference job it belongs to, with its version, e.g. "base-v2" */
    char *backend;          /* "cpu", "cpu16" or "cuda" */
    char *precision;        /* "fp32", "bf16" or "fp16" */
    int world_size;
    char *layout;           /* informational: the parallel layout the job ran with on world_size ranks */
    char *blas;             /* the CPU backend's BLAS and the kernels it chose, e.g. "OpenBLAS 0.3.21 ...
                             * Prescott": another one rounds differently */
    char *fabula_version;   /* informational */
    char *environment;      /* informational: MPI, HDF5, BLAS of the run that wrote it */
    long steps;
    int moe_layers, experts; /* the shape of each step's tokens_per_expert (0, 0: a dense model) */
    double *real[CURVE_NREAL]; /* real[q][i]: quantity q of step i+1; NaN (JSON null) where it has no finite
                                * value: no validation pass, the gradient norm of a skipped fp16 step */
    int64_t *dropped;          /* [steps]: assignments dropped by capacity, over the MoE layers */
    int64_t *tokens_per_expert; /* [steps][moe_layers][experts]: assignments each expert kept */
} loss_curve_t;

/* Room for `steps` steps of the given shape, everything 0 (valid_lm_loss NaN). */
void loss_curve_alloc(loss_curve_t *c, long steps, int moe_layers, int experts);

/* Reads `path`; 0, or -1 with the problem (naming the file) in err. A file
 * that is not JSON, lacks a field, has a field of the wrong type, another
 * format or version, a step out of order, or a non-finite number where a
 * number must be is refused. */
int loss_curve_read(const char *path, loss_curve_t *c, char *err, size_t errcap);

/* Writes *c to `path` atomically, one step a line, every real with 17
 * significant digits (so that reading it back gives the same doubles); 0,
 * or -1 with err. */
int loss_curve_write(const char *path, const loss_curve_t *c, char *err, size_t errcap);

void loss_curve_free(loss_curve_t *c);

#endif
