#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "corpus/prep.h"
#include "parallel/world.h"
#include "util/error.h"

static void prep_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula prep [options] --output CORPUS.h5 INPUT...\n"
            "\n"
            "Tokenizes novels into a corpus file for training. INPUT is a .json file (a\n"
            "novel object or an array of them), a JSON Lines file (one novel a line), or a\n"
            "directory (its *.json, *.jsonl and *.ndjson files, by name). A novel is an\n"
            "object with \"content\" (required), \"genre\", \"title\", \"language\". Run\n"
            "under mpiexec: ranks share the input by size; the datasets do not depend on\n"
            "the rank count.\n"
            "\n"
            "options:\n"
            "  -o, --output PATH        the corpus file to write (required)\n"
            "  -t, --tokenizer SPEC     bytes (default), a fabula tokenizer file, or a\n"
            "                           Hugging Face tokenizer.json\n"
            "  --max-seq-len N          tokens a sample holds at most (default 2048)\n"
            "  --overlap N              tokens consecutive windows share (default 128)\n"
            "  --min-seq-len N          drop a novel's last window under N tokens (default 64)\n"
            "  --valid-fraction F       share of novels held out for validation, whole novels\n"
            "                           (default 0)\n"
            "  --seed S                 seed of the validation choice (default 1234)\n"
            "  --strict                 a malformed record is an error (exit 3), not skipped\n"
            "  --force                  replace an existing output file\n"
            "  -q, --quiet              no progress lines\n"
            "  -h, --help               this help\n"
            "\n"
            "See docs/prep.md (rules, statistics) and docs/corpus-format.md (the file).\n"
            "exit codes: 0 ok, 1 internal, 2 usage (or output exists), 3 input data, 4 I/O\n");
}

/* A whole-string integer in [lo, hi], else usage error naming the option. */
static long long parse_int(const char *opt, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "fabula prep: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi, s);
        exit(FB_EXIT_USAGE);
    }
    return v;
}

int cli_prep(int argc, char **argv)
{
    enum { OPT_MAX = 256, OPT_OVERLAP, OPT_MIN, OPT_VALID, OPT_SEED, OPT_STRICT, OPT_FORCE };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},
        {"tokenizer", required_argument, 0, 't'},
        {"max-seq-len", required_argument, 0, OPT_MAX},
        {"overlap", required_argument, 0, OPT_OVERLAP},
        {"min-seq-len", required_argument, 0, OPT_MIN},
        {"valid-fraction", required_argument, 0, OPT_VALID},
        {"seed", required_argument, 0, OPT_SEED},
        {"strict", no_argument, 0, OPT_STRICT},
        {"force", no_argument, 0, OPT_FORCE},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    prep_options_t opt = {
        .tokenizer = "bytes",
        .max_seq_len = 2048,
        .overlap = 128,
        .min_seq_len = 64,
        .valid_fraction = 0.0,
        .seed = 1234,
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+o:t:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            opt.output = optarg;
            break;
        case 't':
            opt.tokenizer = optarg;
            break;
        case OPT_MAX:
            opt.max_seq_len = (int)parse_int("--max-seq-len", optarg, 2, 1 << 24);
            break;
        case OPT_OVERLAP:
            opt.overlap = (int)parse_int("--overlap", optarg, 0, 1 << 24);
            break;
        case OPT_MIN:
            opt.min_seq_len = (int)parse_int("--min-seq-len", optarg, 0, 1 << 24);
            break;
        case OPT_VALID: {
            char *end;
            errno = 0;
            opt.valid_fraction = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(opt.valid_fraction >= 0 && opt.valid_fraction < 1)) {
                fprintf(stderr, "fabula prep: --valid-fraction expects a number in [0, 1), got '%s'\n", optarg);
                return FB_EXIT_USAGE;
            }
            break;
        }
        case OPT_SEED:
            opt.seed = (uint64_t)parse_int("--seed", optarg, 0, INT64_MAX);
            break;
        case OPT_STRICT:
            opt.strict = 1;
            break;
        case OPT_FORCE:
            opt.force = 1;
            break;
        case 'q':
            opt.quiet = 1;
            break;
        case 'h':
            prep_usage(stdout);
            return FB_EXIT_OK;
        default:
            fprintf(stderr, "fabula prep: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            prep_usage(stderr);
            return FB_EXIT_USAGE;
        }
    }
    if (!opt.output) {
        fprintf(stderr, "fabula prep: --output is required\n\n");
        prep_usage(stderr);
        return FB_EXIT_USAGE;
    }
    if (optind >= argc) {
        fprintf(stderr, "fabula prep: no input given\n\n");
        prep_usage(stderr);
        return FB_EXIT_USAGE;
    }
    opt.inputs = argv + optind;
    opt.ninputs = argc - optind;

    parallel_init(&argc, &argv);
    int code = prep_run(&opt);
    parallel_finalize();
    return code;
}
