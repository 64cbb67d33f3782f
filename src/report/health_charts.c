/* Gradient norm, router losses, dropped assignments, loss scale
 * (report/health_charts.h). */
#include "report/health_charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report/html.h"
#include "report/report_charts.h"
#include "report/svg.h"

typedef struct curve {
    const char *path, *title, *ylabel;
    int y_from_0;
    int log2_y; /* a loss scale moves by factors of 2: equal steps on a log2 axis */
    const char *hline_name;
    double hline;
    const char *missing; /* the note when the run lacks the field */
} curve_t;

static void draw(strbuf_t *b, const report_run_t *r, const curve_t *c)
{
    double *x, *y;
    const size_t k = report_series(r, c->path, &x, &y);
    if (!k) {
        html_note(b, "%s", c->missing);
    } else {
        for (size_t i = 0; c->log2_y && i < k; i++)
            y[i] = y[i] > 0 ? log2(y[i]) : NAN;
        svg_axes_t ax = {.title = c->title, .xlabel = "step", .ylabel = c->ylabel, .y_from_0 = c->y_from_0};
        ax.hline_name = c->hline_name;
        ax.hline = c->hline;
        const report_run_t *runs[1] = {r};
        double *marks = charts_mark_resumes(&ax, runs, 1);
        const svg_series_t s = {.name = c->path, .x = x, .y = y, .n = k};
        svg_lines(b, &ax, &s, 1);
        free(marks);
    }
    free(x);
    free(y);
}

void health_charts(strbuf_t *b, const report_run_t *r)
{
    /* the threshold clipping scales the gradient down to, when it is on */
    double clip = 0;
    char clip_name[48] = "";
    if (r->config && report_num(r->config, "gradient_clipping", &clip) && clip > 0)
        snprintf(clip_name, sizeof clip_name, "clipped above %g", clip);
    const curve_t grad = {"grad_norm", "Gradient norm (before clipping)", "L2 norm", 1, 0,
                          clip_name[0] ? clip_name : NULL, clip,
                          "No \"grad_norm\" in metrics.jsonl (every step overflowed, or a log of an older fabula): "
                          "no gradient-norm chart."};
    draw(b, r, &grad);
    const curve_t aux = {"aux_loss", "Router load-balancing loss (aux_loss, before its coefficient)", "aux_loss", 0,
                         0, NULL, 0, "No \"aux_loss\" in metrics.jsonl: no chart of the load-balancing loss."};
    draw(b, r, &aux);
    const curve_t z = {"z_loss", "Router z-loss (z_loss, before its coefficient)", "z_loss", 0, 0, NULL, 0,
                       "No \"z_loss\" in metrics.jsonl: no chart of the router z-loss."};
    draw(b, r, &z);
    const curve_t dropped = {"dropped", "Expert assignments dropped by capacity (all layers and ranks)",
                             "assignments", 1, 0, NULL, 0,
                             "No \"dropped\" in metrics.jsonl (a dense model): no chart of dropped tokens."};
    draw(b, r, &dropped);
    const curve_t scale = {"loss_scale", "fp16 loss scale", "log2 of the scale", 0, 1, NULL, 0,
                           "No \"loss_scale\" in metrics.jsonl (fp16.enabled false: bf16 and fp32 need no loss "
                           "scaling): no loss-scale chart."};
    draw(b, r, &scale);
}
