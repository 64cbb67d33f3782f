/* `fabula tokenizer`: train (cli_tokenizer_train.c), encode, info. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_tokenizer.h"
#include "corpus/novels.h"
#include "tokenizer/tokenizer.h"
#include "io/atomic_file.h"
#include "parallel/world.h"
#include "util/error.h"

static void tokenizer_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula tokenizer <command> [options]\n"
            "\n"
            "commands:\n"
            "  train     learn a byte-level BPE tokenizer from novels (MPI: ranks share the input)\n"
            "  encode    encode every novel of a file with a tokenizer; write the ids\n"
            "  info      print a tokenizer's kind, vocabulary size, digest and special tokens\n"
            "\n"
            "A tokenizer is \"bytes\" (built in), a fabula tokenizer file (from `train`)\n"
            "or a Hugging Face tokenizer.json of the byte-level BPE kind. See\n"
            "docs/tokenizer.md. `fabula tokenizer <command> --help` for options.\n");
}

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

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static int cli_tokenizer_encode(int argc, char **argv)
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
    tokenizer_t *t = tokenizer_load(tok);
    novel_set_t set;
    novels_load(&set, input);
    token_vec_t *ids = fb_calloc((size_t)set.n, sizeof *ids);
    int nthreads = omp_get_max_threads();

    double t0 = parallel_wtime();
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < set.n; i++)
        tokenizer_encode(t, set.novels[i].content, set.novels[i].len, &ids[i]);
    double secs = parallel_wtime() - t0;

    size_t ntok = 0;
    for (int i = 0; i < set.n; i++) {
        if (ids[i].n > UINT32_MAX)
            fb_fatal(FB_EXIT_DATA, "%s: novel %d has more than 2^32 tokens", input, i + 1);
        ntok += ids[i].n;
    }
    int bad = 0;
    if (verify)
        for (int i = 0; i < set.n; i++) {
            size_t len;
            uint8_t *back = tokenizer_decode(t, ids[i].ids, ids[i].n, &len);
            size_t wlen = set.novels[i].len;
            const uint8_t *want = set.novels[i].content;
            uint8_t *expected = NULL;
            if (tokenizer_is_lossy(t))
                want = expected = tokenizer_expected_text(t, want, wlen, &wlen);
            if (len != wlen || memcmp(back, want, len) != 0) {
                fprintf(stderr, "fabula: error: novel %d (%s): decode(encode(text)) differs from the text\n", i + 1,
                        set.novels[i].title ? set.novels[i].title : "untitled");
                bad++;
            }
            free(expected);
            free(back);
        }
    size_t nbytes = 4 * ((size_t)set.n + ntok);
    uint8_t *buf = fb_malloc(nbytes ? nbytes : 1), *p = buf;
    for (int i = 0; i < set.n; i++) {
        put_u32(p, (uint32_t)ids[i].n);
        p += 4;
        for (size_t k = 0; k < ids[i].n; k++, p += 4)
            put_u32(p, (uint32_t)ids[i].ids[k]);
    }
    atomic_write_file(output, buf, nbytes);
    double mbs = secs > 0 ? set.total_bytes / secs / 1e6 : 0.0;
    printf("fabula: tokenizer encode: %d novels, %zu bytes -> %zu tokens (%.3f bytes/token) with %s (%s, vocab %d)\n",
           set.n, set.total_bytes, ntok, ntok ? (double)set.total_bytes / (double)ntok : 0.0, tokenizer_source(t),
           tokenizer_kind(t), tokenizer_vocab_size(t));
    printf("fabula: tokenizer encode: %.3f s, %.2f MB/s on %d thread%s = %.2f MB/s per thread\n", secs, mbs,
           nthreads, nthreads == 1 ? "" : "s", mbs / nthreads);
    if (verify)
        printf("fabula: tokenizer encode: verify: %d of %d novels %s\n", set.n - bad, set.n,
               tokenizer_is_lossy(t) ? "decode to their normalized text exactly" : "round-trip exactly");
    printf("fabula: tokenizer encode: wrote %s\n", output);
    for (int i = 0; i < set.n; i++)
        token_vec_free(&ids[i]);
    free(ids);
    free(buf);
    novels_free(&set);
    tokenizer_free(t);
    parallel_finalize();
    return bad ? FB_EXIT_INTERNAL : FB_EXIT_OK;
}

static void info_usage(FILE *f)
{
    fprintf(f, "usage: fabula tokenizer info TOKENIZER\n\n"
               "Loads TOKENIZER (\"bytes\", a fabula tokenizer file or a tokenizer.json;\n"
               "a fabula file's digest is verified) and prints its kind, vocabulary size,\n"
               "digest and special tokens.\n");
}

static int cli_tokenizer_info(int argc, char **argv)
{
    static const cli_option_t options[] = {{0, 0, 0, 0}};
    cli_args_t a;
    cli_args_init(&a, "tokenizer info", info_usage, options, 0, &argc, &argv);
    while (cli_args_next(&a) != 0)
        ;
    if (a.npositional != 1)
        cli_args_fail(&a, 1, "expected one TOKENIZER, not %d arguments", a.npositional);
    const char *spec = a.positional[0];
    cli_args_free(&a);
    tokenizer_t *t = tokenizer_load(spec);
    printf("source: %s\nkind: %s\nvocab_size: %d\ndigest: %s\nspecial_tokens: %d\n", tokenizer_source(t),
           tokenizer_kind(t), tokenizer_vocab_size(t), tokenizer_digest(t), tokenizer_nspecial(t));
    for (int i = 0; i < tokenizer_nspecial(t); i++) {
        int32_t id;
        const char *text = tokenizer_special_at(t, i, &id);
        printf("  %d %s\n", (int)id, text);
    }
    tokenizer_free(t);
    return FB_EXIT_OK;
}

int cli_tokenizer(int argc, char **argv)
{
    if (argc < 2) {
        tokenizer_usage(stderr);
        return FB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        tokenizer_usage(stdout);
        return FB_EXIT_OK;
    }
    if (!strcmp(cmd, "train"))
        return cli_tokenizer_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "encode"))
        return cli_tokenizer_encode(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cli_tokenizer_info(argc - 1, argv + 1);
    static const char *const commands[] = {"train", "encode", "info"};
    char msg[256];
    fprintf(stderr, "fabula tokenizer: %s\n\n", cli_unknown_word("command", cmd, commands, 3, msg, sizeof msg));
    tokenizer_usage(stderr);
    return FB_EXIT_USAGE;
}
