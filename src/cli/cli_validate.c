/* `fabula validate`: trains the reference job and compares its per-step
 * losses with the committed curves (docs/validation-format.md "Loss
 * curves"): what a site runs after installing fabula or changing its MPI,
 * HDF5 or CUDA stack. Its options here; the run in train/validate_run.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "parallel/world.h"
#include "train/validate.h"
#include "train/validate_run.h"
#include "util/error.h"

#define CURVES_DIR "validation/curves"

static void validate_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula validate [options]\n"
            "\n"
            "Trains the reference job (the bundled sample corpus, byte tokenizer, a tiny\n"
            "MoE of hidden 64, seed 1234, 8 windows of 64 tokens per step, %d steps) on\n"
            "the ranks it runs on, one CPU thread each, and compares every step's loss\n"
            "with the reference curves of " CURVES_DIR "/ (made by the CPU backend).\n"
            "Same backend, world size and BLAS: the losses must be bit-exact; another\n"
            "world size or BLAS: within %g; another backend or precision (GPU bf16):\n"
            "within %g. Prints a PASS/FAIL table with the worst step and the environment\n"
            "(MPI, HDF5, BLAS, CUDA, nodes). See docs/validation-format.md.\n"
            "\n"
            "options:\n"
            "  --steps N          run and compare only the first N steps (1..%d)\n"
            "  --curve NAME       compare with this curve only: a name of " CURVES_DIR "\n"
            "                     (cpu-np1) or a file path; repeatable (default: every curve)\n"
            "  --curves-dir DIR   where the curves are (default " CURVES_DIR ", or the\n"
            "                     installed copy)\n"
            "  --backend B        cpu (default) or cuda (runs in bf16)\n"
            "  --run-dir DIR      where the job writes its run directory (default\n"
            "                     runs/validate; started over each time)\n"
            "  --write-curve FILE also write this run's losses as a curve file (how the\n"
            "                     committed curves are made; nothing is compared when no\n"
            "                     curve is given)\n"
            "  --ranks-note TEXT  a note on how the ranks are placed, printed with the\n"
            "                     environment (e.g. \"2 nodes x 4 ranks, srun\")\n"
            "  -h, --help         this help\n"
            "\n"
            "exit codes: 0 PASS, 6 FAIL (a loss outside its tolerance), 2 usage, 3 a curve\n"
            "file missing or unreadable, 4 I/O, 5 diverged\n",
            VALIDATE_JOB_STEPS, VALIDATE_TOL_LAYOUT, VALIDATE_TOL_BF16, VALIDATE_JOB_STEPS);
}

int cli_validate(int argc, char **argv)
{
    enum { OPT_STEPS = 1, OPT_CURVE, OPT_CURVES_DIR, OPT_BACKEND, OPT_RUN_DIR, OPT_WRITE, OPT_NOTE };
    static const cli_option_t options[] = {
        {"steps", 0, 1, OPT_STEPS},     {"curve", 0, 1, OPT_CURVE},   {"curves-dir", 0, 1, OPT_CURVES_DIR},
        {"backend", 0, 1, OPT_BACKEND}, {"run-dir", 0, 1, OPT_RUN_DIR}, {"write-curve", 0, 1, OPT_WRITE},
        {"ranks-note", 0, 1, OPT_NOTE}, {0, 0, 0, 0},
    };
    long steps = VALIDATE_JOB_STEPS;
    const char *backend = "cpu", *run_dir = "runs/validate", *write = NULL, *note = NULL, *dir_opt = NULL;
    const char **words = fb_calloc((size_t)argc + 1, sizeof *words);
    int nwords = 0, id;
    cli_args_t a;
    cli_args_init(&a, "validate", validate_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_STEPS:
            steps = (long)cli_args_int(&a, 1, VALIDATE_JOB_STEPS);
            break;
        case OPT_CURVE:
            words[nwords++] = a.value;
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
        case OPT_WRITE:
            write = a.value;
            break;
        case OPT_NOTE:
            note = a.value;
            break;
        }
    }
    if (a.npositional > 0)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);

    parallel_init(&argc, &argv);
    validate_opts_t o = {.steps = steps,     .curves = words,    .ncurves = nwords,
                         .curves_dir = dir_opt ? dir_opt : CURVES_DIR,
                         .backend = backend, .run_dir = run_dir, .write = write, .note = note};
    const int code = validate_run(&o);
    free(words);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
