/* `fabula prep`: the options, then the job (corpus/prep.c). */
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "config/config.h"
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
            "  --split UNIT             what a sample holds: chapters (default: one chapter,\n"
            "                           windowed only when longer than --max-seq-len),\n"
            "                           scenes (chapters cut at scene breaks too) or windows\n"
            "                           (the whole novel cut into windows)\n"
            "  --max-seq-len N          tokens a sample holds at most (default 2048)\n"
            "  --overlap N              tokens consecutive windows of a novel, chapter or\n"
            "                           scene share (default --max-seq-len / 16: 128)\n"
            "  --min-seq-len N          drop a last window under N tokens (default 64)\n"
            "  --valid-fraction F       share of novels held out for validation, whole novels\n"
            "                           (default 0)\n"
            "  --seed S                 seed of the validation choice (default 1234)\n"
            "  --strict                 a malformed record is an error (exit 3), not skipped\n"
            "  --mpi-info JSON          MPI-IO hints for the output file, a JSON object of\n"
            "                           strings: the prep.mpi_info of docs/config.md, e.g.\n"
            "                           '{\"romio_cb_write\":\"enable\",\"striping_factor\":\"8\"}'\n"
            "  --force                  replace an existing output file\n"
            "  -q, --quiet              no progress lines\n"
            "  -h, --help               this help\n"
            "\n"
            "See docs/prep.md (rules, statistics) and docs/corpus-format.md (the file).\n"
            "exit codes: 0 ok, 1 internal, 2 usage (or output exists), 3 input data, 4 I/O\n");
}

int cli_prep(int argc, char **argv)
{
    enum { OPT_OUTPUT = 1, OPT_TOKENIZER, OPT_MAX, OPT_OVERLAP, OPT_MIN, OPT_VALID, OPT_SEED, OPT_STRICT, OPT_FORCE,
           OPT_QUIET, OPT_MPI_INFO, OPT_SPLIT };
    static const cli_option_t options[] = {
        {"output", 'o', 1, OPT_OUTPUT},
        {"tokenizer", 't', 1, OPT_TOKENIZER},
        {"max-seq-len", 0, 1, OPT_MAX},
        {"overlap", 0, 1, OPT_OVERLAP},
        {"min-seq-len", 0, 1, OPT_MIN},
        {"valid-fraction", 0, 1, OPT_VALID},
        {"seed", 0, 1, OPT_SEED},
        {"strict", 0, 0, OPT_STRICT},
        {"force", 0, 0, OPT_FORCE},
        {"quiet", 'q', 0, OPT_QUIET},
        {"mpi-info", 0, 1, OPT_MPI_INFO},
        {"split", 0, 1, OPT_SPLIT},
        {0, 0, 0, 0},
    };
    prep_options_t opt = {
        .tokenizer = "bytes",
        .max_seq_len = 2048,
        .overlap = -1, /* --max-seq-len / 16, below */
        .unit = PREP_DEFAULT_UNIT,
        .min_seq_len = 64,
        .valid_fraction = 0.0,
        .seed = 1234,
    };
    mpi_hints_t hints = {0};
    cli_args_t a;
    cli_args_init(&a, "prep", prep_usage, options, 1, &argc, &argv);
    int id;
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_OUTPUT:
            opt.output = a.value;
            break;
        case OPT_TOKENIZER:
            opt.tokenizer = a.value;
            break;
        case OPT_MAX:
            opt.max_seq_len = (int)cli_args_int(&a, 2, 1 << 24);
            break;
        case OPT_OVERLAP:
            opt.overlap = (int)cli_args_int(&a, 0, 1 << 24);
            break;
        case OPT_MIN:
            opt.min_seq_len = (int)cli_args_int(&a, 0, 1 << 24);
            break;
        case OPT_VALID:
            opt.valid_fraction = cli_args_real(&a, 0.0, 1.0, 1);
            break;
        case OPT_SEED:
            opt.seed = (uint64_t)cli_args_int(&a, 0, INT64_MAX);
            break;
        case OPT_STRICT:
            opt.strict = 1;
            break;
        case OPT_FORCE:
            opt.force = 1;
            break;
        case OPT_QUIET:
            opt.quiet = 1;
            break;
        case OPT_SPLIT: {
            int u = prep_unit_parse(a.value);
            if (u < 0)
                cli_args_fail(&a, 0, "--split '%s': expected chapters, scenes or windows", a.value);
            opt.unit = (prep_unit_t)u;
            break;
        }
        case OPT_MPI_INFO: {
            char *err = NULL;
            mpi_hints_free(&hints);
            if (config_mpi_hints_parse(a.value, "--mpi-info", &hints, &err) != 0)
                cli_args_fail(&a, 0, "%s", err);
            opt.mpi_info = &hints;
            break;
        }
        }
    }
    /* A fixed default would be out of range for short samples (128 of
     * --max-seq-len 128); a sixteenth keeps 2048's 128. */
    if (opt.overlap < 0)
        opt.overlap = opt.max_seq_len / 16;
    if (!opt.output)
        cli_args_fail(&a, 1, "--output is required");
    if (a.npositional == 0)
        cli_args_fail(&a, 1, "no input given");
    opt.inputs = (const char *const *)a.positional;
    opt.ninputs = a.npositional;

    parallel_init(&argc, &argv);
    int code = prep_run(&opt);
    mpi_hints_free(&hints);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
