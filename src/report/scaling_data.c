/* The figures of a scaling sweep's run directories and of its points. */
#include "report/scaling_data.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/run_data.h"
#include "util/error.h"

const char *const scaling_phase_names[SCALING_PHASES] = {"data",      "forward",    "backward", "comm_wait",
                                                         "optimizer", "checkpoint", "imbalance"};

/* The steps that count: every line but the warm-up ones, or all of them
 * when every line is warm-up (a run of one step), as report_tokens_per_s. */
static int counts(const report_run_t *r, size_t i, size_t measured)
{
    return !measured || !report_is_warmup(r, i);
}

/* The time split's sums over the measured steps that carry "time": a save
 * is timed outside the step and reported with the next one, so the wall
 * is step_time + time.checkpoint, as the console's split. */
static void split_sums(const report_run_t *r, size_t measured, scaling_run_t *o)
{
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *s = r->steps[i];
        double st, fw, bw, opt = 0, cw = 0, im = 0, ck = 0;
        if (!counts(r, i, measured) || !report_num(s, "step_time", &st) || !report_num(s, "time.forward", &fw) ||
            !report_num(s, "time.backward", &bw))
            continue;
        report_num(s, "time.optimizer", &opt);
        report_num(s, "time.comm_wait", &cw);
        report_num(s, "time.imbalance", &im);
        report_num(s, "time.checkpoint", &ck);
        o->split_wall += st + ck;
        o->split_comp += fw + bw + opt;
        o->split_comm += cw;
        o->split_imb += im;
        o->split_steps++;
    }
}

/* Each phase's min / median / max over ranks, summed over the measured
 * steps that gathered them (step 1, every steps_per_print, the last). */
static void rank_sums(const report_run_t *r, size_t measured, scaling_run_t *o)
{
    char a[64], b[64], c[64];
    for (int p = 0; p < SCALING_PHASES; p++)
        for (size_t i = 0; i < r->nsteps; i++) {
            double lo, med, hi;
            snprintf(a, sizeof a, "ranks.time_min.%s", scaling_phase_names[p]);
            snprintf(b, sizeof b, "ranks.time_median.%s", scaling_phase_names[p]);
            snprintf(c, sizeof c, "ranks.time_max.%s", scaling_phase_names[p]);
            if (!counts(r, i, measured) || !report_num(r->steps[i], a, &lo) || !report_num(r->steps[i], b, &med) ||
                !report_num(r->steps[i], c, &hi))
                continue;
            o->rank_min[p] += lo;
            o->rank_med[p] += med;
            o->rank_max[p] += hi;
            o->rank_steps[p]++;
        }
}

/* The start line of jobs.jsonl whose node carried the most threads per
 * CPU: a resumed run may have moved, and its worst job is what to flag. */
static void node_load(const report_run_t *r, scaling_run_t *o)
{
    double worst = -1;
    for (size_t i = 0; i < r->njobs; i++) {
        json_t *e = json_object_get(r->jobs[i], "event");
        double nr, nc, th = 1;
        if (!json_is_string(e) || strcmp(json_string_value(e), "start") != 0 ||
            !report_num(r->jobs[i], "node_ranks", &nr) || !report_num(r->jobs[i], "node_cpus", &nc) || nr < 1 ||
            nc < 1)
            continue;
        if (!report_num(r->jobs[i], "threads", &th) || th < 1)
            th = 1;
        if (nr * th / nc > worst) {
            worst = nr * th / nc;
            o->node_ranks = (int)nr;
            o->node_cpus = (int)nc;
            o->threads = (int)th;
        }
    }
}

/* DIR/plan_time.json, the sweep's `fabula plan time --json` of this run's
 * config and rank count; absent: no prediction. */
static void prediction(const char *dir, scaling_run_t *o)
{
    char *path = report_path_join(dir, "plan_time.json");
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT)
            fb_fatal(FB_EXIT_IO, "cannot read '%s': %s", path, strerror(errno));
        free(path);
        return;
    }
    json_error_t err;
    json_t *j = json_loadf(f, 0, &err);
    fclose(f);
    if (!j)
        fb_fatal(FB_EXIT_DATA, "%s:%d: not JSON (%s): expected the output of `fabula plan time --json`", path,
                 err.line, err.text);
    double world;
    json_t *m = json_object_get(j, "machine");
    if (!report_num(j, "step_s", &o->pred_step_s) || !report_num(j, "tokens_per_s", &o->pred_tps) ||
        !report_num(j, "world", &world) || !json_is_string(m) || !(o->pred_step_s > 0))
        fb_fatal(FB_EXIT_DATA,
                 "%s: no \"step_s\" > 0, \"tokens_per_s\", \"world\" and \"machine\": expected the output of "
                 "`fabula plan time --json`",
                 path);
    if ((int)world != o->ranks)
        fb_fatal(FB_EXIT_DATA, "%s: a prediction for %d ranks, but the run has %d", path, (int)world, o->ranks);
    snprintf(o->machine, sizeof o->machine, "%s", json_string_value(m));
    o->have_pred = 1;
    json_decref(j);
    free(path);
}

void scaling_run_read(const char *dir, scaling_run_t *o)
{
    memset(o, 0, sizeof *o);
    report_run_t r;
    report_run_load(&r, dir);
    o->dir = dir;
    o->ranks = report_world(&r);
    if (o->ranks < 1)
        fb_fatal(FB_EXIT_DATA,
                 "%s: cannot tell the number of ranks (no \"ranks.world\" in metrics.jsonl, no batch sizes in "
                 "config.json)",
                 dir);
    o->tps = report_tokens_per_s(&r, &o->nsteps);
    if (o->nsteps == 0 || !(o->tps > 0))
        fb_fatal(FB_EXIT_DATA, "%s: no step with \"tokens\" and \"step_time\" in metrics.jsonl", dir);
    double tok = 0, t;
    size_t k = 0, measured = 0;
    for (size_t s = 0; s < r.nsteps; s++) {
        measured += !report_is_warmup(&r, s);
        if (report_num(r.steps[s], "tokens", &t)) {
            tok += t;
            k++;
        }
    }
    o->tokens_per_step = k ? tok / (double)k : NAN;
    /* the mean step time of the steps the throughput counts */
    double secs = 0, st;
    for (size_t s = 0; s < r.nsteps; s++)
        if (counts(&r, s, measured) && report_num(r.steps[s], "tokens", &t) &&
            report_num(r.steps[s], "step_time", &st))
            secs += st;
    o->step_s = secs / (double)o->nsteps;
    split_sums(&r, measured, o);
    rank_sums(&r, measured, o);
    o->mem_bytes = report_memory_bytes(&r);
    node_load(&r, o);
    report_run_free(&r);
    prediction(dir, o);
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median of v[n], n >= 1 (sorts v) */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int same_batch(double a, double b)
{
    return fabs(a - b) <= 0.01 * fmax(fabs(a), fabs(b));
}

static int by_point(const void *a, const void *b)
{
    const scaling_point_t *p = a, *q = b;
    if (p->ranks != q->ranks)
        return (p->ranks > q->ranks) - (p->ranks < q->ranks);
    return (p->tokens_per_step > q->tokens_per_step) - (p->tokens_per_step < q->tokens_per_step);
}

static void reduce(scaling_point_t *p)
{
    double *v = fb_malloc(p->nruns * sizeof *v), wall = 0, comp = 0, comm = 0, imb = 0;
    size_t split = 0;
    double worst = -1;
    p->tps_min = INFINITY;
    p->tps_max = -INFINITY;
    p->mem_mib = NAN;
    for (size_t k = 0; k < p->nruns; k++) {
        const scaling_run_t *r = p->runs[k];
        v[k] = r->tps;
        p->tps_min = fmin(p->tps_min, r->tps);
        p->tps_max = fmax(p->tps_max, r->tps);
        p->nsteps += r->nsteps;
        wall += r->split_wall;
        comp += r->split_comp;
        comm += r->split_comm;
        imb += r->split_imb;
        split += r->split_steps;
        if (!isnan(r->mem_bytes))
            p->mem_mib = isnan(p->mem_mib) ? r->mem_bytes / 1048576.0 : fmax(p->mem_mib, r->mem_bytes / 1048576.0);
        if (r->node_cpus > 0 && (double)r->node_ranks * r->threads / r->node_cpus > worst) {
            worst = (double)r->node_ranks * r->threads / r->node_cpus;
            p->node_ranks = r->node_ranks;
            p->node_cpus = r->node_cpus;
            p->threads = r->threads;
        }
        if (r->have_pred && !p->have_pred) {
            p->have_pred = 1;
            p->pred_step_s = r->pred_step_s;
            p->pred_tps = r->pred_tps;
            p->machine = r->machine;
        }
    }
    p->tps = median(v, p->nruns);
    p->spread_pct = 100 * (p->tps_max - p->tps_min) / p->tps;
    p->tps_rank = p->tps / p->ranks;
    p->compute = p->comm = p->imbalance = NAN;
    if (split && wall > 0) {
        p->compute = 100 * comp / wall;
        p->comm = 100 * comm / wall;
        p->imbalance = 100 * imb / wall;
    }
    for (int ph = 0; ph < SCALING_PHASES; ph++) {
        double lo = 0, med = 0, hi = 0;
        size_t n = 0;
        for (size_t k = 0; k < p->nruns; k++) {
            lo += p->runs[k]->rank_min[ph];
            med += p->runs[k]->rank_med[ph];
            hi += p->runs[k]->rank_max[ph];
            n += p->runs[k]->rank_steps[ph];
        }
        p->rank_min[ph] = n ? lo / (double)n : NAN;
        p->rank_med[ph] = n ? med / (double)n : NAN;
        p->rank_max[ph] = n ? hi / (double)n : NAN;
    }
    p->load = p->node_cpus <= 0                            ? SCALING_FITS
              : p->node_ranks > p->node_cpus               ? SCALING_OVER_RANKS
              : p->node_ranks * p->threads > p->node_cpus ? SCALING_OVER_THREADS
                                                           : SCALING_FITS;
    for (size_t k = 0; k < p->nruns; k++)
        v[k] = p->runs[k]->step_s;
    p->step_s = median(v, p->nruns);
    p->err_pct = p->have_pred ? 100 * (p->pred_step_s - p->step_s) / p->step_s : NAN;
    free(v);
}

size_t scaling_points(const scaling_run_t *runs, size_t n, scaling_point_t **points)
{
    scaling_point_t *p = fb_calloc(n ? n : 1, sizeof *p);
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < np && !(p[j].ranks == runs[i].ranks && same_batch(p[j].tokens_per_step, runs[i].tokens_per_step)))
            j++;
        if (j == np) {
            p[np].ranks = runs[i].ranks;
            p[np].tokens_per_step = runs[i].tokens_per_step;
            p[np].runs = fb_calloc(n, sizeof *p[np].runs);
            np++;
        }
        p[j].runs[p[j].nruns++] = &runs[i];
    }
    for (size_t j = 0; j < np; j++)
        reduce(&p[j]);
    qsort(p, np, sizeof *p, by_point);
    for (size_t j = 0; j < np; j++)
        p[j].eff = p[0].tps_rank > 0 ? p[j].tps_rank / p[0].tps_rank : NAN;
    *points = p;
    return np;
}

void scaling_points_free(scaling_point_t *p, size_t n)
{
    for (size_t j = 0; j < n; j++)
        free(p[j].runs);
    free(p);
}
