/* Learning byte-level BPE merges from pre-token counts (what `fabula
 * tokenizer train` runs on rank 0 once the counts of all ranks are merged).
 *
 * Every pre-token starts as its bytes (ids 0..255). Each step merges, in
 * every pre-token, all occurrences (left to right) of the adjacent pair with
 * the highest count, weighted by how often the pre-token occurs; ties go to
 * the pair whose left token's bytes are lexicographically smallest, then
 * whose right token's bytes are, then the smaller ids. The new token gets id
 * 256 + step. So the result depends only on the multiset of pre-tokens: not
 * on the order they were counted in, nor on the number of ranks. */
#ifndef FABULA_DATA_BPE_TRAIN_H
#define FABULA_DATA_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/bytemap.h"
#include "tokenizer/pretok.h"

/* Adds the pre-tokens of text[0..n) to `counts` (pre-token bytes -> count).
 * Returns the number of pre-tokens. */
size_t bpe_count_pretokens(const pretok_t *p, pretok_scratch_t *s, const uint8_t *text, size_t n, bytemap_t *counts);

/* The counts as a flat buffer (per entry: u32 length, bytes, u64 count;
 * little-endian) for sending to another rank. malloc'd, size in *n. */
uint8_t *bpe_counts_pack(const bytemap_t *counts, size_t *n);
/* Adds the packed counts buf[0..n) to `counts`. Returns -1 if buf is not
 * a well-formed pack, else 0. */
int bpe_counts_add_packed(bytemap_t *counts, const uint8_t *buf, size_t n);

/* Learns up to `nmerges` merges from `counts`; stops early when the best
 * pair occurs fewer than `min_frequency` times (or no pair is left).
 * Returns the merges as pairs (left, right) of ids, 2 * *nout values,
 * malloc'd. `progress`: print a line every 10% of the work. */
int32_t *bpe_train(const bytemap_t *counts, size_t nmerges, long long min_frequency, int progress, size_t *nout);

#endif
