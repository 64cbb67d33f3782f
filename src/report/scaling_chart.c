/* Two charts in one SVG file: scaling reads as straight lines on log axes,
 * and a rank count that doubles is one step along a log2 axis. */
#include "report/scaling_chart.h"

#include <math.h>
#include <stdlib.h>

#include "report/svg.h"
#include "util/error.h"

enum { CHART_W = 720, CHART_H = 280 }; /* svg.c's chart size */

void scaling_chart(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    double *x = fb_malloc((n ? n : 1) * sizeof *x), *tps = fb_malloc((n ? n : 1) * sizeof *tps);
    double *lo = fb_malloc((n ? n : 1) * sizeof *lo), *hi = fb_malloc((n ? n : 1) * sizeof *hi);
    double *ideal = fb_malloc((n ? n : 1) * sizeof *ideal), *pred = fb_malloc((n ? n : 1) * sizeof *pred);
    double *eff = fb_malloc((n ? n : 1) * sizeof *eff), *one = fb_malloc((n ? n : 1) * sizeof *one);
    int any_pred = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = p[i].ranks;
        tps[i] = p[i].tps;
        lo[i] = p[i].tps_min;
        hi[i] = p[i].tps_max;
        /* every rank as fast as those of the smallest point */
        ideal[i] = p[0].tps_rank * p[i].ranks;
        pred[i] = p[i].have_pred ? p[i].pred_tps : NAN;
        any_pred |= p[i].have_pred;
        eff[i] = p[i].eff;
        one[i] = 1.0;
    }
    const svg_series_t thr[3] = {{"tokens/s (median, min-max)", x, tps, n, 0, lo, hi},
                                 {"ideal (linear)", x, ideal, n, 1, NULL, NULL},
                                 {"predicted (plan time)", x, pred, n, 0, NULL, NULL}};
    const svg_axes_t tax = {.title = "Throughput vs ranks (log-log)", .xlabel = "ranks (log2)",
                            .ylabel = "tokens/s (log)", .points = 1, .xlog2 = 1, .ylog = 1};
    const svg_series_t ef[2] = {{"efficiency", x, eff, n, 0, NULL, NULL}, {"ideal", x, one, n, 1, NULL, NULL}};
    const svg_axes_t eax = {.title = "Parallel efficiency vs ranks", .xlabel = "ranks (log2)",
                            .ylabel = "efficiency", .points = 1, .y_from_0 = 1, .xlog2 = 1};
    sb_printf(b,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
              "height=\"%d\" viewBox=\"0 0 %d %d\">\n<g>\n",
              CHART_W, 2 * CHART_H, CHART_W, 2 * CHART_H);
    svg_lines(b, &tax, thr, any_pred ? 3 : 2);
    sb_printf(b, "</g>\n<g transform=\"translate(0,%d)\">\n", CHART_H);
    svg_lines(b, &eax, ef, 2);
    sb_printf(b, "</g>\n</svg>\n");
    free(x);
    free(tps);
    free(lo);
    free(hi);
    free(ideal);
    free(pred);
    free(eff);
    free(one);
}
