#include "loader/batch.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void batch_reserve(batch_t *b, int64_t T, int n)
{
    FB_ASSERT(T <= INT_MAX - 1);
    if (T > b->cap_tokens) {
        int cap = b->cap_tokens ? b->cap_tokens : 1024;
        while (cap < T)
            cap = cap > INT_MAX / 2 ? (int)T : 2 * cap;
        b->tokens = fb_realloc(b->tokens, (size_t)cap * sizeof *b->tokens);
        b->positions = fb_realloc(b->positions, (size_t)cap * sizeof *b->positions);
        b->targets = fb_realloc(b->targets, (size_t)cap * sizeof *b->targets);
        b->cap_tokens = cap;
    }
    if (n > b->cap_seqs || !b->cu_seqlens) {
        int cap = b->cap_seqs > n ? b->cap_seqs : n;
        b->cu_seqlens = fb_realloc(b->cu_seqlens, ((size_t)cap + 1) * sizeof *b->cu_seqlens);
        b->genre = fb_realloc(b->genre, (size_t)(cap ? cap : 1) * sizeof *b->genre);
        b->cap_seqs = cap;
    }
}

void batch_pack(batch_t *b, const sample_set_t *set, const int64_t *ids, int n)
{
    FB_ASSERT(n >= 0);
    int64_t T = 0;
    for (int i = 0; i < n; i++) {
        FB_ASSERT(ids[i] >= 0 && ids[i] < set->n);
        T += sample_set_len(set, ids[i]);
    }
    batch_reserve(b, T, n);

    int32_t t = 0;
    long ntargets = 0;
    b->cu_seqlens[0] = 0;
    for (int i = 0; i < n; i++) {
        const int32_t *src = set->tokens + set->offsets[ids[i]];
        int32_t len = (int32_t)sample_set_len(set, ids[i]);
        memcpy(b->tokens + t, src, (size_t)len * sizeof *src);
        for (int32_t p = 0; p < len; p++) {
            b->positions[t + p] = p;
            b->targets[t + p] = p + 1 < len ? src[p + 1] : -1;
        }
        t += len;
        ntargets += len - 1;
        b->cu_seqlens[i + 1] = t;
        b->genre[i] = set->genre[ids[i]];
    }
    b->T = t;
    b->nseq = n;
    b->ntargets = ntargets;
}

void batch_from_tokens(batch_t *b, const int32_t *tokens, const int64_t *lens, const uint8_t *genres, int n,
                       int max_len)
{
    FB_ASSERT(n >= 0);
    int64_t T = 0;
    for (int i = 0; i < n; i++)
        T += max_len > 0 && lens[i] > max_len ? max_len : lens[i];
    batch_reserve(b, T, n);
    int32_t t = 0;
    long ntargets = 0;
    const int32_t *src = tokens;
    b->cu_seqlens[0] = 0;
    for (int i = 0; i < n; i++) {
        int32_t len = (int32_t)(max_len > 0 && lens[i] > max_len ? max_len : lens[i]);
        memcpy(b->tokens + t, src, (size_t)len * sizeof *src);
        for (int32_t p = 0; p < len; p++) {
            b->positions[t + p] = p;
            b->targets[t + p] = p + 1 < len ? src[p + 1] : -1;
        }
        src += lens[i];
        t += len;
        ntargets += len - 1;
        b->cu_seqlens[i + 1] = t;
        b->genre[i] = genres ? genres[i] : 0;
    }
    b->T = t;
    b->nseq = n;
    b->ntargets = ntargets;
}

void batch_free(batch_t *b)
{
    free(b->tokens);
    free(b->positions);
    free(b->targets);
    free(b->cu_seqlens);
    free(b->genre);
    memset(b, 0, sizeof *b);
}
