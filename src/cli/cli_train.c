/* `fabula train`: the options, then the trainer (train/trainer.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "train/preflight.h"
#include "train/resume_schedule.h"
#include "config/config.h"
#include "parallel/world.h"
#include "train/preempt.h"
#include "model/config_resolve.h"
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
            "  --dry-run         check the whole job without training: the effective\n"
            "                    config, the layout, the corpus and tokenizer opened and\n"
            "                    matched, samples a step against the corpus, data.seq_len\n"
            "                    against prep's windows, the memory of a rank, where it\n"
            "                    resumes, and every warning the run would print\n"
            "  --world N         with --dry-run, on one process: for a run of N ranks\n"
            "  -h, --help        this help\n"
            "\n"
            "The effective config is printed at start and saved as DIR/config.json;\n"
            "per-step metrics go to DIR/metrics.jsonl. See docs/config.md for keys.\n"
            "exit codes: 0 ok, 1 internal, 2 usage/config, 3 input data, 4 I/O, 5 diverged\n");
}

/* An unknown option of train: the options that stand for --set of a key
 * first, then the config key the word names. */
static const char *train_hint(const char *word, char *buf, size_t n)
{
    if (!strcmp(word, "config") || !strcmp(word, "deepspeed") || !strcmp(word, "deepspeed_config") ||
        !strcmp(word, "deepspeed-config")) {
        snprintf(buf, n, ": give the config files as arguments (fabula train [options] model.json "
                         "ds_config.json; a DeepSpeed file is read as DeepSpeed reads it)");
        return buf;
    }
    const char *key = config_key_for_word(word);
    static const struct {
        const char *key, *option;
    } own[] = {{"run.steps", "--steps N"}, {"run.run_dir", "--run-dir DIR"}, {"run.strict_config", "--strict"}};
    for (size_t i = 0; key && i < sizeof own / sizeof *own; i++)
        if (!strcmp(key, own[i].key)) {
            snprintf(buf, n, "; did you mean '%s'?", own[i].option);
            return buf;
        }
    return cli_hint_config_key(word, buf, n);
}

int cli_train(int argc, char **argv)
{
    /* before MPI_Init (already done at load time, see above, where the C
     * library calls .preinit_array): a preemption warning or a Ctrl-C from
     * the first moment is kept until the config says what it means */
    preempt_catch_early();
    enum { OPT_SET = 1, OPT_RUN_DIR, OPT_STEPS, OPT_DRY_RUN, OPT_STRICT, OPT_WORLD };
    static const cli_option_t options[] = {
        {"set", 0, 1, OPT_SET},     {"run-dir", 0, 1, OPT_RUN_DIR},
        {"steps", 0, 1, OPT_STEPS}, {"dry-run", 0, 0, OPT_DRY_RUN},
        {"strict", 0, 0, OPT_STRICT}, {"world", 0, 1, OPT_WORLD},
        {0, 0, 0, 0},
    };
    /* --run-dir and --steps are --set overrides, applied in command-line
     * order with the others. */
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    char **owned = fb_calloc((size_t)argc + 1, sizeof *owned);
    int nsets = 0, nowned = 0, dry_run = 0, id, world = 0;
    cli_args_t a;
    cli_args_init(&a, "train", train_usage, options, 1, &argc, &argv);
    cli_args_set_hint(&a, train_hint);
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
        case OPT_WORLD:
            world = (int)cli_args_int(&a, 1, 1 << 24);
            break;
        }
    }
    if (world && !dry_run)
        cli_args_fail(&a, 1, "--world N plans a run of N ranks: it goes with --dry-run (a run has the ranks "
                             "mpiexec starts)");

    parallel_init(&argc, &argv);
    int rank = parallel_rank();
    if (world && parallel_size() > 1)
        fb_fatal_all(FB_EXIT_USAGE, "train --dry-run --world %d checks the run of %d ranks on one process: start it "
                     "without mpiexec (here %d processes)", world, world, parallel_size());
    if (!world)
        world = parallel_size();
    config_t cfg;
    config_load(&cfg, (const char *const *)a.positional, a.npositional, (const char *const *)sets,
                nsets, world, rank == 0);
    model_config_resolve(&cfg, rank == 0);
    train_resume_schedule(&cfg, rank == 0);
    preempt_install(cfg.run.preempt_signals, cfg.run.n_preempt_signals);
    /* the dry run's report, then the effective config: its JSON ends the
     * output, as tools that read it expect */
    if (dry_run)
        train_preflight(&cfg, world, rank == 0);
    if (rank == 0) {
        printf("fabula: effective config:\n%s\n", cfg.effective_json);
        fflush(stdout);
    }
    int code = FB_EXIT_OK;
    if (!dry_run) {
        train_inputs_check(&cfg);
        code = trainer_run(&cfg);
    }
    config_free(&cfg);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(sets);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
