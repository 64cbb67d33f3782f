/* `fabula report RUN_DIR`: the page and the summary of one run. Every chart
 * is built from metrics.jsonl fields (docs/run-dir.md); a chart whose
 * fields the run lacks is left out with a note saying which field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "report/config_table.h"
#include "report/health_charts.h"
#include "report/histograms.h"
#include "report/html.h"
#include "report/report.h"
#include "report/report_charts.h"
#include "report/run_data.h"
#include "report/strbuf_file.h"
#include "report/summary.h"
#include "report/svg.h"
#include "report/verdicts.h"
#include "util/error.h"

/* Heatmap columns at most: a long run's steps are summed into bins. */
enum { MAX_BINS = 120 };

static void time_split_chart(strbuf_t *b, const report_run_t *r)
{
    double *x = fb_malloc(r->nsteps * sizeof *x);
    double *ys[REPORT_NPHASES];
    size_t n = 0;
    for (int p = 0; p < REPORT_NPHASES; p++)
        ys[p] = fb_malloc(r->nsteps * sizeof *ys[p]);
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *t = report_get(r->steps[i], "time");
        if (!t || !json_is_object(t) || !report_num(r->steps[i], "step", &x[n]))
            continue;
        for (int p = 0; p < REPORT_NPHASES; p++) {
            json_t *v = json_object_get(t, report_phases[p]);
            ys[p][n] = v && json_is_number(v) ? json_number_value(v) : NAN;
        }
        n++;
    }
    if (n) {
        svg_axes_t ax = {.title = "Time split per step (rank 0)", .xlabel = "step", .ylabel = "seconds",
                         .y_from_0 = 1};
        const report_run_t *runs[1] = {r};
        double *marks = charts_mark_resumes(&ax, runs, 1);
        svg_stacked(b, &ax, x, n, (const double *const *)ys, report_phases, REPORT_NPHASES);
        free(marks);
    } else {
        html_note(b, "No \"time\" field in metrics.jsonl (the phase timers of the monitoring): no time split.");
    }
    for (int p = 0; p < REPORT_NPHASES; p++)
        free(ys[p]);
    free(x);
}

/* One heatmap per MoE layer: rows experts, columns step bins, each column
 * the share of the layer's tokens each expert processed. */
static void expert_load_charts(strbuf_t *b, const report_run_t *r)
{
    size_t L = 0, E = 0, n = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *et = json_object_get(r->steps[i], "expert_tokens");
        if (et && json_is_array(et) && json_array_size(et) && json_is_array(json_array_get(et, 0))) {
            if (!L) {
                L = json_array_size(et);
                E = json_array_size(json_array_get(et, 0));
            }
            n++;
        }
    }
    if (!n || !E) {
        html_note(b, "No \"expert_tokens\" in metrics.jsonl (a dense model): no expert load.");
        return;
    }
    const size_t bins = n < MAX_BINS ? n : MAX_BINS;
    double *v = fb_calloc(L * E * bins, sizeof *v);
    char **labels = fb_calloc(bins, sizeof *labels);
    size_t k = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *et = json_object_get(r->steps[i], "expert_tokens");
        if (!et || !json_is_array(et) || json_array_size(et) != L)
            continue;
        const size_t bin = k * bins / n;
        k++;
        if (!labels[bin]) {
            double s = 0;
            report_num(r->steps[i], "step", &s);
            labels[bin] = fb_malloc(24);
            snprintf(labels[bin], 24, "%.0f", s);
        }
        for (size_t l = 0; l < L; l++) {
            json_t *row = json_array_get(et, l);
            for (size_t e = 0; e < E && e < json_array_size(row); e++)
                v[(l * E + e) * bins + bin] += json_number_value(json_array_get(row, e));
        }
    }
    for (size_t l = 0; l < L; l++) {
        double *m = v + l * E * bins;
        for (size_t c = 0; c < bins; c++) {
            double tot = 0;
            for (size_t e = 0; e < E; e++)
                tot += m[e * bins + c];
            for (size_t e = 0; e < E && tot > 0; e++)
                m[e * bins + c] /= tot;
        }
        char title[96];
        snprintf(title, sizeof title, "MoE layer %zu: share of tokens per expert over steps", l);
        svg_heatmap(b, title, m, E, bins, NULL, (const char *const *)labels, "expert", "step");
    }
    for (size_t c = 0; c < bins; c++)
        free(labels[c]);
    free(labels);
    free(v);
}

/* One heatmap per MoE layer: rows genres, columns experts, each row the
 * share of that genre's top-k choices going to each expert, over the run. */
static void genre_routing_charts(strbuf_t *b, const report_run_t *r)
{
    char *genres[32];
    size_t ng = 0, L = 0, E = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *g = json_object_get(r->steps[i], "genre_expert_tokens");
        const char *key;
        json_t *val;
        if (!g || !json_is_object(g))
            continue;
        json_object_foreach(g, key, val) {
            size_t j = 0;
            while (j < ng && strcmp(genres[j], key))
                j++;
            if (j == ng && ng < 32) {
                genres[ng] = strdup(key);
                if (!genres[ng])
                    fb_fatal(FB_EXIT_INTERNAL, "out of memory");
                ng++;
            }
            if (!L && json_is_array(val) && json_array_size(val)) {
                L = json_array_size(val);
                E = json_array_size(json_array_get(val, 0));
            }
        }
    }
    if (!ng || !L || !E) {
        html_note(b, "No \"genre_expert_tokens\" in metrics.jsonl (a dense model): no genre routing.");
        return;
    }
    double *v = fb_calloc(L * ng * E, sizeof *v);
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *g = json_object_get(r->steps[i], "genre_expert_tokens");
        if (!g || !json_is_object(g))
            continue;
        for (size_t j = 0; j < ng; j++) {
            json_t *layers = json_object_get(g, genres[j]);
            for (size_t l = 0; layers && l < L && l < json_array_size(layers); l++) {
                json_t *row = json_array_get(layers, l);
                for (size_t e = 0; e < E && e < json_array_size(row); e++)
                    v[(l * ng + j) * E + e] += json_number_value(json_array_get(row, e));
            }
        }
    }
    for (size_t l = 0; l < L; l++) {
        double *m = v + l * ng * E;
        for (size_t j = 0; j < ng; j++) {
            double tot = 0;
            for (size_t e = 0; e < E; e++)
                tot += m[j * E + e];
            for (size_t e = 0; e < E && tot > 0; e++)
                m[j * E + e] /= tot;
        }
        char title[96];
        snprintf(title, sizeof title, "MoE layer %zu: share of each genre's choices per expert", l);
        svg_heatmap(b, title, m, ng, E, (const char *const *)genres, NULL, "genre", "expert");
    }
    for (size_t j = 0; j < ng; j++)
        free(genres[j]);
    free(v);
}

static void checkpoint_table(strbuf_t *b, const report_run_t *r)
{
    report_ckpts_t c;
    report_ckpts_list(r, &c);
    if (!c.n) {
        html_note(b, "No checkpoint in %s.", c.dir);
    } else {
        sb_printf(b, "<p>In ");
        sb_xml(b, c.dir);
        sb_printf(b, ":</p>\n<table class=\"checkpoints\">\n<tr><th>file</th><th>MiB</th><th></th></tr>\n");
        for (size_t i = 0; i < c.n; i++) {
            sb_printf(b, "<tr><td>");
            sb_xml(b, c.names[i]);
            sb_printf(b, "</td><td>%.1f</td><td>%s</td></tr>\n", c.bytes[i] / 1048576.0,
                      !strcmp(c.names[i], c.latest) ? "latest" : "");
        }
        sb_printf(b, "</table>\n");
    }
    report_ckpts_free(&c);
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int report_run(const char *run_dir, const char *out_dir)
{
    report_run_t r;
    report_run_load(&r, run_dir);
    const report_run_t *runs[1] = {&r};
    summary_t sum;
    summary_build(&r, &sum);

    strbuf_t md = {0}, h = {0};
    sb_printf(&md, "# fabula run %s\n\n", run_dir);
    summary_markdown(&sum, &md);

    char title[512];
    snprintf(title, sizeof title, "fabula run %s", run_dir);
    html_begin(&h, title);
    html_h2(&h, "summary", "Summary");
    html_summary(&h, &sum);
    html_h2(&h, "loss", "Loss and learning rate");
    charts_losses(&h, runs, 1);
    charts_metric(&h, runs, 1, "lr", "Learning rate", "lr", 1);
    charts_loss_note(&h);
    html_h2(&h, "health", "Gradients, router losses, dropped tokens, loss scale");
    health_charts(&h, &r);
    html_h2(&h, "throughput", "Throughput and MFU");
    charts_metric(&h, runs, 1, "tokens_per_s", "Tokens per second", "tokens/s", 1);
    charts_mfu(&h, runs, 1);
    histogram_step_time(&h, &r);
    html_h2(&h, "time", "Where the time goes");
    time_split_chart(&h, &r);
    charts_rank_spread(&h, &r);
    html_h2(&h, "experts", "Expert load per layer");
    expert_load_charts(&h, &r);
    histogram_expert_tokens(&h, &r);
    html_h2(&h, "genres", "Genre to expert routing per layer");
    genre_routing_charts(&h, &r);
    html_h2(&h, "bottleneck", "Bottleneck verdicts");
    verdict_table(&h, &r);
    html_h2(&h, "layout", "Config and layout");
    config_table(&h, &r);
    html_h2(&h, "checkpoints", "Checkpoints");
    checkpoint_table(&h, &r);
    html_end(&h);

    char *dir = out_dir ? strdup(out_dir) : join(run_dir, "report");
    if (!dir)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    fs_mkdirs(dir);
    char *ph = join(dir, "report.html"), *pm = join(dir, "summary.md");
    sb_write_file(&h, ph);
    sb_write_file(&md, pm);
    fputs(md.s, stdout);
    fflush(stdout);
    fprintf(stderr, "fabula report: wrote %s and %s\n", ph, pm);
    free(ph);
    free(pm);
    free(dir);
    sb_free(&md);
    sb_free(&h);
    summary_free(&sum);
    report_run_free(&r);
    return FB_EXIT_OK;
}
