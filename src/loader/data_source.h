/* The training samples, from either source: a corpus HDF5 file made by
 * `fabula prep` (data.corpus; each rank reads only the samples it trains
 * on), or novels in JSON/JSONL windowed with the byte tokenizer at start-up
 * (data.train). */
#ifndef FABULA_TRAIN_DATA_SOURCE_H
#define FABULA_TRAIN_DATA_SOURCE_H

#include <stdint.h>

#include "config/config.h"
#include "loader/batch.h"
#include "corpus/corpus.h"
#include "corpus/novels.h"
#include "corpus/windows.h"

typedef struct data_source {
    int64_t n;
    int64_t *lens;          /* every sample's length, capped at data.seq_len */
    uint8_t *genres;
    int64_t tokens;         /* total tokens of the capped samples */
    const char *what;       /* for the log: the file */
    corpus_t *corpus;       /* HDF5 source */
    novel_set_t novels;     /* text source */
    sample_set_t samples;
    int32_t *buf;           /* tokens of one micro-batch read from the corpus */
    size_t buf_cap;
    uint8_t *genre_buf;
    /* model.init_from: the vocabulary the model must grow to (0: none),
     * when the tokenizer's ids past model.vocab_size are all fabula's
     * special tokens appended to a Hugging Face tokenizer
     * (docs/init-from.md) */
    int vocab_grow;
    /* the order evaluations take the samples in (eval_order.h), made on
     * first use */
    int64_t *eval_order;
} data_source_t;

/* Opens the source of cfg (collective); errors exit 3 (data) or 4 (I/O).
 * With `verbose` (rank 0 of a training run) it prints what it opened and the
 * start-up checks of loader/data_check.h as warnings. */
void data_source_open(data_source_t *s, const config_t *cfg, int verbose);
/* The validation split of data.corpus (novels `fabula prep --valid-fraction`
 * held out), for `who` (what asks for it: "run.eval_interval = 5", "fabula
 * eval --split val"); a text source or a corpus without one: exit 2 naming
 * `who`. */
void data_source_open_valid(data_source_t *s, const config_t *cfg, int verbose, const char *who);
void data_source_close(data_source_t *s);
/* The order an evaluation takes the samples in (loader/eval_order.h):
 * stratified over the source's novels and genres, the same on every rank. */
const int64_t *data_source_eval_order(data_source_t *s);
/* How many novels and genres the first `count` samples of that order cover. */
void data_source_eval_coverage(data_source_t *s, int64_t count, int64_t *novels, int *genres);
/* The packed micro-batch of samples `ids` with (capped) lengths `lens`. */
void data_source_batch(data_source_t *s, batch_t *b, const int64_t *ids, const int64_t *lens, int n);

#endif
