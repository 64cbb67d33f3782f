/* fabula plan: answers about a run without running it. `plan sampler`
 * runs the training step plan (sampler or curriculum, balancer, packer,
 * deferrals) on a corpus's real sample lengths for any number of simulated
 * ranks (no MPI, no model). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_plan.h"
#include "cli/cli_plan_calibrate.h"
#include "cli/cli_plan_layout.h"
#include "cli/cli_plan_memory.h"
#include "config/config.h"
#include "corpus/chapter_lengths.h"
#include "corpus/corpus.h"
#include "corpus/novels.h"
#include "corpus/windows.h"
#include "loader/data_check.h"
#include "loader/pack.h"
#include "loader/step_plan_stats.h"
#include "model/config_resolve.h"
#include "io/regular_file.h"
#include "parallel/world.h"
#include "util/error.h"

#define MAX_RANK_COUNTS 32

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

typedef struct sampler_args {
    const char *jsonl, *lengths_file, *split, *corpus;
    const char *unit;       /* --corpus: its sample unit */
    int ranks[MAX_RANK_COUNTS], nranks_list;
    long steps;
    int batch, max_seq_len, accum;
    long long max_tokens;
    double c;
    int have_c, have_seed;
    unsigned long long seed;
} sampler_args_t;

static void parse_ranks(sampler_args_t *a, const cli_args_t *args)
{
    char *copy = fb_strdup(args->value), *save = NULL;
    a->nranks_list = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->nranks_list == MAX_RANK_COUNTS)
            cli_args_fail(args, 0, "--simulate-ranks expects at most %d rank counts", MAX_RANK_COUNTS);
        a->ranks[a->nranks_list++] = (int)cli_args_int_of(args, tok, 1, 1 << 20);
    }
    free(copy);
    if (a->nranks_list == 0)
        cli_args_fail(args, 0, "--simulate-ranks expects at least one rank count");
}

/* One length a line; blank lines and '#' comments skipped. */
static int64_t read_lengths_file(const char *path, int max_seq_len, int64_t **out, int64_t *cut)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot open lengths file %s: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "lengths file %s", why);
    int64_t n = 0, cap = 1024;
    int64_t *lens = fb_malloc((size_t)cap * sizeof *lens);
    char line[256];
    long lineno = 0;
    *cut = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line + strspn(line, " \t\r\n");
        if (!*p || *p == '#')
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        end += strspn(end, " \t\r\n");
        if (errno || end == p || (*end && *end != '#') || v < 1)
            fb_fatal(FB_EXIT_DATA, "%s:%ld: expected a sample length (an integer >= 1)", path, lineno);
        if (v > max_seq_len) {
            v = max_seq_len;
            (*cut)++;
        }
        if (n == cap) {
            cap *= 2;
            lens = fb_realloc(lens, (size_t)cap * sizeof *lens);
        }
        lens[n++] = v;
    }
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "cannot read lengths file %s: %s", path, strerror(errno));
    fclose(f);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no sample length", path);
    *out = lens;
    return n;
}

static int64_t load_lengths(const sampler_args_t *a, int64_t **lens, int64_t *cut);

/* The training split's sample lengths, as training reads them (a sample
 * longer than max_seq_len cut to it). */
static int64_t corpus_lengths(const corpus_t *c, int max_seq_len, int64_t **lens, int64_t *cut)
{
    int64_t n = corpus_num_samples(c);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no training sample", corpus_path(c));
    *lens = fb_malloc((size_t)n * sizeof **lens);
    *cut = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = corpus_sample_len(c, i);
        if (len > max_seq_len) {
            len = max_seq_len;
            (*cut)++;
        }
        (*lens)[i] = len;
    }
    return n;
}

int cli_plan_spec_world(const char *spec)
{
    const char *at = strstr(spec, "world=");
    if (at && (at == spec || at[-1] == ',')) {
        long v = strtol(at + 6, NULL, 10);
        return v > 0 && v < (1 << 30) ? (int)v : 1;
    }
    long long w = 1;
    const char *keys[] = {"dp=", "tp=", "pp="};
    for (int i = 0; i < 3; i++) {
        for (const char *p = spec; (p = strstr(p, keys[i])) != NULL; p++) {
            if (p != spec && p[-1] != ',')
                continue;
            long v = strtol(p + 3, NULL, 10);
            if (v > 0 && v < (1 << 24))
                w *= v;
            break;
        }
    }
    return w > 0 && w < (1 << 30) ? (int)w : 1;
}

int64_t cli_plan_lengths(const char *jsonl, const char *lengths_file, const char *split, int max_seq_len,
                         int64_t **lens, int64_t *cut)
{
    sampler_args_t a = {.jsonl = jsonl, .lengths_file = lengths_file, .split = split, .max_seq_len = max_seq_len};
    return load_lengths(&a, lens, cut);
}

static int64_t load_lengths(const sampler_args_t *a, int64_t **lens, int64_t *cut)
{
    if (a->lengths_file)
        return read_lengths_file(a->lengths_file, a->max_seq_len, lens, cut);

    novel_set_t novels;
    novels_load(&novels, a->jsonl);
    int64_t n;
    if (strcmp(a->split, "chapters") == 0) {
        n = chapter_lengths_get(&novels, a->max_seq_len, lens, cut);
    } else {
        sample_set_t set;
        windows_build(&set, &novels, a->max_seq_len, 0, 2);
        n = set.n;
        *lens = fb_malloc((size_t)n * sizeof **lens);
        for (int64_t i = 0; i < n; i++)
            (*lens)[i] = sample_set_len(&set, i);
        *cut = 0;
        sample_set_free(&set);
    }
    novels_free(&novels);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no sample of at least 2 tokens", a->jsonl);
    return n;
}

/* The run `cfg` describes, with the simulation's batch, micro-batches,
 * sequence length, cost and seed in place of the config's: the step plan
 * reads train_batch_size and gradient_accumulation_steps, not the micro
 * batch, so B need not be a multiple of G. */
static config_t simulated_config(const config_t *cfg, const sampler_args_t *a, int nranks, long long C, int G)
{
    config_t sim = *cfg;
    sim.train_batch_size = a->batch * nranks;
    sim.grad_accum = G;
    sim.data.seq_len = a->max_seq_len;
    sim.loader.max_tokens_per_batch = (int)C;
    sim.loader.attention_cost = a->c;
    sim.loader.attention_cost_auto = LOADER_COST_SET;
    sim.run.seed = a->seed;
    sim.effective_json = NULL;
    return sim;
}

#define NSAMPLERS 3 /* indexed by loader_sampler_t */
#define NPACKINGS 3 /* indexed by loader_packing_t */

static void print_report(const sampler_args_t *a, const config_t *cfg, const int64_t *lens, int64_t n, int64_t cut)
{
    int64_t tok = 0, lmin = lens[0], lmax = lens[0];
    for (int64_t i = 0; i < n; i++) {
        tok += lens[i];
        lmin = lens[i] < lmin ? lens[i] : lmin;
        lmax = lens[i] > lmax ? lens[i] : lmax;
    }
    long long C = a->max_tokens > 0 ? a->max_tokens : a->max_seq_len;
    int G = a->accum > 0 ? a->accum : (int)(((long long)a->batch * a->max_seq_len + C - 1) / C);
    const loader_sampler_t sampler = cfg->loader.sampler;
    const loader_packing_t packing = cfg->loader.packing;
    char source[4200];
    if (a->corpus)
        snprintf(source, sizeof source, "%.4000s, training split, sample unit %s", a->corpus, a->unit);
    else
        snprintf(source, sizeof source, "%.4000s", a->lengths_file ? a->lengths_file : a->split);
    printf("corpus: %lld samples (%s), lengths %lld..%lld, mean %.1f, %lld cut to max_seq_len %d\n", (long long)n,
           source, (long long)lmin, (long long)lmax, (double)tok / (double)n, (long long)cut, a->max_seq_len);
    int64_t classes[LOADER_NCLASSES], full = 0;
    data_check_classes(&cfg->loader, lens, n, classes);
    for (int64_t i = 0; i < n; i++)
        full += lens[i] == a->max_seq_len;
    printf("lengths: %.1f%% at max_seq_len; %.1f%% short (< %d), %.1f%% medium, %.1f%% long (>= %d) at "
           "data.curriculum's thresholds\n",
           100.0 * (double)full / (double)n, 100.0 * (double)classes[LOADER_SHORT] / (double)n,
           cfg->loader.short_threshold, 100.0 * (double)classes[LOADER_MEDIUM] / (double)n,
           100.0 * (double)classes[LOADER_LONG] / (double)n, cfg->loader.long_threshold);
    printf("plan: %ld steps, %d samples per rank per step, micro-batch capacity %lld tokens, at most %d "
           "micro-batches per rank (ranks x %d in all), attention cost c = %.6g, seed %llu\n",
           a->steps, a->batch, C, G, G, a->c, a->seed);
    printf("step plan: the strategies over micro-batches packed by %s, the packers with %s%s%s\n",
           config_packing_name(packing),
           config_sampler_name(sampler), cfg->loader.curriculum ? "; length curriculum" : "",
           cfg->loader.warmup ? "; sequence-length warm-up" : "");
    printf("%8s %8s | %-28s | %-28s | %8s | %s\n", "ranks", "strategy", "cost imbalance mean / max",
           "token imbalance mean / max", "deferred", "micro-batches per rank");
    for (int i = 0; i < a->nranks_list; i++) {
        config_t sim = simulated_config(cfg, a, a->ranks[i], C, G);
        step_plan_stats_t st[NSAMPLERS][NPACKINGS];
        int done[NSAMPLERS][NPACKINGS] = {{0}};
        for (int s = 0; s < NSAMPLERS; s++)
            for (int k = 0; k < NPACKINGS; k++) {
                if (s != (int)sampler && k != (int)packing)
                    continue;
                sim.loader.sampler = (loader_sampler_t)s;
                sim.loader.packing = (loader_packing_t)k;
                step_plan_stats_run(&sim, lens, n, a->ranks[i], a->steps, &st[s][k]);
                done[s][k] = 1;
            }
        for (int s = 0; s < NSAMPLERS; s++) {
            const step_plan_stats_t *t = &st[s][packing];
            FB_ASSERT(done[s][packing]);
            printf("%8d %8s | %12.3f%% / %10.3f%% | %12.3f%% / %10.3f%% | %8lld | %.2f\n", a->ranks[i],
                   config_sampler_name((loader_sampler_t)s), 100 * t->imb_cost_mean, 100 * t->imb_cost_max,
                   100 * t->imb_tokens_mean, 100 * t->imb_tokens_max, (long long)t->deferred,
                   (double)t->bins / ((double)t->steps * a->ranks[i]));
        }
        const step_plan_stats_t *seq = &st[sampler][LOADER_PACK_SEQUENTIAL], *bf = &st[sampler][LOADER_PACK_BEST_FIT],
                                *bal = &st[sampler][LOADER_PACK_BALANCED];
        printf("%8d packing  | sequential %.2f%% (%lld micro-batches, %lld deferred), best_fit %.2f%% (%lld, %lld), "
               "balanced %.2f%% (%lld, %lld; cost imbalance %.3f%% / %.3f%%), padded to %d: %.2f%%\n",
               a->ranks[i], 100 * seq->packing, (long long)seq->bins, (long long)seq->deferred,
               100 * bf->packing, (long long)bf->bins, (long long)bf->deferred, 100 * bal->packing,
               (long long)bal->bins, (long long)bal->deferred, 100 * bal->imb_cost_mean, 100 * bal->imb_cost_max,
               a->max_seq_len, 100 * pack_padded_efficiency(bf->tokens, bf->samples, a->max_seq_len));
    }
}

static int plan_sampler(int argc, char **argv)
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
    sampler_args_t a = {.split = "windows", .steps = 50, .batch = 16};
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
    model_config_resolve(&cfg, 1);
    /* the corpus file is read through MPI-IO */
    corpus_t *corpus = NULL;
    if (a.corpus) {
        parallel_init(&argc, &argv);
        corpus = corpus_open(a.corpus, CORPUS_TRAIN);
        a.unit = corpus_sample_unit(corpus);
        if (!a.max_seq_len)
            a.max_seq_len = corpus_max_seq_len(corpus);
    }
    if (!a.max_seq_len)
        a.max_seq_len = cfg.data.seq_len;
    if (!a.have_c)
        a.c = cfg.loader.attention_cost;
    if (!a.have_seed)
        a.seed = cfg.run.seed;
    free(sets);
    cli_args_free(&args);
    if (a.max_tokens > 0 && a.max_tokens < a.max_seq_len)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --max-tokens (%lld) must be at least --max-seq-len (%d)",
                 a.max_tokens, a.max_seq_len);
    /* data.max_tokens_per_batch, which the step plan reads, is an int */
    if (a.max_tokens > INT_MAX)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --max-tokens (%lld) must be at most %d", a.max_tokens, INT_MAX);
    for (int i = 0; i < a.nranks_list; i++)
        if ((long long)a.batch * a.ranks[i] > INT_MAX)
            fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --batch x %d ranks is too large", a.ranks[i]);

    int64_t *lens, cut;
    int64_t n = corpus ? corpus_lengths(corpus, a.max_seq_len, &lens, &cut) : load_lengths(&a, &lens, &cut);
    print_report(&a, &cfg, lens, n, cut);
    free(lens);
    config_free(&cfg);
    if (corpus) {
        corpus_close(corpus);
        parallel_finalize();
    }
    return FB_EXIT_OK;
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
        return plan_sampler(argc - 1, argv + 1);
    if (!strcmp(argv[1], "calibrate"))
        return plan_calibrate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "memory"))
        return plan_memory_cmd(argc - 1, argv + 1);
    if (!strcmp(argv[1], "time"))
        return plan_time_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "layout"))
        return plan_layout(argc - 1, argv + 1);
    static const char *const plans[] = {"sampler", "calibrate", "memory", "time", "layout"};
    char msg[256];
    fprintf(stderr, "fabula plan: %s\n\n", cli_unknown_word("plan", argv[1], plans, 5, msg, sizeof msg));
    plan_usage(stderr);
    return FB_EXIT_USAGE;
}
