/* A reference job's bands (validation/curves/JOB/bands.json,
 * docs/validation-format.md "Bands"): for each real-valued quantity of the
 * curves, the largest difference measured between the job's runs on other
 * layouts and BLAS kernel sets, and the band a run on another layout or
 * BLAS must stay within: a measured spread times a stated factor, written by
 * validation/derive_bands.py. Counts (tokens per expert, dropped) have no
 * band: routing must be identical. */
#ifndef FABULA_IO_CURVE_BANDS_H
#define FABULA_IO_CURVE_BANDS_H

#include <stddef.h>

#include "io/loss_curve.h"

#define CURVE_BANDS_FORMAT "fabula-curve-bands"
#define CURVE_BANDS_VERSION 1

typedef struct curve_bands {
    char *job;              /* the job id the bands belong to (a curve's "job") */
    char *derivation;       /* how: which runs were compared, on which machine, the factor */
    char *checked;          /* how the job's curves were checked against an independent reference */
    long steps;             /* the length of each band_by_step */
    double spread[CURVE_NREAL]; /* measured: max |a - b| over the runs compared and their steps */
    double band[CURVE_NREAL];   /* informational: the factor times spread */
    double *band_by_step[CURVE_NREAL]; /* [steps]: the allowed |run - curve| at each step on another
                                         * layout or BLAS: the factor times the largest spread up to it */
} curve_bands_t;

/* Reads `path`; 0, or -1 with the problem (naming the file) in err. Every
 * quantity of curve_real_names must be there with a finite spread and band
 * >= 0 and band_by_step of finite numbers >= 0, as long for every quantity. */
int curve_bands_read(const char *path, curve_bands_t *b, char *err, size_t errcap);
void curve_bands_free(curve_bands_t *b);

#endif
