/* A packed micro-batch: whole samples laid end to end with no padding.
 * Attention and the loss use cu_seqlens so that nothing crosses a sample
 * boundary; positions restart at 0 in each sample (RoPE).
 *
 * For samples s_0..s_{nseq-1} of lengths len_i:
 *   cu_seqlens[0] = 0, cu_seqlens[i+1] = cu_seqlens[i] + len_i, T = cu_seqlens[nseq]
 *   tokens[cu_seqlens[i] + p]    = s_i[p]
 *   positions[cu_seqlens[i] + p] = p
 *   targets[cu_seqlens[i] + p]   = s_i[p+1], or -1 for p = len_i - 1
 *   ntargets = sum(len_i - 1)   (the targets that are not -1)
 *   genre[i] = the genre index of s_i */
#ifndef FABULA_DATA_BATCH_H
#define FABULA_DATA_BATCH_H

#include <stdint.h>

#include "corpus/windows.h"

typedef struct batch {
    int32_t *tokens, *positions, *targets, *cu_seqlens;
    int T;          /* tokens in the batch */
    int nseq;       /* samples in the batch */
    int cap_tokens; /* allocated entries of tokens/positions/targets */
    int cap_seqs;   /* allocated samples (cu_seqlens has cap_seqs + 1) */
    long ntargets;
    uint8_t *genre;
} batch_t;

/* Packs samples ids[0..n) of `set` into *b, which must start zeroed
 * (batch_t b = {0}) and may be reused: buffers grow as needed and are kept. */
void batch_pack(batch_t *b, const sample_set_t *set, const int64_t *ids, int n);

/* Builds the batch from n samples whose tokens are concatenated in
 * `tokens` (sample i has lens[i] tokens), each cut to its first max_len
 * tokens (sequence-length warm-up; max_len <= 0: no cut). genres may be NULL. */
void batch_from_tokens(batch_t *b, const int32_t *tokens, const int64_t *lens, const uint8_t *genres, int n,
                       int max_len);
void batch_free(batch_t *b);

#endif
