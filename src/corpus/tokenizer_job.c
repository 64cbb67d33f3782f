#include "corpus/tokenizer_job.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "corpus/input_reader.h"
#include "corpus/inputs.h"
#include "io/atomic_file.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/bytetok.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fabula.h"
#include "util/error.h"

#define SPECIALS (BYTETOK_VOCAB - 256)

/* Rank 0 looks; every rank learns the verdict, so all can exit cleanly. */
static void output_check(const tokenizer_job_t *job)
{
    int exists = 0;
    if (parallel_rank() == 0) {
        struct stat st;
        exists = !job->force && stat(job->output, &st) == 0;
    }
    comm_bcast(comm_world(), &exists, sizeof exists, 0);
    if (exists)
        fb_fatal_all(FB_EXIT_USAGE, "tokenizer train: output %s exists (use --force to replace it)", job->output);
}

static void options_check(const tokenizer_job_t *job)
{
    if (job->vocab_size < BYTETOK_VOCAB || job->vocab_size > INT32_MAX)
        fb_fatal_all(FB_EXIT_USAGE, "tokenizer train: the vocabulary size must be in [%d, %d], not %lld",
                     BYTETOK_VOCAB, INT32_MAX, job->vocab_size);
    if (job->min_frequency < 1)
        fb_fatal_all(FB_EXIT_USAGE, "tokenizer train: the minimum frequency must be at least 1, not %lld",
                     job->min_frequency);
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

typedef struct file_progress {
    int file;            /* the file being counted, -1 before the first */
    long long novels, bytes;
} file_progress_t;

/* Rank 0's line for the file it has just finished (its share of it). */
static void progress_print(const corpus_inputs_t *in, const file_progress_t *p, const bytemap_t *counts, double secs)
{
    if (p->file < 0)
        return;
    printf("fabula: tokenizer train: counted %s (%lld novels, %.1f MB on rank 0) at %.1f s; %zu distinct "
           "pre-tokens on rank 0\n",
           in->files[p->file].path, p->novels, (double)p->bytes / 1e6, secs, counts->n);
    fflush(stdout);
}

/* Counts this rank's share into *counts; tot: novels, bytes, pre-tokens. */
static void count_share(const corpus_inputs_t *in, bytemap_t *counts, long long tot[3], double t0)
{
    const int rank = parallel_rank();
    pretok_t *pt = pretok_new();
    char err[512];
    if (pretok_add_split(pt, PRETOK_FABULA_PATTERN, 0, PRETOK_ISOLATED, 0, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "fabula's pre-tokenizer does not compile: %s", err);
    pretok_scratch_t *scr = pretok_scratch_new();

    int64_t begin, end;
    corpus_inputs_share(in, rank, parallel_size(), &begin, &end);
    input_reader_t *reader = input_reader_open(in, begin, end, 0);
    input_record_t rec;
    file_progress_t prog = {.file = -1};
    while (input_reader_next(reader, &rec)) {
        if (rank == 0 && rec.file != prog.file) {
            progress_print(in, &prog, counts, parallel_wtime() - t0);
            prog = (file_progress_t){.file = rec.file};
        }
        prog.novels++;
        prog.bytes += (long long)rec.len;
        tot[0]++;
        tot[1] += (long long)rec.len;
        tot[2] += (long long)bpe_count_pretokens(pt, scr, rec.content, rec.len, counts);
    }
    if (rank == 0)
        progress_print(in, &prog, counts, parallel_wtime() - t0);

    /* Skipped records are reported with their line in the whole file. */
    long long *lines = fb_calloc((size_t)in->n + 1, sizeof *lines);
    for (int f = 0; f < in->n; f++)
        lines[f] = input_reader_lines(reader)[f];
    comm_exscan_sum(comm_world(), lines, (size_t)in->n, COMM_I64);
    int64_t *line_base = fb_malloc(((size_t)in->n + 1) * sizeof *line_base);
    for (int f = 0; f < in->n; f++)
        line_base[f] = lines[f];
    input_reader_report(reader, line_base);
    const input_read_counts_t *rc = input_reader_counts(reader);
    long long skipped[2] = {rc->malformed, rc->no_content};
    comm_allreduce(comm_world(), skipped, 2, COMM_I64, COMM_SUM);
    comm_allreduce(comm_world(), tot, 3, COMM_I64, COMM_SUM);
    if (tot[0] == 0)
        fb_fatal_all(FB_EXIT_DATA,
                     "tokenizer train: the inputs hold no novel (%lld malformed record%s, %lld without usable "
                     "\"content\")",
                     skipped[0], skipped[0] == 1 ? "" : "s", skipped[1]);
    free(line_base);
    free(lines);
    input_reader_close(reader);
    pretok_scratch_free(scr);
    pretok_free(pt);
}

/* Rank 0: learns the merges from the merged counts and writes the file. */
static void learn_and_write(const tokenizer_job_t *job, const bytemap_t *counts, const long long tot[3], double t0)
{
    size_t want = (size_t)job->vocab_size - 256 - SPECIALS, nm = 0;
    int size = parallel_size();
    printf("fabula: tokenizer train: %lld novels, %lld bytes, %lld pre-tokens (%zu distinct) from %d rank%s in "
           "%.1f s; learning %zu merges\n",
           tot[0], tot[1], tot[2], counts->n, size, size == 1 ? "" : "s", parallel_wtime() - t0, want);
    fflush(stdout);
    int32_t *merges = bpe_train(counts, want, job->min_frequency, 1, &nm);
    if (nm < want)
        fb_warn("tokenizer train: stopped after %zu merges: no pair occurs %lld times or more; the vocabulary "
                "has %zu tokens instead of %lld",
                nm, job->min_frequency, 256 + nm + SPECIALS, job->vocab_size);
    tokenizer_t *t = tokenizer_fabula_build(job->output, PRETOK_FABULA_PATTERN, merges, nm);
    tokenizer_train_info_t info = {job->vocab_size, job->min_frequency, tot[0], tot[1], tot[2], (long long)counts->n};
    size_t len;
    char *json = tokenizer_fabula_to_json(t, &info, &len);
    atomic_write_file(job->output, json, len);
    printf("fabula: tokenizer train: wrote %s: vocab %d (256 bytes + %zu merges + %d specials), digest %s, "
           "%.1f s\n",
           job->output, tokenizer_vocab_size(t), nm, SPECIALS, tokenizer_digest(t), parallel_wtime() - t0);
    free(json);
    free(merges);
    tokenizer_free(t);
}

int tokenizer_job_run(const tokenizer_job_t *job)
{
    const int rank = parallel_rank();
    options_check(job);
    output_check(job);
    corpus_inputs_t in;
    corpus_inputs_list(&in, job->inputs, job->ninputs);

    bytemap_t counts;
    bytemap_init(&counts);
    long long tot[3] = {0, 0, 0}; /* novels, bytes, pre-tokens */
    double t0 = parallel_wtime();
    count_share(&in, &counts, tot, t0);

    /* Rank 0 merges the other ranks' counts in rank order (the sums do not
     * depend on it). */
    size_t packed_n = 0;
    uint8_t *packed = rank == 0 ? NULL : bpe_counts_pack(&counts, &packed_n);
    merge_ctx_t mctx = {&counts};
    comm_gather_bytes(comm_world(), packed, packed_n, 0, merge_sink, &mctx);
    free(packed);

    if (rank == 0)
        learn_and_write(job, &counts, tot, t0);
    comm_barrier(comm_world());
    bytemap_free(&counts);
    corpus_inputs_free(&in);
    return FB_EXIT_OK;
}
