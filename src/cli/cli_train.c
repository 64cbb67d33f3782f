/* `fabula train`: the options, then the trainer (train/trainer.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "config/config.h"
#include "parallel/world.h"
#include "train/preempt.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "util/error.h"

/* glibc calls the functions of .preinit_array with main's arguments as soon
 * as the program is loaded, before the libraries' own initialisers (OpenBLAS,
 * OpenMP, MPI: 15-30 ms after exec here), so a `fabula train` catches a
 * preemption warning from its first millisecond rather than from main. */
static void catch_early_if_train(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc > 1 && argv && argv[1] && strcmp(argv[1], "train") == 0)
        preempt_catch_early();
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit_catch)(int, char **, char **) =
    catch_early_if_train;

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula train [options] [CONFIG.json ...]\n"
            "\n"
            "Trains a model. With no CONFIG, runs the built-in default: a tiny MoE\n"
            "model on the bundled sample corpus (inputs/sample.jsonl). Each CONFIG\n"
            "is merged over the default in order (later files win), so a model\n"
            "config and an unchanged DeepSpeed ds_config.json can be given together.\n"
            "\n"
            "options:\n"
            "  --set KEY=VALUE   override one key; KEY is dotted (optimizer.params.lr),\n"
            "                    VALUE is JSON (1e-3, true, [0.9,0.95]) or a bare string;\n"
            "                    repeatable, applied after all files\n"
            "  --run-dir DIR     same as --set run.run_dir=DIR\n"
            "  --steps N         same as --set run.steps=N\n"
            "  --strict          same as --set run.strict_config=true: an unknown config\n"
            "                    key is an error (exit 2), not a warning\n"
            "  --dry-run         validate and print the effective config, then exit\n"
            "  -h, --help        this help\n"
            "\n"
            "The effective config is printed at start and saved as DIR/config.json;\n"
            "per-step metrics go to DIR/metrics.jsonl. See docs/config.md for keys.\n"
            "exit codes: 0 ok, 1 internal, 2 usage/config, 3 input data, 4 I/O, 5 diverged\n");
}

int cli_train(int argc, char **argv)
{
    /* before MPI_Init (already done at load time, see above, where the C
     * library calls .preinit_array): a preemption warning or a Ctrl-C from
     * the first moment is kept until the config says what it means */
    preempt_catch_early();
    enum { OPT_SET = 1, OPT_RUN_DIR, OPT_STEPS, OPT_DRY_RUN, OPT_STRICT };
    static const cli_option_t options[] = {
        {"set", 0, 1, OPT_SET},     {"run-dir", 0, 1, OPT_RUN_DIR},
        {"steps", 0, 1, OPT_STEPS}, {"dry-run", 0, 0, OPT_DRY_RUN},
        {"strict", 0, 0, OPT_STRICT},
        {0, 0, 0, 0},
    };
    /* --run-dir and --steps are --set overrides, applied in command-line
     * order with the others. */
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    char **owned = fb_calloc((size_t)argc + 1, sizeof *owned);
    int nsets = 0, nowned = 0, dry_run = 0, id;
    cli_args_t a;
    cli_args_init(&a, "train", train_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_SET:
            sets[nsets++] = a.value;
            break;
        case OPT_RUN_DIR:
        case OPT_STEPS: {
            const char *key = id == OPT_RUN_DIR ? "run.run_dir=" : "run.steps=";
            char *s = fb_malloc(strlen(key) + strlen(a.value) + 1);
            strcpy(s, key);
            strcat(s, a.value);
            owned[nowned++] = s;
            sets[nsets++] = s;
            break;
        }
        case OPT_DRY_RUN:
            dry_run = 1;
            break;
        case OPT_STRICT:
            sets[nsets++] = "run.strict_config=true";
            break;
        }
    }

    parallel_init(&argc, &argv);
    int rank = parallel_rank();
    config_t cfg;
    config_load(&cfg, (const char *const *)a.positional, a.npositional, (const char *const *)sets,
                nsets, parallel_size(), rank == 0);
    train_config_resolve(&cfg, rank == 0);
    preempt_install(cfg.run.preempt_signals, cfg.run.n_preempt_signals);
    if (rank == 0) {
        printf("fabula: effective config:\n%s\n", cfg.effective_json);
        fflush(stdout);
    }
    int code = FB_EXIT_OK;
    if (!dry_run)
        code = trainer_run(&cfg);
    config_free(&cfg);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(sets);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
