/* Histograms with fixed bucket edges, so that the pieces of one tensor held
 * by different ranks (ZeRO shards, expert-parallel experts) give exact
 * counts once their sums are added: no rank needs the whole tensor.
 *
 * The edges are TensorBoard's default ones: 0, and +-1e-12 * 1.1^k up to
 * 1e20, closed by +-DBL_MAX, so 10% relative resolution over any range a
 * weight or gradient takes. Bucket b counts the x with
 * limit[b-1] <= x < limit[b] (limit[-1] = -inf); x >= DBL_MAX falls in the
 * last bucket, NaN in none (num counts only the values binned). */
#ifndef FABULA_TBOARD_TB_HIST_H
#define FABULA_TBOARD_TB_HIST_H

#include <stddef.h>

/* The bucket limits (upper edges), ascending, and their number. */
const double *tb_hist_limits(size_t *n);

/* The accumulator of one tensor: TB_HIST_SUMS + nlimits doubles that add
 * across ranks (num, sum, sum_squares, then the bucket counts) and
 * TB_HIST_EXTS that take the maximum (max, -min). */
enum { TB_HIST_NUM = 0, TB_HIST_SUM = 1, TB_HIST_SUMSQ = 2, TB_HIST_SUMS = 3 };
enum { TB_HIST_MAX = 0, TB_HIST_NEGMIN = 1, TB_HIST_EXTS = 2 };
size_t tb_hist_sums_len(void);

/* Empty accumulator (sums zero, exts -inf). */
void tb_hist_reset(double *sums, double *exts);
/* Adds x[0..n) (sums in double, in order). */
void tb_hist_add(double *sums, double *exts, const float *x, size_t n);
/* The bucket of x (NaN: -1): a binary search over the limits. */
long tb_hist_bucket(double x);
/* The same for a float, by table (what tb_hist_add uses). */
long tb_hist_bucket_f(float x);

#endif
