/* `fabula report --compare`: runs overlaid on the same charts, and one
 * table row per run (for the scaling studies and ablations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "report/html.h"
#include "report/report.h"
#include "report/report_charts.h"
#include "report/run_data.h"
#include "report/strbuf_file.h"
#include "util/error.h"

static void row(strbuf_t *md, strbuf_t *h, const report_run_t *r)
{
    char cells[8][128];
    snprintf(cells[0], sizeof cells[0], "%s", r->dir);
    const int world = report_world(r);
    snprintf(cells[1], sizeof cells[1], world > 0 ? "%d" : "-", world);
    double v = NAN, best = INFINITY, st;
    report_num(r->steps[r->nsteps - 1], "step", &v);
    snprintf(cells[2], sizeof cells[2], "%.0f", v);
    v = NAN;
    report_num(r->steps[r->nsteps - 1], "loss", &v);
    snprintf(cells[3], sizeof cells[3], isnan(v) ? "-" : "%.4f", v);
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "valid_lm_loss", &v) && v < best)
            best = v;
    snprintf(cells[4], sizeof cells[4], isfinite(best) ? "%.4f" : "-", best);
    size_t n;
    const double tps = report_tokens_per_s(r, &n);
    snprintf(cells[5], sizeof cells[5], n ? "%.1f" : "-", tps);
    snprintf(cells[6], sizeof cells[6], n && world > 0 ? "%.1f" : "-", world > 0 ? tps / world : 0);
    double sum;
    n = report_sum_measured(r, "mfu", &sum, &st);
    snprintf(cells[7], sizeof cells[7], n ? "%.2f" : "-", n ? 100 * sum / n : 0);
    sb_printf(md, "|");
    sb_printf(h, "<tr>");
    for (int c = 0; c < 8; c++) {
        sb_printf(md, " %s |", cells[c]);
        sb_printf(h, "<td>");
        sb_xml(h, cells[c]);
        sb_printf(h, "</td>");
    }
    sb_printf(md, "\n");
    sb_printf(h, "</tr>\n");
}

int report_compare(const char *const *dirs, size_t n, const char *out_dir)
{
    report_run_t *runs = fb_calloc(n, sizeof *runs);
    const report_run_t **ptrs = fb_calloc(n, sizeof *ptrs);
    for (size_t i = 0; i < n; i++) {
        report_run_load(&runs[i], dirs[i]);
        ptrs[i] = &runs[i];
    }
    static const char *const head[8] = {"run", "ranks", "last step", "final loss", "lowest validation loss",
                                        "tokens/s", "tokens/s per rank", "MFU %"};
    strbuf_t md = {0}, h = {0};
    sb_printf(&md, "# fabula runs compared\n\n|");
    html_begin(&h, "fabula runs compared");
    sb_printf(&h, "<table class=\"compare\">\n<tr>");
    for (int c = 0; c < 8; c++) {
        sb_printf(&md, " %s |", head[c]);
        sb_printf(&h, "<th>%s</th>", head[c]);
    }
    sb_printf(&md, "\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    sb_printf(&h, "</tr>\n");
    for (size_t i = 0; i < n; i++)
        row(&md, &h, &runs[i]);
    sb_printf(&h, "</table>\n");
    sb_printf(&md, "\ntokens/s: the tokens of the measured steps over their summed step time, the first step of "
                   "each process left out; MFU: the mean of \"mfu\" over the same steps; \"-\": not recorded.\n");
    html_note(&h, "tokens/s: the tokens of the measured steps over their summed step time, the first step of "
                  "each process left out. The legends name each run by its directory's last component.");
    html_h2(&h, "loss", "Loss and learning rate");
    charts_losses(&h, ptrs, n);
    charts_metric(&h, ptrs, n, "lr", "Learning rate", "lr", 1);
    charts_loss_note(&h);
    html_h2(&h, "throughput", "Throughput and MFU");
    charts_metric(&h, ptrs, n, "tokens_per_s", "Tokens per second", "tokens/s", 1);
    charts_mfu(&h, ptrs, n);
    charts_metric(&h, ptrs, n, "step_time", "Step time (rank 0)", "seconds", 1);
    html_end(&h);

    const char *dir = out_dir ? out_dir : ".";
    fs_mkdirs(dir);
    size_t len = strlen(dir) + 16;
    char *ph = fb_malloc(len), *pm = fb_malloc(len);
    snprintf(ph, len, "%s/compare.html", dir);
    snprintf(pm, len, "%s/compare.md", dir);
    sb_write_file(&h, ph);
    sb_write_file(&md, pm);
    fputs(md.s, stdout);
    fflush(stdout);
    fprintf(stderr, "fabula report: wrote %s and %s\n", ph, pm);
    free(ph);
    free(pm);
    sb_free(&md);
    sb_free(&h);
    for (size_t i = 0; i < n; i++)
        report_run_free(&runs[i]);
    free(runs);
    free(ptrs);
    return FB_EXIT_OK;
}
