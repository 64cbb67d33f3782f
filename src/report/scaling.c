/* `fabula report --scaling`: the run directories of a sweep as one row per
 * point (the runs of one rank count and batch: repeats), sorted by ranks.
 * Parallel efficiency is each point's median per-rank throughput over the
 * smallest point's, which is the usual efficiency for weak scaling and
 * (tokens/s) / (ranks/ranks0 * tokens/s0) for strong scaling alike. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/atomic_file.h"
#include "report/report.h"
#include "report/run_data.h"
#include "report/scaling_chart.h"
#include "report/scaling_data.h"
#include "report/scaling_table.h"
#include "report/strbuf_file.h"
#include "util/error.h"

static const char *kind(const scaling_point_t *p, size_t n)
{
    /* strong: the same global batch at every point; weak: the same per rank */
    int strong = 1, weak = 1;
    for (size_t i = 1; i < n; i++) {
        strong &= fabs(p[i].tokens_per_step - p[0].tokens_per_step) <= 0.01 * p[0].tokens_per_step;
        weak &= fabs(p[i].tokens_per_step / p[i].ranks - p[0].tokens_per_step / p[0].ranks) <=
                0.01 * p[0].tokens_per_step / p[0].ranks;
    }
    return n < 2 ? "one point" : strong ? "strong scaling (the same global batch)"
                            : weak     ? "weak scaling (the same batch per rank)"
                                       : "mixed batch sizes";
}

int report_scaling(const char *const *dirs, size_t n, const char *out_dir)
{
    scaling_run_t *runs = fb_calloc(n ? n : 1, sizeof *runs);
    for (size_t i = 0; i < n; i++)
        scaling_run_read(dirs[i], &runs[i]);
    scaling_point_t *p;
    const size_t np = scaling_points(runs, n, &p);

    strbuf_t tab = {0}, md = {0}, svg = {0};
    scaling_tables(&tab, p, np);
    fputs(tab.s, stdout);
    fflush(stdout);

    sb_printf(&md, "# Scaling: %zu runs, %zu points, %s\n\n", n, np, kind(p, np));
    sb_printf(&md, "%s\n", tab.s);
    sb_printf(&md,
              "Throughput is the tokens of the measured steps over their summed step time; the warm-up step "
              "(each process's first: the first line of metrics.jsonl and the first after a resume) is left "
              "out. A point is the runs of one rank count and batch (the sweep's repeats): tokens/s is the "
              "median of its runs, min-max their range and spread %% that range over the median. Efficiency: "
              "median tokens/s per rank over that of the %d-rank point. The time split is rank 0's \"time\" of "
              "the same steps, pooled over the runs, as a share of their step time plus checkpoint time: compute "
              "= forward + backward + optimizer, comm = exposed communication wait, imbalance = waiting for the "
              "slowest rank. Memory: the largest resident set of any rank (\"ranks.rss_max_bytes\"; rank 0's "
              "\"rss_bytes\" when absent). Node: jobs.jsonl's ranks on rank 0's node, threads per rank and the "
              "CPUs they may use; oversubscribed where ranks or ranks x threads exceed the CPUs. Time over ranks: "
              "each phase's min, median and max over the ranks (\"ranks.time_min\", \"time_median\", "
              "\"time_max\"), averaged over the measured steps that gathered them. Error: predicted less "
              "measured step time over the measured (the median of the runs' mean step time). \"-\": no run of "
              "the point has the field.\n\n",
              p[0].ranks);
    sb_printf(&md, "| ranks | run directory | measured steps | tokens per step | tokens/s |\n|---:|---|---:|---:|---:|\n");
    for (size_t j = 0; j < np; j++)
        for (size_t k = 0; k < p[j].nruns; k++)
            sb_printf(&md, "| %d | %s | %zu | %.0f | %.1f |\n", p[j].ranks, p[j].runs[k]->dir, p[j].runs[k]->nsteps,
                      p[j].runs[k]->tokens_per_step, p[j].runs[k]->tps);
    scaling_chart(&svg, p, np);

    fs_mkdirs(out_dir);
    char *pm = report_path_join(out_dir, "scaling.md"), *ps = report_path_join(out_dir, "scaling.svg");
    sb_write_file(&md, pm);
    sb_write_file(&svg, ps);
    fprintf(stderr, "fabula report: wrote %s and %s\n", pm, ps);
    free(pm);
    free(ps);
    sb_free(&tab);
    sb_free(&md);
    sb_free(&svg);
    scaling_points_free(p, np);
    free(runs);
    return FB_EXIT_OK;
}
