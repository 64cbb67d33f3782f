/* Charts as inline SVG text: no script, no external file, so a report opens
 * anywhere. Every element that draws data carries class="data" (the tests
 * count them); NaN points are gaps. */
#ifndef FABULA_REPORT_SVG_H
#define FABULA_REPORT_SVG_H

#include <stddef.h>

#include "report/strbuf.h"

typedef struct svg_series {
    const char *name;
    const double *x, *y;
    size_t n;
    int dashed;
} svg_series_t;

typedef struct svg_axes {
    const char *title, *xlabel, *ylabel;
    int points;   /* mark every point (few points: a scaling plot) */
    int y_from_0; /* the y axis starts at 0 */
} svg_axes_t;

/* Lines, one per series, with a legend. */
void svg_lines(strbuf_t *b, const svg_axes_t *ax, const svg_series_t *s, size_t ns);

/* k layers stacked over x[n]: ys[j][i] is layer j at x[i] (NaN counts 0). */
void svg_stacked(strbuf_t *b, const svg_axes_t *ax, const double *x, size_t n, const double *const *ys,
                 const char *const *names, size_t k);

/* A rows x cols grid, v[r * cols + c], shaded from white (0) to dark (the
 * maximum); row and column labels (NULL: their index). */
void svg_heatmap(strbuf_t *b, const char *title, const double *v, size_t rows, size_t cols,
                 const char *const *row_labels, const char *const *col_labels, const char *row_axis,
                 const char *col_axis);

/* The colour of series i. */
const char *svg_color(size_t i);

#endif
