#include "corpus/windows.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytetok.h"
#include "util/error.h"

/* Both passes below must walk the same windows; these two helpers are the
 * only place where the rule of windows.h is written down in code. */
typedef struct window_geom {
    int64_t width;  /* W: content tokens per full window */
    int64_t stride; /* S: content tokens between window starts */
} window_geom_t;

/* K: windows of a novel of `len` content bytes, kept or not. */
static int64_t window_count(const window_geom_t *g, int64_t len)
{
    if (len <= g->width)
        return 1;
    return 1 + (len - g->width + g->stride - 1) / g->stride;
}

/* Content tokens of window k (its length is that + 1); *start: first byte. */
static int64_t window_content(const window_geom_t *g, int64_t len, int64_t k, int64_t *start)
{
    *start = k * g->stride;
    int64_t end = *start + g->width < len ? *start + g->width : len;
    return end - *start;
}

void windows_build(sample_set_t *set, const novel_set_t *novels, int seq_len, int overlap, int min_seq_len)
{
    if (seq_len < 2)
        fb_fatal(FB_EXIT_USAGE, "data.seq_len must be at least 2 (genre token + 1 byte), got %d", seq_len);
    if (overlap < 0 || overlap > seq_len - 2)
        fb_fatal(FB_EXIT_USAGE, "data.overlap must be in [0, seq_len - 2] = [0, %d] so that windows advance, got %d",
                 seq_len - 2, overlap);
    if (min_seq_len > seq_len)
        fb_fatal(FB_EXIT_USAGE, "data.min_seq_len (%d) must not exceed data.seq_len (%d)", min_seq_len, seq_len);

    memset(set, 0, sizeof *set);
    set->seq_len = seq_len;
    set->overlap = overlap;
    set->min_seq_len = min_seq_len;
    /* A window of the genre token alone has nothing to predict. */
    const int64_t keep_min = min_seq_len > 2 ? min_seq_len : 2;
    const window_geom_t g = {.width = seq_len - 1, .stride = seq_len - 1 - overlap};

    /* Pass 1: sizes, so that the arrays are allocated once. */
    int64_t n = 0, ntok = 0;
    for (int v = 0; v < novels->n; v++) {
        int64_t len = (int64_t)novels->novels[v].len;
        int64_t K = window_count(&g, len);
        for (int64_t k = 0; k < K; k++) {
            int64_t start, c = window_content(&g, len, k, &start);
            if (c + 1 < keep_min) {
                set->n_dropped++;
                continue;
            }
            n++;
            ntok += c + 1;
        }
    }
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "no training sample: all %d novels are shorter than data.min_seq_len (%d tokens)",
                 novels->n, min_seq_len);

    set->tokens = fb_malloc((size_t)ntok * sizeof *set->tokens);
    set->offsets = fb_malloc((size_t)(n + 1) * sizeof *set->offsets);
    set->genre = fb_malloc((size_t)n * sizeof *set->genre);
    set->novel = fb_malloc((size_t)n * sizeof *set->novel);

    /* Pass 2: fill. */
    int64_t i = 0, t = 0;
    for (int v = 0; v < novels->n; v++) {
        const novel_t *nv = &novels->novels[v];
        int64_t len = (int64_t)nv->len;
        int64_t K = window_count(&g, len);
        int32_t gtok = bytetok_genre_token(nv->genre);
        for (int64_t k = 0; k < K; k++) {
            int64_t start, c = window_content(&g, len, k, &start);
            if (c + 1 < keep_min)
                continue;
            set->offsets[i] = t;
            set->genre[i] = (uint8_t)nv->genre;
            set->novel[i] = v;
            set->tokens[t] = gtok;
            bytetok_encode(nv->content + start, (size_t)c, set->tokens + t + 1);
            t += c + 1;
            i++;
        }
    }
    FB_ASSERT(i == n && t == ntok);
    set->offsets[n] = ntok;
    set->n = n;
    set->ntokens = ntok;
}

void sample_set_free(sample_set_t *set)
{
    free(set->tokens);
    free(set->offsets);
    free(set->genre);
    free(set->novel);
    memset(set, 0, sizeof *set);
}
