/* fabula plan: answers about a run without running it. This file
 * dispatches to the subcommands (cli_plan.h) and parses `plan sampler`'s
 * options; src/plan/plan_sampler.c runs it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_plan.h"
#include "config/config.h"
#include "parallel/world.h"
#include "plan/plan_sampler.h"
#include "util/error.h"

static void plan_usage(FILE *f)
{
    fprintf(f, "usage: fabula plan <what> [options]\n"
               "\n"
               "  sampler   simulate the data-parallel sampler and packer (--help for options)\n"
               "  calibrate measure data.attention_cost, and with --write-machine this machine's\n"
               "            FLOP/s and MPI links, on this machine (--help for options)\n"
               "  memory    per-rank bytes of a layout: states, workspaces, activations (--help for options)\n"
               "  time      predict one training step's time on a machine file (--help for options)\n"
               "  layout    search the layouts of N GPUs for the fastest that fits (--help for options)\n");
}

static void sampler_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula plan sampler (--corpus C.h5 | --jsonl FILE | --corpus-lengths FILE)\n"
            "                           --simulate-ranks N[,N...]\n"
            "                           [options] [CONFIG.json ...]\n"
            "\n"
            "Runs the training step plan: for each rank count, S steps offering\n"
            "nranks x B samples, packed into at most nranks x G micro-batches (by\n"
            "data.packing, and by sequential, best_fit and balanced) whose ranks are chosen by\n"
            "uniform, greedy and lpt (docs/loader.md; the config's curriculum and\n"
            "warm-up apply). Prints the mean and max imbalance (max/mean - 1 of cost\n"
            "and of tokens), the micro-batches per rank and the packing efficiency\n"
            "against padding every sample to the max length.\n"
            "\n"
            "  --corpus C.h5          the training samples of a corpus made by fabula prep\n"
            "                         (its --split unit and tokenizer, as train reads them)\n"
            "  --jsonl FILE           novels (.jsonl/.json), byte tokenizer\n"
            "  --split windows|chapters  with --jsonl: windows of --max-seq-len (the\n"
            "                         training samples) or one sample per chapter cut to\n"
            "                         --max-seq-len (default windows)\n"
            "  --corpus-lengths FILE  sample lengths, one integer a line ('#' comments);\n"
            "                         longer than --max-seq-len: cut to it\n"
            "  --simulate-ranks LIST  rank counts, comma-separated (e.g. 8,64,1024)\n"
            "  --steps S              steps per simulation (default 50)\n"
            "  --batch B              samples per rank per step (default 16)\n"
            "  --max-seq-len L        longest sample (default data.seq_len; with --corpus,\n"
            "                         the corpus's --max-seq-len)\n"
            "  --max-tokens C         tokens per micro-batch (default L)\n"
            "  --accum G              micro-batches per rank per step (default ceil(B L / C):\n"
            "                         the memory of B padded samples)\n"
            "  --attention-cost X     c of cost = len + c len^2 (default data.attention_cost,\n"
            "                         derived from the config's model)\n"
            "  --seed N               sampler seed (default run.seed)\n"
            "  --set KEY=VALUE        config override, as for train\n"
            "\n"
            "exit codes: 0 ok, 2 usage/config, 3 input data, 4 I/O\n");
}

static void parse_ranks(plan_sampler_opts_t *a, const cli_args_t *args)
{
    char *copy = fb_strdup(args->value), *save = NULL;
    a->nranks_list = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->nranks_list == PLAN_SAMPLER_MAX_RANK_COUNTS)
            cli_args_fail(args, 0, "--simulate-ranks expects at most %d rank counts", PLAN_SAMPLER_MAX_RANK_COUNTS);
        a->ranks[a->nranks_list++] = (int)cli_args_int_of(args, tok, 1, 1 << 20);
    }
    free(copy);
    if (a->nranks_list == 0)
        cli_args_fail(args, 0, "--simulate-ranks expects at least one rank count");
}

int cli_plan_sampler(int argc, char **argv)
{
    enum { OPT_JSONL = 1, OPT_LENGTHS, OPT_CORPUS, OPT_SPLIT, OPT_RANKS, OPT_STEPS, OPT_BATCH, OPT_MAX_SEQ, OPT_MAX_TOKENS,
           OPT_ACCUM, OPT_COST, OPT_SEED, OPT_SET };
    static const cli_option_t options[] = {
        {"jsonl", 0, 1, OPT_JSONL},           {"corpus-lengths", 0, 1, OPT_LENGTHS},
        {"split", 0, 1, OPT_SPLIT},           {"simulate-ranks", 0, 1, OPT_RANKS},
        {"steps", 0, 1, OPT_STEPS},           {"batch", 0, 1, OPT_BATCH},
        {"max-seq-len", 0, 1, OPT_MAX_SEQ},   {"max-tokens", 0, 1, OPT_MAX_TOKENS},
        {"accum", 0, 1, OPT_ACCUM},           {"attention-cost", 0, 1, OPT_COST},
        {"seed", 0, 1, OPT_SEED},             {"set", 0, 1, OPT_SET},
        {"corpus", 0, 1, OPT_CORPUS},
        {0, 0, 0, 0},
    };
    plan_sampler_opts_t a = {.split = "windows", .steps = 50, .batch = 16};
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    int nsets = 0, opt, split_given = 0;
    cli_args_t args;
    cli_args_init(&args, "plan sampler", sampler_usage, options, 0, &argc, &argv);
    while ((opt = cli_args_next(&args)) != 0) {
        switch (opt) {
        case OPT_JSONL: a.jsonl = args.value; break;
        case OPT_LENGTHS: a.lengths_file = args.value; break;
        case OPT_CORPUS: a.corpus = args.value; break;
        case OPT_SPLIT: a.split = args.value; split_given = 1; break;
        case OPT_RANKS: parse_ranks(&a, &args); break;
        case OPT_STEPS: a.steps = (long)cli_args_int(&args, 1, 1000000); break;
        case OPT_BATCH: a.batch = (int)cli_args_int(&args, 1, 1 << 20); break;
        case OPT_MAX_SEQ: a.max_seq_len = (int)cli_args_int(&args, 2, 1 << 30); break;
        case OPT_MAX_TOKENS: a.max_tokens = cli_args_int(&args, 2, INT64_MAX / 4); break;
        case OPT_ACCUM: a.accum = (int)cli_args_int(&args, 1, 1 << 20); break;
        case OPT_SEED: a.seed = (unsigned long long)cli_args_int(&args, 0, LLONG_MAX); a.have_seed = 1; break;
        case OPT_SET: sets[nsets++] = args.value; break;
        case OPT_COST: a.c = cli_args_real(&args, 0.0, INFINITY, 0); a.have_c = 1; break;
        }
    }
    if ((a.jsonl != NULL) + (a.lengths_file != NULL) + (a.corpus != NULL) != 1)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: give exactly one of --corpus C.h5, --jsonl FILE and "
                 "--corpus-lengths FILE");
    if (a.corpus && split_given)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --split goes with --jsonl; a corpus's samples are those of "
                 "its own `fabula prep --split`");
    if (a.nranks_list == 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --simulate-ranks N[,N...] is required");
    if (strcmp(a.split, "windows") != 0 && strcmp(a.split, "chapters") != 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --split '%s': expected windows or chapters", a.split);

    config_t cfg;
    config_load(&cfg, (const char *const *)args.positional, args.npositional, (const char *const *)sets, nsets, 1, 1);
    free(sets);
    cli_args_free(&args);
    /* the corpus file is read through MPI-IO */
    if (a.corpus)
        parallel_init(&argc, &argv);
    const int code = plan_sampler_run(&cfg, &a);
    config_free(&cfg);
    if (a.corpus)
        parallel_finalize();
    return code;
}

int cli_plan(int argc, char **argv)
{
    if (argc < 2) {
        plan_usage(stderr);
        return FB_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        plan_usage(stdout);
        return FB_EXIT_OK;
    }
    if (!strcmp(argv[1], "sampler"))
        return cli_plan_sampler(argc - 1, argv + 1);
    if (!strcmp(argv[1], "calibrate"))
        return cli_plan_calibrate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "memory"))
        return cli_plan_memory(argc - 1, argv + 1);
    if (!strcmp(argv[1], "time"))
        return cli_plan_time(argc - 1, argv + 1);
    if (!strcmp(argv[1], "layout"))
        return cli_plan_layout(argc - 1, argv + 1);
    static const char *const plans[] = {"sampler", "calibrate", "memory", "time", "layout"};
    char msg[256];
    fprintf(stderr, "fabula plan: %s\n\n", cli_unknown_word("plan", argv[1], plans, 5, msg, sizeof msg));
    plan_usage(stderr);
    return FB_EXIT_USAGE;
}
