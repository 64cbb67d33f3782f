/* Training samples: each novel cut into windows that all start with the
 * novel's genre token.
 *
 * The rule (docs/data.md). For a novel of L content bytes c[0..L) and genre
 * token g, with W = seq_len - 1 content tokens per window and the content
 * stride S = W - overlap:
 *   window k = [g] + c[k*S, min(k*S + W, L)),   k = 0, 1, ..., K-1,
 * where K - 1 is the first k whose window reaches the end (k*S + W >= L).
 * So consecutive windows share exactly `overlap` content tokens (and the
 * genre token), every window holds at most seq_len tokens, and every content
 * byte lies in some window. A window shorter than max(min_seq_len, 2) tokens
 * is dropped; only a novel's last window can be that short (it is also its
 * first when L < W). */
#ifndef FABULA_DATA_WINDOWS_H
#define FABULA_DATA_WINDOWS_H

#include <stdint.h>

#include "corpus/novels.h"

typedef struct sample_set {
    int32_t *tokens;    /* all samples, concatenated */
    int64_t *offsets;   /* sample i is tokens[offsets[i] .. offsets[i+1]); n+1 entries */
    uint8_t *genre;     /* genre index (enum bytetok_genre) of each sample */
    int32_t *novel;     /* index of each sample's novel in the novel_set_t */
    int64_t n;          /* samples */
    int64_t ntokens;    /* = offsets[n] */
    int64_t n_dropped;  /* windows dropped for being shorter than min_seq_len */
    int seq_len, overlap, min_seq_len;
} sample_set_t;

/* Cuts every novel of `novels` into windows (rule above). Parameters out of
 * range (seq_len < 2, overlap outside [0, seq_len-2], min_seq_len > seq_len):
 * exit FB_EXIT_USAGE naming the data.* key; no window kept at all: exit
 * FB_EXIT_DATA. */
void windows_build(sample_set_t *set, const novel_set_t *novels, int seq_len, int overlap, int min_seq_len);

void sample_set_free(sample_set_t *set);

static inline int64_t sample_set_len(const sample_set_t *set, int64_t i)
{
    return set->offsets[i + 1] - set->offsets[i];
}

#endif
