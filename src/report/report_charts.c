/* Line charts of metrics.jsonl fields (report/report_charts.h). */
#include "report/report_charts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"
#include "report/svg.h"
#include "util/error.h"

/* Series under construction: names and arrays owned here. */
typedef struct series_set {
    svg_series_t s[64];
    char *names[64];
    double *bufs[128];
    size_t n, nbufs;
} series_set_t;

static void add(series_set_t *ss, const report_run_t *r, const char *path, const char *name, int dashed,
                double scale)
{
    double *x, *y;
    size_t k = report_series(r, path, &x, &y);
    if (!k || ss->n == 64) {
        free(x);
        free(y);
        return;
    }
    for (size_t i = 0; i < k; i++)
        y[i] *= scale;
    ss->names[ss->n] = strdup(name);
    if (!ss->names[ss->n])
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    ss->s[ss->n] = (svg_series_t){.name = ss->names[ss->n], .x = x, .y = y, .n = k, .dashed = dashed};
    ss->bufs[ss->nbufs++] = x;
    ss->bufs[ss->nbufs++] = y;
    ss->n++;
}

static void done(series_set_t *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        free(ss->names[i]);
    for (size_t i = 0; i < ss->nbufs; i++)
        free(ss->bufs[i]);
    memset(ss, 0, sizeof *ss);
}

double *charts_mark_resumes(svg_axes_t *ax, const report_run_t *const *runs, size_t n)
{
    /* several runs overlaid: whose resumes would a line mark? */
    if (n != 1)
        return NULL;
    double *m;
    ax->nmarks = report_resumes(runs[0], &m);
    ax->marks = m;
    ax->mark_name = "resumed";
    return m;
}

/* svg_lines with the resume marks of a single run. */
static void lines(strbuf_t *b, svg_axes_t ax, const series_set_t *ss, const report_run_t *const *runs, size_t n)
{
    double *m = charts_mark_resumes(&ax, runs, n);
    svg_lines(b, &ax, ss->s, ss->n);
    free(m);
}

/* "name" for one run, "run: name" for several. */
static void label(char *out, size_t n, const report_run_t *r, size_t nruns, const char *what)
{
    if (nruns == 1)
        snprintf(out, n, "%s", what);
    else
        snprintf(out, n, "%s%s%s", report_run_name(r), what[0] ? ": " : "", what);
}

void charts_losses(strbuf_t *b, const report_run_t *const *runs, size_t n)
{
    series_set_t ss = {0};
    char name[160];
    for (size_t i = 0; i < n; i++) {
        label(name, sizeof name, runs[i], n, n == 1 ? "loss" : "");
        add(&ss, runs[i], "loss", name, 0, 1);
        if (n == 1)
            add(&ss, runs[i], "lm_loss", "lm_loss", 0, 1);
    }
    const svg_axes_t ax = {.title = "Training loss", .xlabel = "step", .ylabel = "nats"};
    lines(b, ax, &ss, runs, n);
    done(&ss);

    for (size_t i = 0; i < n; i++) {
        label(name, sizeof name, runs[i], n, "valid_lm_loss");
        add(&ss, runs[i], "valid_lm_loss", name, 1, 1);
    }
    if (ss.n) {
        const svg_axes_t av = {.title = "Validation LM loss (held-out novels)", .xlabel = "step", .ylabel = "nats",
                               .points = 1};
        lines(b, av, &ss, runs, n);
    } else {
        html_note(b, "No \"valid_lm_loss\" in metrics.jsonl (run.eval_interval = 0): no validation loss.");
    }
    done(&ss);

    /* per genre: every genre any evaluation step names */
    for (size_t i = 0; i < n; i++) {
        const report_run_t *r = runs[i];
        char seen[16][64];
        size_t ns = 0;
        for (size_t k = 0; k < r->nsteps; k++) {
            json_t *g = json_object_get(r->steps[k], "valid_genre_lm_loss");
            const char *key;
            json_t *val;
            if (!g || !json_is_object(g))
                continue;
            json_object_foreach(g, key, val) {
                size_t j = 0;
                while (j < ns && strcmp(seen[j], key))
                    j++;
                if (j < ns || ns == 16)
                    continue;
                snprintf(seen[ns++], sizeof seen[0], "%s", key);
                char path[96];
                snprintf(path, sizeof path, "valid_genre_lm_loss.%s", key);
                label(name, sizeof name, r, n, key);
                add(&ss, r, path, name, 0, 1);
            }
        }
    }
    if (ss.n) {
        const svg_axes_t ag = {.title = "Validation LM loss per genre", .xlabel = "step", .ylabel = "nats",
                               .points = 1};
        lines(b, ag, &ss, runs, n);
    } else {
        html_note(b, "No \"valid_genre_lm_loss\" in metrics.jsonl: no validation loss per genre.");
    }
    done(&ss);
}

void charts_loss_note(strbuf_t *b)
{
    html_note(b, "metrics.jsonl records the training loss of the whole batch only; per genre, the validation "
                 "loss shows how each genre is learnt.");
}

void charts_metric(strbuf_t *b, const report_run_t *const *runs, size_t n, const char *path, const char *title,
                   const char *ylabel, int y_from_0)
{
    series_set_t ss = {0};
    char name[160];
    for (size_t i = 0; i < n; i++) {
        label(name, sizeof name, runs[i], n, n == 1 ? path : "");
        add(&ss, runs[i], path, name, 0, 1);
    }
    if (ss.n) {
        const svg_axes_t ax = {.title = title, .xlabel = "step", .ylabel = ylabel, .y_from_0 = y_from_0};
        lines(b, ax, &ss, runs, n);
    } else {
        html_note(b, "No \"%s\" in metrics.jsonl: no chart of it.", path);
    }
    done(&ss);
}

void charts_mfu(strbuf_t *b, const report_run_t *const *runs, size_t n)
{
    series_set_t ss = {0};
    char name[160];
    for (size_t i = 0; i < n; i++) {
        label(name, sizeof name, runs[i], n, n == 1 ? "MFU" : "");
        add(&ss, runs[i], "mfu", name, 0, 100);
    }
    if (ss.n) {
        const svg_axes_t ax = {.title = "Model FLOPs utilisation", .xlabel = "step", .ylabel = "% of peak",
                               .y_from_0 = 1};
        lines(b, ax, &ss, runs, n);
    } else {
        html_note(b, "No \"mfu\" in metrics.jsonl (the monitoring's FLOP count): no MFU chart.");
    }
    done(&ss);
}

void charts_rank_spread(strbuf_t *b, const report_run_t *r)
{
    series_set_t ss = {0};
    add(&ss, r, "ranks.step_time_max", "slowest rank", 0, 1);
    add(&ss, r, "ranks.step_time_mean", "mean over ranks", 0, 1);
    add(&ss, r, "ranks.step_time_min", "fastest rank", 0, 1);
    if (ss.n) {
        const svg_axes_t ax = {.title = "Step time across ranks (gather steps)",
                               .xlabel = "step", .ylabel = "seconds", .points = 1, .y_from_0 = 1};
        lines(b, ax, &ss, &r, 1);
    } else {
        html_note(b, "No \"ranks\" field in metrics.jsonl (the monitoring's gather steps): no per-rank spread.");
    }
    done(&ss);
}
