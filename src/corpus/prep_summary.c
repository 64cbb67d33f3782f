/* What `fabula prep` prints at the end (docs/prep.md, "Statistics"): the
 * totals, the sample unit, the held-out novels by title, the time and the
 * memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/prep_shard.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

/* Held-out novels listed by name; the rest are counted. */
#define PREP_VALID_LIST_MAX 50

typedef struct valid_sink {
    FILE *out;
    long long listed, more;
} valid_sink_t;

/* Rank r's lines arrive in rank order, which is novel order. */
static void valid_lines_sink(void *ctx, int rank, const void *buf, size_t n)
{
    (void)rank;
    valid_sink_t *v = ctx;
    const char *p = buf, *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        if (v->listed < PREP_VALID_LIST_MAX) {
            fwrite(p, 1, len, v->out);
            v->listed++;
        } else {
            v->more++;
        }
        p += len;
    }
}

char *prep_valid_list(const prep_shard_t *s, const corpus_inputs_t *in)
{
    char *mine = NULL, *all = NULL;
    size_t mine_len = 0, all_len = 0;
    FILE *f = open_memstream(&mine, &mine_len);
    if (!f)
        fb_fatal(FB_EXIT_INTERNAL, "prep: out of memory for the list of validation novels");
    for (int64_t j = 0; j < s->nnovels; j++) {
        const prep_novel_t *nv = &s->novels[j];
        if (!nv->split)
            continue;
        if (nv->title[0])
            fprintf(f, "    %.200s", nv->title);
        else
            fprintf(f, "    (no title: %s:%lld)", in->files[nv->file].path, (long long)nv->line);
        fprintf(f, " (%s, %lld sample%s)\n", bytetok_genre_name(nv->genre), (long long)nv->num_samples,
                nv->num_samples == 1 ? "" : "s");
    }
    if (fclose(f) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "prep: out of memory for the list of validation novels");
    valid_sink_t v = {0};
    if (parallel_rank() == 0) {
        v.out = open_memstream(&all, &all_len);
        if (!v.out)
            fb_fatal(FB_EXIT_INTERNAL, "prep: out of memory for the list of validation novels");
    }
    comm_gather_bytes(comm_world(), mine, mine_len, 0, valid_lines_sink, &v);
    free(mine);
    if (parallel_rank() != 0)
        return NULL;
    if (v.more)
        fprintf(v.out, "    ... and %lld more (/novels/title where /novels/split is 1)\n", v.more);
    if (fclose(v.out) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "prep: out of memory for the list of validation novels");
    return all;
}

static const char *const UNIT_PIECE[PREP_NUNITS] = {"novels", "chapters", "scenes"};

static void pct_line(const char *name, long long n, long long total, long long tokens)
{
    printf("  %-12s %10lld %6.1f%% %14lld\n", name, n, total ? 100.0 * (double)n / (double)total : 0.0, tokens);
}

void prep_summary_print(const prep_stats_t *st, const prep_meta_t *meta, int64_t nvalid, const char *valid_list,
                        double t_read, double t_write, int64_t file_bytes, double t_total, double rss_mb,
                        double rss_prep_mb)
{
    const prep_options_t *opt = meta->opt;
    const corpus_inputs_t *in = meta->inputs;
    printf("fabula prep: %lld novel%s from %d file%s (%.2f MB) -> %s (%.2f MB), %d rank%s\n", st->novels,
           st->novels == 1 ? "" : "s", in->n, in->n == 1 ? "" : "s", (double)in->total / 1e6, opt->output, (double)file_bytes / 1e6, parallel_size(),
           parallel_size() == 1 ? "" : "s");
    printf("  tokenizer %s (%s, vocab %d, sha256 %.16s...), split %s, max_seq_len %d, overlap %d, min_seq_len %d\n",
           opt->tokenizer, tokenizer_kind(meta->tok), tokenizer_vocab_size(meta->tok), tokenizer_digest(meta->tok),
           prep_unit_name(opt->unit), opt->max_seq_len, opt->overlap, opt->min_seq_len);
    printf("  %-12s %8s %10s %14s %14s\n", "genre", "novels", "samples", "tokens", "content bytes");
    for (int g = 0; g < BYTETOK_NGENRES; g++)
        if (st->genre_novels[g])
            printf("  %-12s %8lld %10lld %14lld\n", bytetok_genre_name(g), st->genre_novels[g], st->genre_samples[g],
                   st->genre_tokens[g]);
    printf("  %-12s %8lld %10lld %14lld %14lld\n", "total", st->novels, st->samples, st->tokens, st->content_bytes);
    printf("  split        %8s %10s %14s\n", "novels", "samples", "tokens");
    printf("  train        %8lld %10lld %14lld\n", st->split_novels[0], st->split_samples[0], st->split_tokens[0]);
    printf("  valid        %8lld %10lld %14lld   (--valid-fraction %g, seed %llu: %lld novels held out)\n",
           st->split_novels[1], st->split_samples[1], st->split_tokens[1], opt->valid_fraction,
           (unsigned long long)opt->seed, (long long)nvalid);
    if (valid_list && *valid_list)
        printf("  validation novels (held out, whole):\n%s", valid_list);
    printf("  segment      %10s %7s %14s\n", "samples", "share", "tokens");
    for (int k = 0; k < SEGMENT_NTYPES; k++)
        pct_line(segment_name(k), st->segment_samples[k], st->samples, st->segment_tokens[k]);
    printf("  sample length (tokens)   samples\n");
    for (int b = 0; b < PREP_LENGTH_BINS; b++) {
        int64_t lo = b == 0 ? 1 : prep_length_bin_upper(b - 1, opt->max_seq_len) + 1;
        int64_t hi = prep_length_bin_upper(b, opt->max_seq_len);
        if (lo > hi)
            continue;
        printf("  %8lld..%-8lld    %10lld\n", (long long)lo, (long long)hi, st->length_hist[b]);
    }
    printf("  sample unit %s: %lld %s with text, %lld of them longer than %d tokens and cut into windows "
           "(overlap %d)\n",
           prep_unit_name(opt->unit), st->units, UNIT_PIECE[opt->unit], st->units_windowed, opt->max_seq_len,
           opt->overlap);
    printf("  chapter separators %lld; windows dropped (under %d tokens) %lld; novels without a sample %lld\n",
           st->chapter_seps, opt->min_seq_len > 2 ? opt->min_seq_len : 2, st->dropped_windows,
           st->novels_without_samples);
    printf("  skipped: %lld malformed, %lld without usable content; %lld unknown genre%s read as other; "
           "invalid UTF-8 kept: %lld bytes in %lld novel%s\n",
           st->read.malformed, st->read.no_content, st->read.other_genre, st->read.other_genre == 1 ? "" : "s",
           st->read.invalid_utf8_bytes, st->read.invalid_utf8_records, st->read.invalid_utf8_records == 1 ? "" : "s");
    printf("  time: read+tokenize %.2f s (%.1f MB/s, %.2f M tokens/s), write %.2f s (%.1f MB/s), total %.2f s; "
           "peak memory %.0f MB per rank (%.0f MB of it grown during prep)\n",
           t_read, (double)in->total / 1e6 / (t_read > 0 ? t_read : 1e-9),
           (double)st->content_tokens / 1e6 / (t_read > 0 ? t_read : 1e-9), t_write,
           (double)file_bytes / 1e6 / (t_write > 0 ? t_write : 1e-9), t_total, rss_mb, rss_prep_mb);
    fflush(stdout);
}

