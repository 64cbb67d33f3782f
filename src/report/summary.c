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

static const char *job_str(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return v && json_is_string(v) ? json_string_value(v) : NULL;
}

static int job_is(json_t *j, const char *event)
{
    const char *e = job_str(j, "event");
    return e && !strcmp(e, event);
}

/* What jobs.jsonl says (docs/run-dir.md): when the run started, the
 * version and command of its last job, where jobs resumed, how it ended. */
static void jobs_items(const report_run_t *r, summary_t *s)
{
    json_t *first = NULL, *last_start = NULL, *last_end = NULL;
    size_t nstart = 0;
    char resumed[512] = "";
    size_t rl = 0;
    for (size_t i = 0; i < r->njobs; i++) {
        json_t *j = r->jobs[i];
        double step;
        if (job_is(j, "start")) {
            first = first ? first : j;
            last_start = j;
            last_end = NULL;
            nstart++;
            /* a run requeued all along: the first resumes, then "..." */
            if (nstart > 1 && report_num(j, "step", &step) && rl < sizeof resumed - 32)
                rl += (size_t)snprintf(resumed + rl, sizeof resumed - rl, "%s%.0f", rl ? ", " : "", step);
            else if (nstart > 1 && rl >= sizeof resumed - 32 && rl < sizeof resumed - 5)
                rl += (size_t)snprintf(resumed + rl, sizeof resumed - rl, ", ...");
        } else if (job_is(j, "end")) {
            last_end = j;
        }
    }
    if (!first)
        return;
    summary_add(s, "started", "%s on %s", job_str(first, "time") ? job_str(first, "time") : "?",
                job_str(first, "host") ? job_str(first, "host") : "?");
    if (job_str(last_start, "version"))
        summary_add(s, "version", "fabula %s", job_str(last_start, "version"));
    if (job_str(last_start, "command"))
        summary_add(s, "command", "%s", job_str(last_start, "command"));
    if (nstart > 1)
        summary_add(s, "jobs", "%zu, resumed from step %s", nstart, resumed);
    else
        summary_add(s, "jobs", "1");
    double step = 0, code = 0, ck;
    if (!last_end) {
        summary_add(s, "final status", "no end line after the job started at %s: killed (SIGKILL, the time "
                    "limit's hard kill, a lost node) or still running",
                    job_str(last_start, "time") ? job_str(last_start, "time") : "?");
        return;
    }
    report_num(last_end, "step", &step);
    report_num(last_end, "exit_code", &code);
    const char *state = job_str(last_end, "state") ? job_str(last_end, "state") : "?";
    char detail[600] = "";
    if (job_str(last_end, "signal"))
        snprintf(detail, sizeof detail, " by %s", job_str(last_end, "signal"));
    else if (job_str(last_end, "message"))
        snprintf(detail, sizeof detail, ": %s", job_str(last_end, "message"));
    char ckpt[64] = "";
    if (report_num(last_end, "checkpoint_step", &ck))
        snprintf(ckpt, sizeof ckpt, ", checkpoint of step %.0f", ck);
    summary_add(s, "final status", "%s at step %.0f%s (exit %.0f%s) at %s", state, step, detail, code, ckpt,
                job_str(last_end, "time") ? job_str(last_end, "time") : "?");
}

void summary_build(const report_run_t *r, summary_t *s)
{
    memset(s, 0, sizeof *s);
    double first = 0, last = 0, v, st;
    report_num(r->steps[0], "step", &first);
    report_num(r->steps[r->nsteps - 1], "step", &last);
    summary_add(s, "run directory", "%s", r->dir);
    jobs_items(r, s);
    summary_add(s, "steps", "%zu records, steps %.0f to %.0f", r->nsteps, first, last);
    const int world = report_world(r);
    if (world > 0)
        summary_add(s, "ranks", "%d", world);
    double tokens = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "tokens", &v))
            tokens += v;
    summary_add(s, "tokens", "%.0f", tokens);
    size_t procs;
    const double elapsed = report_elapsed_total(r, &procs);
    if (report_num(r->steps[r->nsteps - 1], "elapsed", &v)) {
        /* each process's "elapsed" counts from its own start */
        if (procs > 1)
            summary_add(s, "elapsed (s)", "%.1f over %zu processes (the last %.1f)", elapsed, procs, v);
        else
            summary_add(s, "elapsed (s)", "%.1f", v);
    }
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
    /* the verdicts of the gather steps, by how often each was given, in
     * the order they first came: by name as the log has them, so that a
     * verdict this reader does not know (cpu, pipeline came later) counts */
    enum { MAX_KINDS = 16 };
    const char *kinds[MAX_KINDS];
    size_t counts[MAX_KINDS] = {0}, nk = 0, nv = 0;
    const char *last_verdict = NULL;
    double last_vstep = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *j = report_get(r->steps[i], "bottleneck.verdict");
        if (!j || !json_is_string(j))
            continue;
        size_t k = 0;
        while (k < nk && strcmp(json_string_value(j), kinds[k]))
            k++;
        if (k == nk && nk < MAX_KINDS)
            kinds[nk++] = json_string_value(j);
        if (k < nk)
            counts[k]++;
        nv++;
        last_verdict = json_string_value(j);
        report_num(r->steps[i], "step", &last_vstep);
    }
    if (nv) {
        char c[512] = "";
        size_t l = 0;
        for (size_t k = 0; k < nk && l < sizeof c; k++)
            l += (size_t)snprintf(c + l, sizeof c - l, "%s%s %zu", l ? ", " : "", kinds[k], counts[k]);
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
    for (size_t i = 0; i < s->n; i++) {
        /* a '|' in a value (a command's pipe) would end its cell */
        sb_printf(b, "| %s | ", s->item[i]);
        for (const char *c = s->value[i]; *c; c++)
            sb_printf(b, *c == '|' ? "\\|" : "%c", *c);
        sb_printf(b, " |\n");
    }
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
