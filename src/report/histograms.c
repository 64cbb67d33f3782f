/* Histograms of step time and tokens per expert (report/histograms.h). */
#include "report/histograms.h"

#include <stdlib.h>

#include "report/html.h"
#include "report/svg.h"
#include "util/error.h"

void histogram_step_time(strbuf_t *b, const report_run_t *r)
{
    size_t measured = 0, n = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        measured += !report_is_warmup(r, i);
    double *v = fb_malloc((r->nsteps ? r->nsteps : 1) * sizeof *v);
    for (size_t i = 0; i < r->nsteps; i++)
        if (!(measured && report_is_warmup(r, i)) && report_num(r->steps[i], "step_time", &v[n]))
            n++;
    if (n) {
        const svg_axes_t ax = {.title = "Step time histogram (each process's first step left out)",
                               .xlabel = "seconds (rank 0)", .ylabel = "steps", .y_from_0 = 1};
        svg_histogram(b, &ax, v, n);
    } else {
        html_note(b, "No \"step_time\" in metrics.jsonl: no step-time histogram.");
    }
    free(v);
}

void histogram_expert_tokens(strbuf_t *b, const report_run_t *r)
{
    size_t n = 0, cap = 0;
    double *v = NULL;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *et = json_object_get(r->steps[i], "expert_tokens");
        for (size_t l = 0; et && json_is_array(et) && l < json_array_size(et); l++) {
            json_t *row = json_array_get(et, l);
            for (size_t e = 0; json_is_array(row) && e < json_array_size(row); e++) {
                json_t *x = json_array_get(row, e);
                if (!json_is_number(x))
                    continue;
                if (n == cap) {
                    cap = cap ? 2 * cap : 256;
                    v = fb_realloc(v, cap * sizeof *v);
                }
                v[n++] = json_number_value(x);
            }
        }
    }
    if (n) {
        const svg_axes_t ax = {.title = "Tokens per expert per step (every MoE layer and expert)",
                               .xlabel = "tokens", .ylabel = "experts x steps", .y_from_0 = 1};
        svg_histogram(b, &ax, v, n);
    } else {
        html_note(b, "No \"expert_tokens\" in metrics.jsonl (a dense model): no histogram of tokens per expert.");
    }
    free(v);
}
