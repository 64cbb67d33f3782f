/* The byte-pair-encoding model shared by fabula's own tokenizer files and
 * Hugging Face byte-level BPE: every byte starts as its base token, then
 * the adjacent pair with the lowest merge rank is merged, leftmost first,
 * until no adjacent pair has a merge. That is Hugging Face's rule (a
 * priority queue on (rank, position)); short words use an equivalent linear
 * re-scan, long ones the priority queue. Merges are found by a hash of the
 * id pair. */
#ifndef FABULA_DATA_BPE_H
#define FABULA_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/bytemap.h"
#include "tokenizer/token_vec.h"

typedef struct bpe bpe_t;
typedef struct bpe_work bpe_work_t;

/* base[b]: the token id of the single byte b, or -1 when the vocabulary
 * has no token for it: such a byte is dropped from the word, or becomes
 * the unknown token when one is set (Hugging Face's BPE without, or with,
 * "unk_token"). */
bpe_t *bpe_new(const int32_t base[256]);
void bpe_free(bpe_t *b);

/* Adds the next merge (its rank is the number of merges added before):
 * left + right -> result. A pair added twice keeps the later rank and
 * result, as Hugging Face's loader does. */
void bpe_add_merge(bpe_t *b, int32_t left, int32_t right, int32_t result);
size_t bpe_nmerges(const bpe_t *b);
/* Merge number `rank` as added. */
void bpe_merge_get(const bpe_t *b, size_t rank, int32_t *left, int32_t *right, int32_t *result);
/* The merge of a pair: 1 with its rank and result, or 0. */
int bpe_merge_find(const bpe_t *b, int32_t left, int32_t right, int32_t *rank, int32_t *result);

/* Hugging Face's "ignore_merges": a word that is itself a token is emitted
 * as that token without merging. `tokens` maps token bytes to ids; the
 * model takes ownership of it. */
void bpe_set_whole_words(bpe_t *b, bytemap_t *tokens);
int bpe_has_whole_words(const bpe_t *b);

/* The token for bytes without one; `fuse`: a run of such bytes in a word is
 * one unknown token (Hugging Face's fuse_unk). */
void bpe_set_unk(bpe_t *b, int32_t unk, int fuse);
/* The unknown token (-1: none) and whether runs fuse. */
int32_t bpe_unk(const bpe_t *b, int *fuse);

/* base[byte] as given to bpe_new. */
int32_t bpe_base(const bpe_t *b, uint8_t byte);

/* Per-thread working memory. */
bpe_work_t *bpe_work_new(void);
void bpe_work_free(bpe_work_t *w);
/* Words longer than this (in bytes) use the priority queue (default 64).
 * Both paths give the same ids; tests compare them. */
void bpe_work_set_heap_threshold(bpe_work_t *w, size_t n);

/* Appends the ids of one word (a pre-token, n >= 1 bytes) to out. */
void bpe_encode_word(const bpe_t *b, bpe_work_t *w, const uint8_t *s, size_t n, token_vec_t *out);

#endif
