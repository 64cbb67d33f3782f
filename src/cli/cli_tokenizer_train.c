/* `fabula tokenizer train`: ranks count pre-tokens of their share of the
 * novels, rank 0 merges the counts (in rank order, though the result does
 * not depend on it), learns the merges and writes the tokenizer file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_tokenizer.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/bytetok.h"
#include "corpus/input_list.h"
#include "corpus/novels.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fabula.h"
#include "io/atomic_file.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

#define SPECIALS (BYTETOK_VOCAB - 256)

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
            SPECIALS, BYTETOK_VOCAB);
}

typedef struct merge_ctx {
    bytemap_t *counts;
} merge_ctx_t;

static void merge_sink(void *p, int rank, const void *buf, size_t n)
{
    merge_ctx_t *c = p;
    if (rank == 0)
        return; /* rank 0's own counts are already in the map */
    if (bpe_counts_add_packed(c->counts, buf, n) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "tokenizer train: malformed pre-token counts from rank %d", rank);
}

int cli_tokenizer_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"input", required_argument, 0, 'i'},         {"output", required_argument, 0, 'o'},
        {"vocab-size", required_argument, 0, 'v'},    {"min-frequency", required_argument, 0, 'm'},
        {"force", no_argument, 0, 'f'},               {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char **inputs = fb_calloc((size_t)argc + 1, sizeof *inputs);
    int ninputs = 0, force = 0, opt;
    const char *output = NULL;
    long long vocab = 8192, min_freq = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'i':
            inputs[ninputs++] = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'v':
            vocab = cli_parse_int("tokenizer train", "--vocab-size", optarg, BYTETOK_VOCAB, 1 << 30);
            break;
        case 'm':
            min_freq = cli_parse_int("tokenizer train", "--min-frequency", optarg, 1, 1LL << 62);
            break;
        case 'f':
            force = 1;
            break;
        case 'h':
            train_usage(stdout);
            free(inputs);
            return FB_EXIT_OK;
        default:
            fprintf(stderr, "fabula tokenizer train: unknown or incomplete option '%s'\n\n", argv[optind - 1]);
            train_usage(stderr);
            free(inputs);
            return FB_EXIT_USAGE;
        }
    }
    if (!ninputs || !output || optind != argc) {
        fprintf(stderr, "fabula tokenizer train: %s\n\n",
                optind != argc ? "unexpected argument (inputs go after --input)" : "--input and --output are required");
        train_usage(stderr);
        free(inputs);
        return FB_EXIT_USAGE;
    }
    /* Every rank sees the same file system, so every rank refuses alike,
     * before MPI starts and without an abort. */
    struct stat st;
    if (!force && stat(output, &st) == 0)
        fb_fatal(FB_EXIT_USAGE, "tokenizer train: output %s exists (use --force to replace it)", output);

    parallel_init(&argc, &argv);
    int rank = parallel_rank(), size = parallel_size();
    input_list_t files;
    input_list_collect(&files, inputs, ninputs);
    /* Enough files: each rank reads only its share (by size). Fewer files
     * than ranks: every rank reads them all and counts every size-th novel. */
    int by_file = files.n >= size;
    int *owner = fb_malloc((size_t)files.n * sizeof *owner);
    input_list_assign(&files, size, owner);

    pretok_t *pt = pretok_new();
    char err[512];
    if (pretok_add_split(pt, PRETOK_FABULA_PATTERN, 0, PRETOK_ISOLATED, 0, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "fabula's pre-tokenizer does not compile: %s", err);
    pretok_scratch_t *scr = pretok_scratch_new();
    bytemap_t counts;
    bytemap_init(&counts);
    long long tot[3] = {0, 0, 0}; /* novels, bytes, pre-tokens */
    long long novel_index = 0;
    double t0 = parallel_wtime();
    for (int f = 0; f < files.n; f++) {
        if (by_file && owner[f] != rank)
            continue;
        novel_set_t set;
        novels_load(&set, files.path[f]);
        for (int i = 0; i < set.n; i++, novel_index++) {
            if (!by_file && novel_index % size != rank)
                continue;
            tot[0]++;
            tot[1] += (long long)set.novels[i].len;
            tot[2] += (long long)bpe_count_pretokens(pt, scr, set.novels[i].content, set.novels[i].len, &counts);
        }
        if (rank == 0) {
            printf("fabula: tokenizer train: counted %s (%d novels, %.1f MB) at %.1f s; %zu distinct pre-tokens on "
                   "rank 0\n",
                   files.path[f], set.n, set.total_bytes / 1e6, parallel_wtime() - t0, counts.n);
            fflush(stdout);
        }
        novels_free(&set);
    }
    comm_allreduce(comm_world(), tot, 3, COMM_I64, COMM_SUM);
    if (tot[0] == 0)
        fb_fatal(FB_EXIT_DATA, "tokenizer train: the inputs hold no novel");

    size_t packed_n = 0;
    uint8_t *packed = rank == 0 ? NULL : bpe_counts_pack(&counts, &packed_n);
    merge_ctx_t mctx = {&counts};
    comm_gather_bytes(comm_world(), packed, packed_n, 0, merge_sink, &mctx);
    free(packed);

    if (rank == 0) {
        size_t want = (size_t)vocab - 256 - SPECIALS, nm = 0;
        printf("fabula: tokenizer train: %lld novels, %lld bytes, %lld pre-tokens (%zu distinct) from %d rank%s in "
               "%.1f s; learning %zu merges\n",
               tot[0], tot[1], tot[2], counts.n, size, size == 1 ? "" : "s", parallel_wtime() - t0, want);
        fflush(stdout);
        int32_t *merges = bpe_train(&counts, want, min_freq, 1, &nm);
        if (nm < want)
            fb_warn("tokenizer train: stopped after %zu merges: no pair occurs %lld times or more; the vocabulary "
                    "has %zu tokens instead of %lld",
                    nm, min_freq, 256 + nm + SPECIALS, vocab);
        tokenizer_t *t = tokenizer_fabula_build(output, PRETOK_FABULA_PATTERN, merges, nm);
        tokenizer_train_info_t info = {vocab, min_freq, tot[0], tot[1], tot[2], (long long)counts.n};
        size_t len;
        char *json = tokenizer_fabula_to_json(t, &info, &len);
        atomic_write_file(output, json, len);
        printf("fabula: tokenizer train: wrote %s: vocab %d (256 bytes + %zu merges + %d specials), digest %s, "
               "%.1f s\n",
               output, tokenizer_vocab_size(t), nm, SPECIALS, tokenizer_digest(t), parallel_wtime() - t0);
        free(json);
        free(merges);
        tokenizer_free(t);
    }
    comm_barrier(comm_world());
    bytemap_free(&counts);
    pretok_scratch_free(scr);
    pretok_free(pt);
    free(owner);
    input_list_free(&files);
    free(inputs);
    parallel_finalize();
    return FB_EXIT_OK;
}
