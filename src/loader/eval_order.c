#include "loader/eval_order.h"

#include <stdlib.h>

#include "util/error.h"

typedef struct member {
    int32_t novel;
    int64_t id;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->novel != y->novel)
        return x->novel < y->novel ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

typedef struct novel_span {
    int64_t first, count; /* its samples: members[first .. first + count) */
    int genre;
    int64_t *spread;      /* its positions 0..count-1 in bit-reversed order */
} novel_span_t;

static uint64_t bit_reverse(uint64_t j, int bits)
{
    uint64_t r = 0;
    for (int b = 0; b < bits; b++)
        r |= ((j >> b) & 1u) << (bits - 1 - b);
    return r;
}

static void spread_fill(int64_t *out, int64_t m)
{
    int bits = 0;
    while (((int64_t)1 << bits) < m)
        bits++;
    int64_t k = 0;
    for (uint64_t j = 0; j < (uint64_t)1 << bits; j++) {
        uint64_t p = bit_reverse(j, bits);
        if (p < (uint64_t)m)
            out[k++] = (int64_t)p;
    }
    FB_ASSERT(k == m);
}

/* Novels by genre, then file order; interleaved: the first of each genre,
 * then the second of each, ... (nv is in file order). */
static int64_t *novels_interleaved(const novel_span_t *nv, int64_t nn)
{
    enum { NG = 256 };
    int64_t start[NG + 1] = {0}, fill[NG] = {0}, most = 0;
    for (int64_t v = 0; v < nn; v++)
        start[nv[v].genre + 1]++;
    for (int g = 0; g < NG; g++) {
        most = start[g + 1] > most ? start[g + 1] : most;
        start[g + 1] += start[g];
    }
    int64_t *by_genre = fb_malloc((size_t)(nn ? nn : 1) * sizeof *by_genre);
    for (int64_t v = 0; v < nn; v++)
        by_genre[start[nv[v].genre] + fill[nv[v].genre]++] = v;
    int64_t *out = fb_malloc((size_t)(nn ? nn : 1) * sizeof *out), placed = 0;
    for (int64_t round = 0; round < most; round++)
        for (int g = 0; g < NG; g++)
            if (start[g] + round < start[g + 1])
                out[placed++] = by_genre[start[g] + round];
    FB_ASSERT(placed == nn);
    free(by_genre);
    return out;
}

void eval_order_make(const int32_t *novel, const uint8_t *genre, int64_t n, int64_t *order)
{
    if (n <= 0)
        return;
    member_t *m = fb_malloc((size_t)n * sizeof *m);
    for (int64_t i = 0; i < n; i++)
        m[i] = (member_t){novel[i], i};
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    int64_t nn = 0;
    for (int64_t i = 0; i < n; i++)
        nn += i == 0 || m[i].novel != m[i - 1].novel;
    novel_span_t *nv = fb_calloc((size_t)nn, sizeof *nv);
    int64_t *spread = fb_malloc((size_t)n * sizeof *spread);
    for (int64_t i = 0, v = -1; i < n; i++) {
        if (i == 0 || m[i].novel != m[i - 1].novel)
            nv[++v] = (novel_span_t){.first = i, .genre = genre[m[i].id], .spread = spread + i};
        nv[v].count++;
    }
    for (int64_t v = 0; v < nn; v++)
        spread_fill(nv[v].spread, nv[v].count);
    int64_t *active = novels_interleaved(nv, nn);
    int64_t nactive = nn, k = 0;
    for (int64_t r = 0; nactive > 0; r++) {
        int64_t keep = 0;
        for (int64_t a = 0; a < nactive; a++) {
            const novel_span_t *s = &nv[active[a]];
            order[k++] = m[s->first + s->spread[r]].id;
            if (r + 1 < s->count)
                active[keep++] = active[a];
        }
        nactive = keep;
    }
    FB_ASSERT(k == n);
    free(active);
    free(spread);
    free(nv);
    free(m);
}

static int i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

void eval_order_coverage(const int32_t *novel, const uint8_t *genre, const int64_t *order, int64_t count,
                         int64_t *novels, int *genres)
{
    int seen_genre[256] = {0};
    *genres = 0;
    *novels = 0;
    if (count <= 0)
        return;
    int32_t *ids = fb_malloc((size_t)count * sizeof *ids);
    for (int64_t i = 0; i < count; i++) {
        ids[i] = novel[order[i]];
        if (!seen_genre[genre[order[i]]]++)
            (*genres)++;
    }
    qsort(ids, (size_t)count, sizeof *ids, i32_cmp);
    for (int64_t i = 0; i < count; i++)
        *novels += i == 0 || ids[i] != ids[i - 1];
    free(ids);
}
