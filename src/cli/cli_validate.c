/* `fabula validate`: trains the suite of reference jobs and compares every
 * recorded quantity of every step with the committed curves
 * (docs/validation-format.md "Loss curves"): what a site runs after
 * installing fabula or changing its MPI, HDF5, BLAS or CUDA stack. Its
 * options here; the run in validate/validate_run.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "parallel/world.h"
#include "validate/validate_compare.h"
#include "validate/validate_jobs.h"
#include "validate/validate_run.h"
#include "util/error.h"

#define CURVES_DIR "validation/curves"

static void validate_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula validate [options]\n"
            "\n"
            "Trains the suite of reference jobs (tiny MoE models on the bundled sample,\n"
            "fixed seeds; each covers a family of features: `--list` says which) on the\n"
            "ranks it runs on (1, 2 or 4), one CPU thread each, and compares every step's\n"
            "loss, lm/aux/z losses, gradient norm, lr, loss scale, validation loss, tokens\n"
            "per expert and dropped assignments with each job's curves in " CURVES_DIR "/JOB/.\n"
            "Same backend, world size and BLAS: bit-exact; another world size (layout) or\n"
            "BLAS: within the job's bands (a measured spread x 10, bands.json), counts\n"
            "equal; another backend (cuda against the CPU's 16-bit twin): within %g.\n"
            "Prints a table per job, a summary and the environment (MPI, HDF5, BLAS,\n"
            "CUDA, nodes), and writes validate.json and validate.md for the site's records.\n"
            "See docs/validation-format.md.\n"
            "\n"
            "options:\n"
            "  --job NAME         run this job only; repeatable (default: the whole suite;\n"
            "                     on cuda, its 16-bit jobs)\n"
            "  --quick            each job's first steps only (the quick prefix; the suite\n"
            "                     in about a minute on 2 cores)\n"
            "  --steps N          each job at most N steps (its schedule still spans the job)\n"
            "  --list             list the jobs, what each covers, its steps and layouts\n"
            "  --curve NAME       compare with this curve of each job only (cpu-np1);\n"
            "                     repeatable (default: every curve of the job)\n"
            "  --curves-dir DIR   where the curves are (default " CURVES_DIR ", or the\n"
            "                     installed copy)\n"
            "  --backend B        cpu (default) or cuda\n"
            "  --run-dir DIR      where the jobs train, DIR/JOB (default runs/validate)\n"
            "  --report DIR       where validate.json and validate.md go (default: the run\n"
            "                     dir)\n"
            "  --write-curves DIR also write each job's records as DIR/JOB/BACKEND-npN.json\n"
            "                     (how the committed curves are made: validation/make_curves.sh)\n"
            "  --reference MODE   auto (default), on or off: on 1 rank, the float64 PyTorch\n"
            "                     reference (validation/check_curve.py) recomputes the first\n"
            "                     %d losses of each fp32 job it models from this run's own\n"
            "                     weights, batches and lrs, within %g relative; auto where a\n"
            "                     Python with torch and h5py is found (PYTHON, /usr/bin/python3)\n"
            "  --ranks-note TEXT  a note on how the ranks are placed, printed with the\n"
            "                     environment (e.g. \"2 nodes x 2 ranks, srun\")\n"
            "  -h, --help         this help\n"
            "\n"
            "exit codes: 0 PASS, 6 FAIL (a quantity outside its tolerance, or a job that did\n"
            "not finish), 2 usage, 3 a curve or bands file missing or unreadable, 4 I/O\n",
            VALIDATE_TOL_OTHER_BACKEND, VALIDATE_REFERENCE_STEPS, VALIDATE_REFERENCE_TOL);
}

static void list_jobs(void)
{
    for (int i = 0; i < validate_njobs; i++) {
        const validate_job_def_t *j = &validate_jobs[i];
        printf("%s (%s): %ld steps, --quick %ld; %s%s\n", j->name, j->id, j->steps, j->quick_steps, j->precision,
               strcmp(j->backend, "cpu") ? " on cpu16 (and cuda)" : "");
        printf("  covers: %s\n", j->covers);
        for (int w = 1; w <= 4; w *= 2) {
            char *l = validate_layout_text(j, w, 0);
            printf("  %s", l);
            free(l);
            if (j->resume_layout[validate_world_index(w)]) {
                l = validate_layout_text(j, w, 1);
                printf("; resumed at step %ld on %s", j->resume_at, l + strcspn(l, ",") + 2);
                free(l);
            }
            printf("\n");
        }
    }
}

int cli_validate(int argc, char **argv)
{
    enum {
        OPT_STEPS = 1,
        OPT_JOB,
        OPT_QUICK,
        OPT_LIST,
        OPT_CURVE,
        OPT_CURVES_DIR,
        OPT_BACKEND,
        OPT_RUN_DIR,
        OPT_REPORT,
        OPT_WRITE,
        OPT_NOTE,
        OPT_REFERENCE
    };
    static const cli_option_t options[] = {
        {"steps", 0, 1, OPT_STEPS},       {"job", 0, 1, OPT_JOB},           {"quick", 0, 0, OPT_QUICK},
        {"list", 0, 0, OPT_LIST},         {"curve", 0, 1, OPT_CURVE},       {"curves-dir", 0, 1, OPT_CURVES_DIR},
        {"backend", 0, 1, OPT_BACKEND},   {"run-dir", 0, 1, OPT_RUN_DIR},   {"report", 0, 1, OPT_REPORT},
        {"write-curves", 0, 1, OPT_WRITE}, {"ranks-note", 0, 1, OPT_NOTE},
        {"reference", 0, 1, OPT_REFERENCE}, {0, 0, 0, 0},
    };
    long steps = 0;
    int quick = 0, list = 0, reference = VALIDATE_REFERENCE_AUTO;
    const char *backend = "cpu", *run_dir = "runs/validate", *write = NULL, *note = NULL, *dir_opt = NULL,
               *report = NULL;
    const char **curves = fb_calloc((size_t)argc + 1, sizeof *curves);
    const char **jobs = fb_calloc((size_t)argc + 1, sizeof *jobs);
    int ncurves = 0, njobs = 0, id;
    cli_args_t a;
    cli_args_init(&a, "validate", validate_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_STEPS:
            steps = (long)cli_args_int(&a, 1, 1000000);
            break;
        case OPT_JOB:
            jobs[njobs++] = a.value;
            break;
        case OPT_QUICK:
            quick = 1;
            break;
        case OPT_LIST:
            list = 1;
            break;
        case OPT_CURVE:
            if (strchr(a.value, '/'))
                cli_args_fail(&a, 0, "--curve: a curve name of each job's directory (cpu-np1), not a path: '%s' "
                                     "(--curves-dir points elsewhere)", a.value);
            curves[ncurves++] = a.value;
            break;
        case OPT_CURVES_DIR:
            dir_opt = a.value;
            break;
        case OPT_BACKEND:
            if (strcmp(a.value, "cpu") != 0 && strcmp(a.value, "cuda") != 0)
                cli_args_fail(&a, 0, "--backend: expected cpu or cuda, got '%s'", a.value);
            backend = a.value;
            break;
        case OPT_RUN_DIR:
            run_dir = a.value;
            break;
        case OPT_REPORT:
            report = a.value;
            break;
        case OPT_WRITE:
            write = a.value;
            break;
        case OPT_NOTE:
            note = a.value;
            break;
        case OPT_REFERENCE:
            if (!strcmp(a.value, "auto"))
                reference = VALIDATE_REFERENCE_AUTO;
            else if (!strcmp(a.value, "on"))
                reference = VALIDATE_REFERENCE_ON;
            else if (!strcmp(a.value, "off"))
                reference = VALIDATE_REFERENCE_OFF;
            else
                cli_args_fail(&a, 0, "--reference: expected auto, on or off, got '%s'", a.value);
            break;
        }
    }
    if (a.npositional > 0)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);
    if (list) {
        list_jobs();
        free(curves);
        free(jobs);
        cli_args_free(&a);
        return FB_EXIT_OK;
    }

    parallel_init(&argc, &argv);
    validate_opts_t o = {.steps = steps,
                         .quick = quick,
                         .jobs = jobs,
                         .njobs = njobs,
                         .curves = curves,
                         .ncurves = ncurves,
                         .curves_dir = dir_opt ? dir_opt : CURVES_DIR,
                         .backend = backend,
                         .run_dir = run_dir,
                         .write = write,
                         .report = report,
                         .note = note,
                         .reference = reference};
    const int code = validate_run(&o);
    free(curves);
    free(jobs);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
