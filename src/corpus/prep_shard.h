/* What one rank of `fabula prep` produced, the job-wide statistics, and the
 * collective writer of the corpus file (prep.c fills these, prep_write.c
 * writes them). */
#ifndef FABULA_DATA_PREP_SHARD_H
#define FABULA_DATA_PREP_SHARD_H

#include <stdint.h>

#include "tokenizer/bytetok.h"
#include "corpus/prep.h"
#include "corpus/input_reader.h"
#include "corpus/segment.h"
#include "tokenizer/tokenizer.h"

/* Sample lengths are binned by ((len - 1) * PREP_LENGTH_BINS) / max_seq_len:
 * bin b holds lengths in (b * M / 8, (b + 1) * M / 8]. */
#define PREP_LENGTH_BINS 8

typedef struct prep_novel {
    char *title, *language;    /* "" when absent */
    int genre;
    int file;                  /* index in corpus_inputs_t */
    int64_t line;              /* JSONL: 1-based line; .json: 1-based item (local until prep_run globalises it) */
    int64_t item;              /* .json: 1-based item; JSONL: 0 */
    int64_t content_bytes;
    int64_t content_tokens;    /* chapter separators included */
    int64_t chapters;          /* <|chapter_sep|> inserted */
    int64_t invalid_utf8;      /* bytes kept that are not valid UTF-8 */
    int64_t first_sample;      /* global index of its first sample (or of where it would be) */
    int64_t num_samples;
    uint8_t split;             /* 0 train, 1 valid */
} prep_novel_t;

typedef struct prep_shard {
    uint32_t *tokens;
    int64_t ntokens, cap_tokens;
    int64_t *offset; /* n + 1 entries: sample i is tokens[offset[i] .. offset[i+1]) */
    uint8_t *genre, *segment, *split;
    int32_t *novel;  /* global novel index */
    int64_t n, cap;
    prep_novel_t *novels;
    int64_t nnovels, cap_novels;
    /* Where this rank's block starts in the file (exclusive prefix sums in
     * rank order) and the totals. */
    int64_t token_base, sample_base, novel_base;
    int64_t total_tokens, total_samples, total_novels;
} prep_shard_t;

/* Every member is a long long so that the struct is summed over ranks as
 * one array. */
typedef struct prep_stats {
    long long novels, samples, tokens, content_bytes, content_tokens;
    long long genre_novels[BYTETOK_NGENRES], genre_samples[BYTETOK_NGENRES], genre_tokens[BYTETOK_NGENRES];
    long long segment_samples[SEGMENT_NTYPES], segment_tokens[SEGMENT_NTYPES];
    long long length_hist[PREP_LENGTH_BINS];
    long long split_novels[2], split_samples[2], split_tokens[2];
    long long dropped_windows, chapter_seps, novels_without_samples;
    /* the pieces of --split with content (novels, chapters or scenes), and
     * those longer than max_seq_len, cut into overlapping windows */
    long long units, units_windowed;
    input_read_counts_t read;
} prep_stats_t;

/* Largest length of bin b (the upper edge), for max_seq_len m. */
int64_t prep_length_bin_upper(int b, int m);

/* The facts the file records about how it was made. */
typedef struct prep_meta {
    const prep_options_t *opt;
    const tokenizer_t *tok;
    const corpus_inputs_t *inputs;
    int32_t special[4 + BYTETOK_NGENRES]; /* pad, bos, eos, chapter_sep, genre tokens */
    int64_t valid_novels_requested;
} prep_meta_t;

/* Writes the corpus collectively to a temporary name, closes it, then rank 0
 * fsyncs and renames it to opt->output and checks it. Any failure on any
 * rank removes the temporary file. Returns the seconds the write took on
 * rank 0 (creation to rename) and the file's size in *bytes. */
double prep_shard_write(const prep_shard_t *s, const prep_stats_t *st, const prep_meta_t *meta, int64_t *bytes);

/* Collective: the held-out novels, one line each ("    TITLE (genre, N
 * samples)", at most 50, then a count of the rest) in novel order, on rank
 * 0 (free()); NULL on the other ranks. */
char *prep_valid_list(const prep_shard_t *s, const corpus_inputs_t *in);

/* Rank 0: the summary (docs/prep.md, "Statistics"); valid_list from
 * prep_valid_list. */
void prep_summary_print(const prep_stats_t *st, const prep_meta_t *meta, int64_t nvalid, const char *valid_list,
                        double t_read, double t_write, int64_t file_bytes, double t_total, double rss_mb,
                        double rss_prep_mb);

#endif
