#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/config.h"
#include "parallel/world.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "util/error.h"

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
            "  --dry-run         validate and print the effective config, then exit\n"
            "  -h, --help        this help\n"
            "\n"
            "The effective config is printed at start and saved as DIR/config.json;\n"
            "per-step metrics go to DIR/metrics.jsonl. See docs/config.md for keys.\n"
            "exit codes: 0 ok, 1 internal, 2 usage/config, 3 input data, 4 I/O, 5 diverged\n");
}

int cli_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"set", required_argument, 0, 's'},
        {"run-dir", required_argument, 0, 'r'},
        {"steps", required_argument, 0, 'n'},
        {"dry-run", no_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    char **owned = fb_calloc((size_t)argc + 1, sizeof *owned);
    int nsets = 0, nowned = 0, dry_run = 0;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            sets[nsets++] = optarg;
            break;
        case 'r':
        case 'n': {
            const char *key = opt == 'r' ? "run.run_dir=" : "run.steps=";
            char *s = fb_malloc(strlen(key) + strlen(optarg) + 1);
            strcpy(s, key);
            strcat(s, optarg);
            owned[nowned++] = s;
            sets[nsets++] = s;
            break;
        }
        case 'd':
            dry_run = 1;
            break;
        case 'h':
            train_usage(stdout);
            return FB_EXIT_OK;
        default:
            fprintf(stderr, "fabula train: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            train_usage(stderr);
            return FB_EXIT_USAGE;
        }
    }

    parallel_init(&argc, &argv);
    int rank = parallel_rank();
    config_t cfg;
    config_load(&cfg, (const char *const *)(argv + optind), argc - optind, (const char *const *)sets,
                nsets, parallel_size(), rank == 0);
    train_config_resolve(&cfg, rank == 0);
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
    parallel_finalize();
    return code;
}
