/* `fabula tokenizer encode`: the options, then the job (corpus/encode_job.c). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/cli_args.h"
#include "cli/cli_tokenizer.h"
#include "corpus/encode_job.h"
#include "parallel/world.h"
#include "util/error.h"

static void encode_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula tokenizer encode --tokenizer T --input FILE --output IDS.bin [options]\n"
            "\n"
            "Encodes the \"content\" of every novel of FILE (.json or .jsonl) with T and\n"
            "writes the ids: per novel, in file order, a little-endian uint32 count n\n"
            "followed by n little-endian uint32 ids. Runs on one rank; novels are\n"
            "spread over OMP_NUM_THREADS threads. Prints the encode throughput (the\n"
            "encode alone, without reading or writing files).\n"
            "\n"
            "options:\n"
            "  --tokenizer T   \"bytes\", a fabula tokenizer file or a tokenizer.json\n"
            "  --input FILE    novels (.json: an object or an array; else JSON Lines)\n"
            "  --output PATH   where the ids go; an existing file is refused unless --force\n"
            "  --force         replace an existing output file\n"
            "  --verify        check that decoding gives back every novel byte for byte\n"
            "                  (normalized, for a lossy tokenizer.json)\n"
            "  -h, --help      this help\n"
            "\n"
            "exit codes: 0 ok, 1 internal (e.g. --verify failed), 2 usage, 3 bad input\n"
            "            or tokenizer (digest mismatch), 4 I/O\n");
}

int cli_tokenizer_encode(int argc, char **argv)
{
    enum { OPT_TOKENIZER = 1, OPT_INPUT, OPT_OUTPUT, OPT_FORCE, OPT_VERIFY };
    static const cli_option_t options[] = {
        {"tokenizer", 0, 1, OPT_TOKENIZER}, {"input", 0, 1, OPT_INPUT},   {"output", 0, 1, OPT_OUTPUT},
        {"force", 0, 0, OPT_FORCE},         {"verify", 0, 0, OPT_VERIFY}, {0, 0, 0, 0},
    };
    const char *tok = NULL, *input = NULL, *output = NULL;
    int force = 0, verify = 0, id;
    cli_args_t a;
    cli_args_init(&a, "tokenizer encode", encode_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_TOKENIZER:
            tok = a.value;
            break;
        case OPT_INPUT:
            input = a.value;
            break;
        case OPT_OUTPUT:
            output = a.value;
            break;
        case OPT_FORCE:
            force = 1;
            break;
        case OPT_VERIFY:
            verify = 1;
            break;
        }
    }
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);
    if (!tok || !input || !output)
        cli_args_fail(&a, 1, "--tokenizer, --input and --output are required");
    cli_args_free(&a);
    struct stat st;
    if (!force && stat(output, &st) == 0)
        fb_fatal(FB_EXIT_USAGE, "tokenizer encode: output %s exists (use --force to replace it)", output);

    parallel_init(&argc, &argv);
    if (parallel_size() != 1)
        fb_fatal(FB_EXIT_USAGE, "tokenizer encode runs on one rank (it uses OpenMP threads), not %d",
                 parallel_size());
    encode_job_t job = {tok, input, output, verify};
    const int code = encode_job_run(&job);
    parallel_finalize();
    return code;
}
