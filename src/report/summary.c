/* The Markdown summary of a run (report/summary.h). */
#include "report/summary.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

const char *const report_phases[REPORT_NPHASES] = {"data",      "forward",   "backward", "comm_wait",
                                                   "optimizer", "checkpoint", "imbalance"};

void summary_add(summary_t *s, const char *item, const char *fmt, ...)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->item = fb_realloc(s->item, s->cap * sizeof *s->item);
        s->value = fb_realloc(s->value, s->cap * sizeof *s->value);
    }
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->item[s->n] = strdup(item);
    s->value[s->n] = strdup(buf);
    if (!s->item[s->n] || !s->value[s->n])
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    s->n++;
}

static double last_num(const report_run_t *r, const char *path, double *step)
{
    double v;
    for (size_t i = r->nsteps; i-- > 0;)
        if (report_num(r->steps[i], path, &v)) {
            report_num(r->steps[i], "step", step);
            return v;
        }
    return NAN;
}

void summary_build(const report_run_t *r, summary_t *s)
{
    memset(s, 0, sizeof *s);
    double first = 0, last = 0, v, st;
    report_num(r->steps[0], "step", &first);
    report_num(r->steps[r->nsteps - 1], "step", &last);
    summary_add(s, "run directory", "%s", r->dir);
    summary_add(s, "steps", "%zu records, steps %.0f to %.0f", r->nsteps, first, last);
    const int world = report_world(r);
    if (world > 0)
        summary_add(s, "ranks", "%d", world);
    double tokens = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "tokens", &v))
            tokens += v;
    summary_add(s, "tokens", "%.0f", tokens);
    if (report_num(r->steps[r->nsteps - 1], "elapsed", &v))
        summary_add(s, "elapsed (s)", "%.1f", v);
    if (report_num(r->steps[r->nsteps - 1], "loss", &v))
        summary_add(s, "final loss", "%.4f (lm %.4f) at step %.0f", v,
                    report_num(r->steps[r->nsteps - 1], "lm_loss", &st) ? st : NAN, last);
    double best = INFINITY, best_step = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "loss", &v) && v < best) {
            best = v;
            report_num(r->steps[i], "step", &best_step);
        }
    if (isfinite(best))
        summary_add(s, "lowest loss", "%.4f at step %.0f", best, best_step);
    double at;
    v = last_num(r, "valid_lm_loss", &at);
    if (!isnan(v)) {
        double ppl = last_num(r, "valid_ppl", &st);
        if (isnan(ppl))
            ppl = exp(v);
        summary_add(s, "validation lm loss", "%.4f (ppl %.2f) at step %.0f", v, ppl, at);
        json_t *g = NULL;
        for (size_t i = r->nsteps; i-- > 0 && !g;)
            if (report_get(r->steps[i], "valid_lm_loss"))
                g = report_get(r->steps[i], "valid_genre_lm_loss");
        const char *key;
        json_t *val;
        if (g && json_is_object(g)) {
            json_object_foreach(g, key, val) {
                if (!json_is_number(val))
                    continue;
                char item[128];
                snprintf(item, sizeof item, "validation lm loss, %s", key);
                summary_add(s, item, "%.4f", json_number_value(val));
            }
        }
    }
    size_t n;
    const double tps = report_tokens_per_s(r, &n);
    if (n)
        summary_add(s, "tokens/s", "%.1f (mean over %zu steps; the first step of each process left out)", tps, n);
    double sum;
    if ((n = report_sum_measured(r, "mfu", &sum, &st)) > 0)
        summary_add(s, "MFU", "%.2f%% (mean over %zu steps)", 100 * sum / n, n);
    if ((n = report_sum_measured(r, "model_flops_per_s", &sum, &st)) > 0)
        summary_add(s, "model FLOP/s", "%.4g", sum / n);
    /* the time split: each phase's share of the summed step time */
    char split[512] = "";
    size_t len = 0;
    for (int p = 0; p < REPORT_NPHASES; p++) {
        char path[64];
        snprintf(path, sizeof path, "time.%s", report_phases[p]);
        if (report_sum_measured(r, path, &sum, &st) > 0 && st > 0)
            len += (size_t)snprintf(split + len, sizeof split - len, "%s%s %.1f%%", len ? ", " : "",
                                    report_phases[p], 100 * sum / st);
    }
    if (len)
        summary_add(s, "time split", "%s", split);
    const double rss = report_memory_bytes(r);
    if (!isnan(rss))
        summary_add(s, "memory (MiB, largest rank)", "%.1f", rss / 1048576.0);
    /* the verdicts of the gather steps, by how often each was given */
    static const char *const verdicts[] = {"compute", "communication", "imbalance", "input", "memory", "io"};
    size_t counts[6] = {0}, nv = 0;
    const char *last_verdict = NULL;
    double last_vstep = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *j = report_get(r->steps[i], "bottleneck.verdict");
        if (!j || !json_is_string(j))
            continue;
        for (int k = 0; k < 6; k++)
            if (!strcmp(json_string_value(j), verdicts[k]))
                counts[k]++;
        nv++;
        last_verdict = json_string_value(j);
        report_num(r->steps[i], "step", &last_vstep);
    }
    if (nv) {
        char c[256] = "";
        size_t l = 0;
        for (int k = 0; k < 6; k++)
            if (counts[k])
                l += (size_t)snprintf(c + l, sizeof c - l, "%s%s %zu", l ? ", " : "", verdicts[k], counts[k]);
        summary_add(s, "bottleneck", "%s at step %.0f (of %zu verdicts: %s)", last_verdict, last_vstep, nv, c);
    }
    report_ckpts_t ck;
    report_ckpts_list(r, &ck);
    if (ck.n)
        summary_add(s, "checkpoints", "%zu in %s, latest %s", ck.n, ck.dir, ck.latest[0] ? ck.latest : "-");
    else
        summary_add(s, "checkpoints", "none in %s", ck.dir);
    report_ckpts_free(&ck);
}

void summary_markdown(const summary_t *s, strbuf_t *b)
{
    sb_printf(b, "| item | value |\n|---|---|\n");
    for (size_t i = 0; i < s->n; i++)
        sb_printf(b, "| %s | %s |\n", s->item[i], s->value[i]);
}

void summary_free(summary_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->item[i]);
        free(s->value[i]);
    }
    free(s->item);
    free(s->value);
    memset(s, 0, sizeof *s);
}
