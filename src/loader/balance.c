#include "loader/balance.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* ------------------------------------------------------------ scratch */

static void reserve(balance_plan_t *p, int nbins, int nranks)
{
    if (nbins > p->cap_bins || !p->rank_of) {
        size_t m = (size_t)(nbins > 16 ? nbins : 16);
        p->rank_of = fb_realloc(p->rank_of, m * sizeof *p->rank_of);
        p->bins = fb_realloc(p->bins, m * sizeof *p->bins);
        p->order = fb_realloc(p->order, m * sizeof *p->order);
        p->cap_bins = (int)m;
    }
    if (nranks > p->cap_ranks) {
        size_t m = (size_t)nranks;
        p->start = fb_realloc(p->start, (m + 1) * sizeof *p->start);
        p->cost = fb_realloc(p->cost, m * sizeof *p->cost);
        p->tokens = fb_realloc(p->tokens, m * sizeof *p->tokens);
        p->heap = fb_realloc(p->heap, m * sizeof *p->heap);
        p->heap_pos = fb_realloc(p->heap_pos, m * sizeof *p->heap_pos);
        p->cursor = fb_realloc(p->cursor, m * sizeof *p->cursor);
        p->cap_ranks = nranks;
    }
}

/* ------------------------------------------------------------ sort order */

/* qsort has no context argument; the arrays are reached through these
 * file-scope pointers for the duration of one sort. */
static const int64_t *sort_ids, *sort_lens;

/* Descending length; equal lengths by ascending sample id, then input
 * position, so the order is total and the same on every rank. For c >= 0
 * the cost is increasing in the length, so this is also the cost order. */
static int by_length_desc(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (sort_lens[i] != sort_lens[j])
        return sort_lens[i] > sort_lens[j] ? -1 : 1;
    if (sort_ids[i] != sort_ids[j])
        return sort_ids[i] < sort_ids[j] ? -1 : 1;
    return (i > j) - (i < j);
}

void balance_order_by_length(int64_t *order, const int64_t *ids, const int64_t *lens, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    sort_ids = ids;
    sort_lens = lens;
    qsort(order, (size_t)n, sizeof *order, by_length_desc);
    sort_ids = sort_lens = NULL;
}

/* Micro-batches by descending key (cost or tokens), equal keys by index. */
static const double *sort_key;

static int by_key_desc(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_key[i] != sort_key[j])
        return sort_key[i] > sort_key[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* ------------------------------------------------------------ rank heap */

/* A min-heap of ranks by (load, rank index): the top is the least-loaded
 * rank, the lower index among equals. */
typedef struct rank_heap {
    int *heap, *pos, n;
    const double *cost;
    const int64_t *tokens;
    int by_cost;
} rank_heap_t;

static double load_of(const rank_heap_t *h, int r) { return h->by_cost ? h->cost[r] : (double)h->tokens[r]; }

static int before(const rank_heap_t *h, int a, int b)
{
    double la = load_of(h, a), lb = load_of(h, b);
    return la < lb || (la == lb && a < b);
}

static void heap_swap(rank_heap_t *h, int i, int j)
{
    int t = h->heap[i];
    h->heap[i] = h->heap[j];
    h->heap[j] = t;
    h->pos[h->heap[i]] = i;
    h->pos[h->heap[j]] = j;
}

/* Loads only grow, so a rank only ever moves down. */
static void heap_sift_down(rank_heap_t *h, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h, h->heap[l], h->heap[m]))
            m = l;
        if (r < h->n && before(h, h->heap[r], h->heap[m]))
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

/* Removes the top (a rank that holds its per_rank micro-batches). */
static void heap_pop(rank_heap_t *h)
{
    heap_swap(h, 0, h->n - 1);
    h->n--;
    if (h->n > 0)
        heap_sift_down(h, 0);
}

/* ------------------------------------------------------------ assignment */

static void give(balance_plan_t *p, int k, int r, const double *bin_cost, const int64_t *bin_tokens)
{
    p->rank_of[k] = r;
    p->cost[r] += bin_cost[k];
    p->tokens[r] += bin_tokens[k];
}

/* by_cost: lpt, else greedy. The tokens go into a double key only for the
 * sort; they are exact below 2^53. */
static void assign_sorted(balance_plan_t *p, const double *bin_cost, const int64_t *bin_tokens, int nbins, int nranks,
                          int per_rank, int by_cost, double *key)
{
    for (int k = 0; k < nbins; k++) {
        key[k] = by_cost ? bin_cost[k] : (double)bin_tokens[k];
        p->order[k] = k;
    }
    sort_key = key;
    qsort(p->order, (size_t)nbins, sizeof *p->order, by_key_desc);
    sort_key = NULL;

    rank_heap_t h = {p->heap, p->heap_pos, nranks, p->cost, p->tokens, by_cost};
    /* All loads are 0: rank order is already a valid heap. */
    for (int r = 0; r < nranks; r++) {
        h.heap[r] = r;
        h.pos[r] = r;
    }
    for (int q = 0; q < nbins; q++) {
        int k = p->order[q];
        int r = h.heap[0]; /* never empty: nbins <= nranks x per_rank */
        give(p, k, r, bin_cost, bin_tokens);
        p->cursor[r]++;
        if (p->cursor[r] == per_rank)
            heap_pop(&h);
        else
            heap_sift_down(&h, 0);
    }
}

/* ------------------------------------------------------------ refinement */

/* lpt's second pass: LPT alone leaves a few percent when each rank holds
 * only a handful of micro-batches of unequal cost. Repeatedly take the
 * most loaded rank A and, among the REFINE_PARTNERS least loaded ranks B,
 * the exchange of one micro-batch of A for one of B (or for an empty slot
 * of B: a move) that brings the larger of the two new loads lowest; stop
 * when no exchange lowers A. Each step strictly lowers the sum of squared
 * loads, so it ends; REFINE_ROUNDS x nranks bounds the work. Ties: the
 * lower rank, then the lower slot. */
#define REFINE_PARTNERS 8
#define REFINE_ROUNDS 4

static void refine(balance_plan_t *p, const double *bin_cost, const int64_t *bin_tokens, int nranks, int per_rank,
                   int *slot)
{
    int partners[REFINE_PARTNERS];
    for (long round = 0; round < (long)REFINE_ROUNDS * nranks; round++) {
        int A = 0;
        for (int r = 1; r < nranks; r++)
            if (p->cost[r] > p->cost[A])
                A = r;
        /* the least loaded ranks, in ascending (load, index) order */
        int np = 0;
        for (int r = 0; r < nranks; r++) {
            if (r == A)
                continue;
            int at = np < REFINE_PARTNERS ? np++ : REFINE_PARTNERS;
            while (at > 0 && p->cost[partners[at - 1]] > p->cost[r]) {
                if (at < REFINE_PARTNERS)
                    partners[at] = partners[at - 1];
                at--;
            }
            if (at < REFINE_PARTNERS)
                partners[at] = r;
        }
        int bestB = -1, besta = -1, bestb = -1;
        double best_top = p->cost[A];
        for (int q = 0; q < np; q++) {
            const int B = partners[q];
            for (int i = 0; i < per_rank; i++) {
                const int ka = slot[A * per_rank + i];
                if (ka < 0)
                    continue;
                for (int j = 0; j < per_rank; j++) {
                    const int kb = slot[B * per_rank + j];
                    const double d = bin_cost[ka] - (kb < 0 ? 0.0 : bin_cost[kb]);
                    if (d <= 0.0)
                        continue;
                    const double a = p->cost[A] - d, b = p->cost[B] + d;
                    const double top = a > b ? a : b;
                    if (top < best_top) {
                        best_top = top;
                        bestB = B;
                        besta = i;
                        bestb = j;
                    }
                }
            }
        }
        if (bestB < 0)
            return;
        const int ka = slot[A * per_rank + besta], kb = slot[bestB * per_rank + bestb];
        const double d = bin_cost[ka] - (kb < 0 ? 0.0 : bin_cost[kb]);
        const int64_t dt = bin_tokens[ka] - (kb < 0 ? 0 : bin_tokens[kb]);
        p->cost[A] -= d;
        p->cost[bestB] += d;
        p->tokens[A] -= dt;
        p->tokens[bestB] += dt;
        slot[A * per_rank + besta] = kb;
        slot[bestB * per_rank + bestb] = ka;
    }
}

/* max/mean - 1; max >= mean, but equal loads can round a hair below. */
static double ratio_minus_one(double max, double sum, int nranks)
{
    if (sum <= 0.0)
        return 0.0;
    double r = max / (sum / nranks) - 1.0;
    return r > 0.0 ? r : 0.0;
}

static double imbalance(const double *load, int nranks)
{
    double sum = 0.0, max = 0.0;
    for (int r = 0; r < nranks; r++) {
        sum += load[r];
        if (load[r] > max)
            max = load[r];
    }
    return ratio_minus_one(max, sum, nranks);
}

/* Token totals as doubles: exact below 2^53. */
static double imbalance_i64(const int64_t *load, int nranks)
{
    double sum = 0.0, max = 0.0;
    for (int r = 0; r < nranks; r++) {
        sum += (double)load[r];
        if ((double)load[r] > max)
            max = (double)load[r];
    }
    return ratio_minus_one(max, sum, nranks);
}

void balance_plan_make(balance_plan_t *p, const double *bin_cost, const int64_t *bin_tokens, int nbins, int nranks,
                       int per_rank, loader_sampler_t strategy)
{
    FB_ASSERT(nbins >= 0 && nranks >= 1 && per_rank >= 1 && (int64_t)nbins <= (int64_t)nranks * per_rank);
    reserve(p, nbins, nranks);
    p->nranks = nranks;
    p->per_rank = per_rank;
    p->nbins = nbins;
    for (int r = 0; r < nranks; r++) {
        p->cost[r] = 0.0;
        p->tokens[r] = 0;
        p->cursor[r] = 0;
    }
    for (int k = 0; k < nbins; k++)
        FB_ASSERT(bin_cost[k] >= 0.0 && bin_tokens[k] >= 0);
    if (strategy == LOADER_SAMPLER_UNIFORM) {
        for (int k = 0; k < nbins; k++)
            give(p, k, k % nranks, bin_cost, bin_tokens);
    } else {
        double *key = fb_malloc((size_t)(nbins > 0 ? nbins : 1) * sizeof *key);
        assign_sorted(p, bin_cost, bin_tokens, nbins, nranks, per_rank, strategy == LOADER_SAMPLER_LPT, key);
        free(key);
        if (strategy == LOADER_SAMPLER_LPT && nranks > 1) {
            int *slot = fb_malloc((size_t)nranks * (size_t)per_rank * sizeof *slot);
            for (int r = 0; r < nranks; r++)
                p->cursor[r] = 0;
            for (size_t i = 0; i < (size_t)nranks * (size_t)per_rank; i++)
                slot[i] = -1;
            for (int k = 0; k < nbins; k++)
                slot[p->rank_of[k] * per_rank + p->cursor[p->rank_of[k]]++] = k;
            refine(p, bin_cost, bin_tokens, nranks, per_rank, slot);
            for (int r = 0; r < nranks; r++)
                for (int j = 0; j < per_rank; j++)
                    if (slot[r * per_rank + j] >= 0)
                        p->rank_of[slot[r * per_rank + j]] = r;
            free(slot);
        }
    }

    /* Group by rank, ascending micro-batch index inside each (a counting sort). */
    for (int r = 0; r <= nranks; r++)
        p->start[r] = 0;
    for (int k = 0; k < nbins; k++)
        p->start[p->rank_of[k] + 1]++;
    for (int r = 0; r < nranks; r++) {
        p->start[r + 1] += p->start[r];
        p->cursor[r] = p->start[r];
    }
    for (int k = 0; k < nbins; k++)
        p->bins[p->cursor[p->rank_of[k]]++] = k;
    for (int r = 0; r < nranks; r++)
        FB_ASSERT(p->start[r + 1] - p->start[r] <= per_rank);
    p->imbalance_cost = imbalance(p->cost, nranks);
    p->imbalance_tokens = imbalance_i64(p->tokens, nranks);
}

void balance_plan_free(balance_plan_t *p)
{
    free(p->rank_of);
    free(p->bins);
    free(p->start);
    free(p->cost);
    free(p->tokens);
    free(p->order);
    free(p->heap);
    free(p->heap_pos);
    free(p->cursor);
    memset(p, 0, sizeof *p);
}

int64_t balance_step_ids(sampler_t *s, const int64_t *deferred, int64_t ndeferred, int64_t count, int64_t *ids)
{
    FB_ASSERT(ndeferred >= 0 && ndeferred <= count && count - ndeferred <= INT_MAX);
    memmove(ids, deferred, (size_t)ndeferred * sizeof *ids);
    int64_t fresh = count - ndeferred;
    sampler_next(s, (int)fresh, ids + ndeferred);
    return fresh;
}
