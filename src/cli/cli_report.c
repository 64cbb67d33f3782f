/* `fabula report`: a run directory as an HTML page and a Markdown summary,
 * runs overlaid, or a scaling table (src/report; docs/monitoring.md). One
 * process, no mpiexec needed. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "report/report.h"
#include "util/error.h"

static void report_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula report RUN_DIR [--output DIR]\n"
            "       fabula report --compare RUN_A RUN_B ... [--output DIR]\n"
            "       fabula report --scaling RUN_DIR... [--output DIR]\n"
            "\n"
            "Reads what `fabula train` wrote in run directories (config.json, metrics.jsonl,\n"
            "checkpoints; docs/run-dir.md); one process, no mpiexec needed.\n"
            "\n"
            "  RUN_DIR          one run: DIR/report.html (one self-contained page, inline SVG,\n"
            "                   no script, no network) and DIR/summary.md, also printed;\n"
            "                   DIR defaults to RUN_DIR/report\n"
            "  --compare        several runs overlaid: DIR/compare.html and DIR/compare.md;\n"
            "                   DIR defaults to the current directory\n"
            "  --scaling        one row per point of a scaling sweep (the runs of one rank\n"
            "                   count and batch: repeats), by ranks: the median tokens/s and\n"
            "                   its min-max, per rank, efficiency against the smallest point,\n"
            "                   time split, memory per rank, the node's ranks x threads / CPUs\n"
            "                   (oversubscribed points flagged and warned of); each phase's\n"
            "                   min / median / max over ranks; `plan time`'s prediction\n"
            "                   beside the measurement where a run dir holds plan_time.json.\n"
            "                   The tables on stdout, DIR/scaling.md and DIR/scaling.svg\n"
            "                   (tokens/s on log-log axes, efficiency against the ideal);\n"
            "                   DIR defaults to the current directory. The first step of\n"
            "                   each process is warm-up and left out of the throughput.\n"
            "  -o, --output DIR where to write\n"
            "\n"
            "exit codes: 0 ok, 2 usage, 3 not a run's metrics, 4 cannot read or write\n");
}

int cli_report(int argc, char **argv)
{
    enum { OPT_OUTPUT = 1, OPT_COMPARE, OPT_SCALING };
    static const cli_option_t options[] = {{"output", 'o', 1, OPT_OUTPUT},
                                           {"compare", 0, 0, OPT_COMPARE},
                                           {"scaling", 0, 0, OPT_SCALING},
                                           {0, 0, 0, 0}};
    const char *out = NULL;
    int compare = 0, scaling = 0, id;
    cli_args_t a;
    cli_args_init(&a, "report", report_usage, options, 0, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        if (id == OPT_OUTPUT)
            out = a.value;
        else if (id == OPT_COMPARE)
            compare = 1;
        else
            scaling = 1;
    }
    if (compare && scaling)
        cli_args_fail(&a, 1, "--compare and --scaling exclude each other");
    if (a.npositional < 1)
        cli_args_fail(&a, 1, "expected %s", compare || scaling ? "RUN_DIR arguments" : "a RUN_DIR");
    if (compare && a.npositional < 2)
        cli_args_fail(&a, 1, "--compare needs at least two run directories");
    if (!compare && !scaling && a.npositional != 1)
        cli_args_fail(&a, 1, "expected one RUN_DIR, not %d (--compare overlays several)", a.npositional);
    int rc;
    if (scaling)
        rc = report_scaling((const char *const *)a.positional, (size_t)a.npositional, out ? out : ".");
    else if (compare)
        rc = report_compare((const char *const *)a.positional, (size_t)a.npositional, out);
    else
        rc = report_run(a.positional[0], out);
    cli_args_free(&a);
    return rc;
}
