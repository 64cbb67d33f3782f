/* `fabula tokenizer train`: the options, then the job (corpus/tokenizer_job.c). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli_args.h"
#include "cli/cli_tokenizer.h"
#include "corpus/tokenizer_job.h"
#include "parallel/world.h"
#include "util/error.h"

#define SPECIALS (TOKENIZER_JOB_MIN_VOCAB - 256)

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula tokenizer train --input PATH [--input PATH ...] --output FILE [options]\n"
            "\n"
            "Learns a byte-level BPE tokenizer from novels and writes a fabula tokenizer\n"
            "file (docs/tokenizer.md). Vocabulary: 256 byte tokens, then one token per\n"
            "merge, then the %d special tokens (<|pad|>, <|bos|>, <|eos|>,\n"
            "<|chapter_sep|>, <|genre_fantasy|> ... <|genre_unknown|>). Run it under\n"
            "mpiexec to share the counting: any number of ranks writes the same file.\n"
            "\n"
            "options:\n"
            "  --input PATH         a .json/.jsonl file, or a directory: its *.json, *.jsonl\n"
            "                       and *.ndjson files; repeatable\n"
            "  --output FILE        the tokenizer file; an existing one is refused unless --force\n"
            "  --vocab-size N       total vocabulary, specials included (default 8192, >= %d)\n"
            "  --min-frequency N    stop merging when the best pair occurs fewer than N times\n"
            "                       (default 2)\n"
            "  --force              replace an existing output file\n"
            "  -h, --help           this help\n"
            "\n"
            "exit codes: 0 ok, 2 usage (e.g. existing output), 3 bad input (e.g. no novel,\n"
            "            an input directory without input files), 4 I/O\n",
            SPECIALS, TOKENIZER_JOB_MIN_VOCAB);
}

int cli_tokenizer_train(int argc, char **argv)
{
    enum { OPT_INPUT = 1, OPT_OUTPUT, OPT_VOCAB, OPT_MIN_FREQ, OPT_FORCE };
    static const cli_option_t options[] = {
        {"input", 0, 1, OPT_INPUT},         {"output", 0, 1, OPT_OUTPUT}, {"vocab-size", 0, 1, OPT_VOCAB},
        {"min-frequency", 0, 1, OPT_MIN_FREQ}, {"force", 0, 0, OPT_FORCE},  {0, 0, 0, 0},
    };
    const char **inputs = fb_calloc((size_t)argc + 1, sizeof *inputs);
    tokenizer_job_t job = {.inputs = inputs, .vocab_size = 8192, .min_frequency = 2};
    cli_args_t a;
    cli_args_init(&a, "tokenizer train", train_usage, options, 1, &argc, &argv);
    int id;
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_INPUT:
            inputs[job.ninputs++] = a.value;
            break;
        case OPT_OUTPUT:
            job.output = a.value;
            break;
        case OPT_VOCAB:
            job.vocab_size = cli_args_int(&a, TOKENIZER_JOB_MIN_VOCAB, 1 << 30);
            break;
        case OPT_MIN_FREQ:
            job.min_frequency = cli_args_int(&a, 1, 1LL << 62);
            break;
        case OPT_FORCE:
            job.force = 1;
            break;
        }
    }
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s' (inputs go after --input)", a.positional[0]);
    if (!job.ninputs || !job.output)
        cli_args_fail(&a, 1, "--input and --output are required");
    cli_args_free(&a);

    parallel_init(&argc, &argv);
    int code = tokenizer_job_run(&job);
    free(inputs);
    parallel_finalize();
    return code;
}
