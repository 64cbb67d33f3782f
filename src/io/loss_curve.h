/* Loss-curve files (validation/curves/NAME.json, docs/validation-format.md):
 * the per-step losses of the reference job on one layout, written by
 * `fabula validate --write-curve` and compared by `fabula validate`. */
#ifndef FABULA_IO_LOSS_CURVE_H
#define FABULA_IO_LOSS_CURVE_H

#include <stddef.h>

#define LOSS_CURVE_FORMAT "fabula-loss-curve"
#define LOSS_CURVE_VERSION 1

typedef struct loss_curve {
    char *name;             /* e.g. "cpu-np1" */
    char *job;              /* the reference job it belongs to, e.g. "sample-moe-v1" */
    char *backend;          /* "cpu" or "cuda" */
    char *precision;        /* "fp32" or "bf16" */
    int world_size;
    char *blas;             /* the CPU backend's BLAS and the kernels it chose, e.g. "OpenBLAS 0.3.21 ...
                             * Prescott": another one rounds differently */
    char *fabula_version;   /* informational */
    char *environment;      /* informational: MPI, HDF5, BLAS of the run that wrote it */
    long steps;
    double *loss;           /* loss[0..steps): the loss of step i+1 */
} loss_curve_t;

/* Reads `path`; 0, or -1 with the problem (naming the file) in err. A file
 * that is not JSON, lacks a field, has a field of the wrong type, another
 * format or a newer version, or a non-finite loss is refused. */
int loss_curve_read(const char *path, loss_curve_t *c, char *err, size_t errcap);

/* Writes *c to `path` atomically, every loss with 17 significant digits (so
 * that reading it back gives the same doubles); 0, or -1 with err. */
int loss_curve_write(const char *path, const loss_curve_t *c, char *err, size_t errcap);

void loss_curve_free(loss_curve_t *c);

#endif
