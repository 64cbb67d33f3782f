/* Charts as inline SVG text: no script, no external file, so a report opens
 * anywhere. Every element that draws data carries class="data" (the tests
 * count them); NaN points are gaps. */
#ifndef FABULA_REPORT_SVG_H
#define FABULA_REPORT_SVG_H

#include <stddef.h>

#include "util/strbuf.h"

typedef struct svg_series {
    const char *name;
    const double *x, *y;
    size_t n;
    int dashed;
    /* svg_lines: a vertical bar from lo[i] to hi[i] at each point (the
     * spread of repeated measurements); none when NULL */
    const double *lo, *hi;
} svg_series_t;

typedef struct svg_axes {
    const char *title, *xlabel, *ylabel;
    int points;   /* mark every point (few points: a scaling plot), up to 200 a series */
    int y_from_0; /* the y axis starts at 0 */
    /* svg_lines: x on a log2 scale (ticks at powers of two: rank counts),
     * y on a log10 scale (ticks at 1, 2, 5 x powers of ten); a value <= 0
     * on a log axis is a gap. y_from_0 is ignored for a log y. */
    int xlog2, ylog;
    /* dashed vertical lines at these x, each <line class="mark" data-x>
     * titled "mark_name x" (where a run resumed); none when nmarks is 0;
     * above 40, one unlabelled <path class="marks"> draws them all */
    const double *marks;
    size_t nmarks;
    const char *mark_name;
    /* a horizontal reference line at hline, named in the legend (the
     * clipping threshold under the gradient norm); none when NULL */
    const char *hline_name;
    double hline;
} svg_axes_t;

/* Lines, one per series, with a legend. */
void svg_lines(strbuf_t *b, const svg_axes_t *ax, const svg_series_t *s, size_t ns);

/* A histogram of v[n] (NaN left out) in about sqrt(n) equal bins, at
 * most 40; each bar's title says "COUNT in [LO, HI)" (the last bin closed). */
void svg_histogram(strbuf_t *b, const svg_axes_t *ax, const double *v, size_t n);

/* k layers stacked over x[n]: ys[j][i] is layer j at x[i] (NaN counts 0). */
void svg_stacked(strbuf_t *b, const svg_axes_t *ax, const double *x, size_t n, const double *const *ys,
                 const char *const *names, size_t k);

/* A rows x cols grid, v[r * cols + c], shaded from white (the smallest
 * value) to dark (the largest), both printed beside it; row and column
 * labels (NULL: their index). Each cell's value is its tooltip. */
void svg_heatmap(strbuf_t *b, const char *title, const double *v, size_t rows, size_t cols,
                 const char *const *row_labels, const char *const *col_labels, const char *row_axis,
                 const char *col_axis);

/* The colour of series i. */
const char *svg_color(size_t i);

#endif
