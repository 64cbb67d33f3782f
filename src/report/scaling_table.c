/* The tables of a scaling sweep as Markdown; "-" where no run of a point
 * recorded the figure. */
#include "report/scaling_table.h"

#include <math.h>
#include <string.h>

static void cell(strbuf_t *b, const char *fmt, double v)
{
    if (isnan(v))
        sb_printf(b, " - |");
    else
        sb_printf(b, fmt, v);
}

static void main_table(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    sb_printf(b, "| ranks | runs | tokens/s | min-max | spread %% | tokens/s per rank | efficiency | compute %% | "
                 "comm %% | imbalance %% | memory/rank (MiB) | node ranks x threads / CPUs |\n");
    sb_printf(b, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < n; i++) {
        sb_printf(b, "| %d | %zu | %.1f | %.1f-%.1f | %.1f |", p[i].ranks, p[i].nruns, p[i].tps, p[i].tps_min,
                  p[i].tps_max, p[i].spread_pct);
        cell(b, " %.1f |", p[i].tps_rank);
        cell(b, " %.3f |", p[i].eff);
        cell(b, " %.1f |", p[i].compute);
        cell(b, " %.1f |", p[i].comm);
        cell(b, " %.1f |", p[i].imbalance);
        cell(b, " %.1f |", p[i].mem_mib);
        if (p[i].node_cpus > 0)
            sb_printf(b, " %d x %d / %d%s |\n", p[i].node_ranks, p[i].threads, p[i].node_cpus,
                      p[i].load != SCALING_FITS ? " oversubscribed" : "");
        else
            sb_printf(b, " - |\n");
    }
}

/* min / median / max of one phase over ranks, in ms */
static void spread_cell(strbuf_t *b, double lo, double med, double hi)
{
    if (isnan(med))
        sb_printf(b, " - |");
    else
        sb_printf(b, " %.3g / %.3g / %.3g |", 1e3 * lo, 1e3 * med, 1e3 * hi);
}

static void rank_table(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    sb_printf(b, "Time per step over ranks, ms (min / median / max):\n\n| ranks |");
    for (int ph = 0; ph < SCALING_PHASES; ph++)
        sb_printf(b, " %s |", scaling_phase_names[ph]);
    sb_printf(b, "\n|---:|");
    for (int ph = 0; ph < SCALING_PHASES; ph++)
        sb_printf(b, "---:|");
    sb_printf(b, "\n");
    for (size_t i = 0; i < n; i++) {
        sb_printf(b, "| %d |", p[i].ranks);
        for (int ph = 0; ph < SCALING_PHASES; ph++)
            spread_cell(b, p[i].rank_min[ph], p[i].rank_med[ph], p[i].rank_max[ph]);
        sb_printf(b, "\n");
    }
}

static void prediction_table(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    const char *machine = NULL;
    int mixed = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].have_pred) {
            mixed |= machine && strcmp(machine, p[i].machine) != 0;
            machine = machine ? machine : p[i].machine;
        }
    if (!machine) {
        sb_printf(b, "No prediction: no run directory holds plan_time.json (the sweep's --machine FILE writes "
                     "`fabula plan time --json` of each point there).\n");
        return;
    }
    sb_printf(b, "Predicted by `fabula plan time` on machine %s%s:\n\n", mixed ? "files" : machine,
              mixed ? " that differ by point" : "");
    sb_printf(b, "| ranks | measured step (s) | predicted step (s) | error %% | tokens/s | predicted tokens/s |\n");
    sb_printf(b, "|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        sb_printf(b, "| %d | %.4g |", p[i].ranks, p[i].step_s);
        if (p[i].have_pred)
            sb_printf(b, " %.4g | %+.1f |", p[i].pred_step_s, p[i].err_pct);
        else
            sb_printf(b, " - | - |");
        sb_printf(b, " %.1f |", p[i].tps);
        cell(b, " %.1f |", p[i].have_pred ? p[i].pred_tps : NAN);
        sb_printf(b, "\n");
    }
}

static void warnings(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i].load == SCALING_FITS)
            continue;
        sb_printf(b, "\nwarning: the %d-rank point is oversubscribed: %d rank(s) x %d thread(s) on a node of %d "
                     "CPU(s), more %s than CPUs; its ranks wait for cores, so its throughput and efficiency "
                     "measure that sharing, not the scaling.\n",
                  p[i].ranks, p[i].node_ranks, p[i].threads, p[i].node_cpus,
                  p[i].load == SCALING_OVER_RANKS ? "ranks" : "threads");
    }
}

void scaling_tables(strbuf_t *b, const scaling_point_t *p, size_t n)
{
    main_table(b, p, n);
    sb_printf(b, "\n");
    rank_table(b, p, n);
    sb_printf(b, "\n");
    prediction_table(b, p, n);
    warnings(b, p, n);
}
