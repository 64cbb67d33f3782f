/* `fabula report --scaling`: one row per run of a scaling sweep, sorted by
 * ranks; parallel efficiency is each point's per-rank throughput over the
 * smallest point's, which is the usual efficiency for weak scaling and
 * (tokens/s) / (ranks/ranks0 * tokens/s0) for strong scaling alike. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "report/report.h"
#include "report/run_data.h"
#include "report/strbuf_file.h"
#include "report/svg.h"
#include "util/error.h"

typedef struct point {
    const char *dir;
    int ranks;
    size_t nsteps;          /* measured steps */
    double tokens_per_step; /* mean global batch, tokens */
    double tps, tps_rank, eff;
    double compute, comm, imbalance; /* % of step time; NaN: no "time" field */
    double mem_mib;                  /* NaN: no memory field */
} point_t;

static int by_ranks(const void *a, const void *b)
{
    const point_t *p = a, *q = b;
    return (p->ranks > q->ranks) - (p->ranks < q->ranks);
}

/* The time split over the measured steps that carry "time": shares of their
 * summed step_time + time.checkpoint (a save is timed outside the step and
 * reported with the next one), as the console's split. */
static void time_split(const report_run_t *r, point_t *p)
{
    p->compute = p->comm = p->imbalance = NAN;
    size_t measured = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        measured += !report_is_warmup(r, i);
    double total = 0, comp = 0, comm = 0, imb = 0;
    int any = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *s = r->steps[i];
        double st, fw, bw, opt, cw, im;
        if ((measured && report_is_warmup(r, i)) || !report_num(s, "step_time", &st) ||
            !report_num(s, "time.forward", &fw) || !report_num(s, "time.backward", &bw))
            continue;
        if (!report_num(s, "time.optimizer", &opt))
            opt = 0;
        if (!report_num(s, "time.comm_wait", &cw))
            cw = 0;
        if (!report_num(s, "time.imbalance", &im))
            im = 0;
        double ck;
        if (!report_num(s, "time.checkpoint", &ck))
            ck = 0;
        total += st + ck;
        comp += fw + bw + opt;
        comm += cw;
        imb += im;
        any = 1;
    }
    if (any && total > 0) {
        p->compute = 100 * comp / total;
        p->comm = 100 * comm / total;
        p->imbalance = 100 * imb / total;
    }
}

static void cell(strbuf_t *b, const char *fmt, double v)
{
    if (isnan(v))
        sb_printf(b, " - |");
    else
        sb_printf(b, fmt, v);
}

static void table(strbuf_t *b, const point_t *p, size_t n)
{
    sb_printf(b, "| ranks | tokens/s | tokens/s per rank | efficiency | compute %% | comm %% | imbalance %% | "
                 "memory/rank (MiB) |\n");
    sb_printf(b, "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        sb_printf(b, "| %d |", p[i].ranks);
        cell(b, " %.1f |", p[i].tps);
        cell(b, " %.1f |", p[i].tps_rank);
        cell(b, " %.3f |", p[i].eff);
        cell(b, " %.1f |", p[i].compute);
        cell(b, " %.1f |", p[i].comm);
        cell(b, " %.1f |", p[i].imbalance);
        cell(b, " %.1f |", p[i].mem_mib);
        sb_printf(b, "\n");
    }
}

int report_scaling(const char *const *dirs, size_t n, const char *out_dir)
{
    point_t *p = calloc(n, sizeof *p);
    if (!p)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        report_run_t r;
        report_run_load(&r, dirs[i]);
        p[i].dir = dirs[i];
        p[i].ranks = report_world(&r);
        if (p[i].ranks < 1)
            fb_fatal(FB_EXIT_DATA,
                     "%s: cannot tell the number of ranks (no \"ranks.world\" in metrics.jsonl, no batch sizes in "
                     "config.json)",
                     dirs[i]);
        p[i].tps = report_tokens_per_s(&r, &p[i].nsteps);
        if (p[i].nsteps == 0)
            fb_fatal(FB_EXIT_DATA, "%s: no step with \"tokens\" and \"step_time\" in metrics.jsonl", dirs[i]);
        double tok = 0, t;
        size_t k = 0;
        for (size_t s = 0; s < r.nsteps; s++)
            if (report_num(r.steps[s], "tokens", &t)) {
                tok += t;
                k++;
            }
        p[i].tokens_per_step = k ? tok / k : NAN;
        p[i].tps_rank = p[i].tps / p[i].ranks;
        time_split(&r, &p[i]);
        p[i].mem_mib = report_memory_bytes(&r) / (1024.0 * 1024.0);
        report_run_free(&r);
    }
    qsort(p, n, sizeof *p, by_ranks);
    for (size_t i = 0; i < n; i++)
        p[i].eff = p[0].tps_rank > 0 ? p[i].tps_rank / p[0].tps_rank : NAN;

    strbuf_t tab = {0}, md = {0}, svg = {0};
    table(&tab, p, n);
    fputs(tab.s, stdout);
    fflush(stdout);

    /* strong: the same global batch at every point; weak: the same per rank */
    int strong = 1, weak = 1;
    for (size_t i = 1; i < n; i++) {
        strong &= fabs(p[i].tokens_per_step - p[0].tokens_per_step) <= 0.01 * p[0].tokens_per_step;
        weak &= fabs(p[i].tokens_per_step / p[i].ranks - p[0].tokens_per_step / p[0].ranks) <=
                0.01 * p[0].tokens_per_step / p[0].ranks;
    }
    sb_printf(&md, "# Scaling: %zu runs, %s\n\n", n,
              n < 2 ? "one point" : strong ? "strong scaling (the same global batch)"
                                 : weak  ? "weak scaling (the same batch per rank)"
                                         : "mixed batch sizes");
    sb_printf(&md, "%s\n", tab.s);
    sb_printf(&md, "Throughput is the tokens of the measured steps over their summed step time; the warm-up step "
                   "(each process's first: the first line of metrics.jsonl and the first after a resume) is left "
                   "out. Efficiency: tokens/s per rank over that of the %d-rank point. The time split is rank 0's "
                   "\"time\" of the same steps as a share of their step time plus checkpoint time: compute = forward + backward + "
                   "optimizer, comm = exposed communication wait, imbalance = waiting for the slowest rank. "
                   "Memory: the largest resident set of any rank (\"ranks.rss_max_bytes\"; rank 0's \"rss_bytes\" "
                   "when absent). \"-\": the run has no such field.\n\n",
              p[0].ranks);
    sb_printf(&md, "| ranks | run directory | measured steps | tokens per step |\n|---:|---|---:|---:|\n");
    for (size_t i = 0; i < n; i++)
        sb_printf(&md, "| %d | %s | %zu | %.0f |\n", p[i].ranks, p[i].dir, p[i].nsteps, p[i].tokens_per_step);

    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *one = malloc(n * sizeof *one);
    if (!x || !y || !one)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        x[i] = p[i].ranks;
        y[i] = p[i].eff;
        one[i] = 1.0;
    }
    const svg_series_t s[2] = {{"efficiency", x, y, n, 0}, {"ideal", x, one, n, 1}};
    const svg_axes_t ax = {.title = "Parallel efficiency vs ranks", .xlabel = "ranks", .ylabel = "efficiency",
                           .points = 1, .y_from_0 = 1};
    svg_lines(&svg, &ax, s, 2);

    fs_mkdirs(out_dir);
    char *pm = report_path_join(out_dir, "scaling.md"), *ps = report_path_join(out_dir, "scaling.svg");
    sb_write_file(&md, pm);
    /* a standalone file wants the XML declaration */
    strbuf_t file = {0};
    sb_printf(&file, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n%s", svg.s);
    sb_write_file(&file, ps);
    fprintf(stderr, "fabula report: wrote %s and %s\n", pm, ps);
    free(pm);
    free(ps);
    free(x);
    free(y);
    free(one);
    sb_free(&tab);
    sb_free(&md);
    sb_free(&svg);
    sb_free(&file);
    free(p);
    return FB_EXIT_OK;
}
