#include "loader/balance.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* ------------------------------------------------------------ scratch */

static void reserve(balance_plan_t *p, int64_t n, int nranks)
{
    if (n > p->cap_n || !p->ids) {
        int64_t cap = n > 16 ? n : 16;
        size_t m = (size_t)cap;
        p->ids = fb_realloc(p->ids, m * sizeof *p->ids);
        p->lens = fb_realloc(p->lens, m * sizeof *p->lens);
        p->deferred = fb_realloc(p->deferred, m * sizeof *p->deferred);
        p->deferred_lens = fb_realloc(p->deferred_lens, m * sizeof *p->deferred_lens);
        p->order = fb_realloc(p->order, m * sizeof *p->order);
        p->rank_of = fb_realloc(p->rank_of, m * sizeof *p->rank_of);
        p->cap_n = cap;
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

/* ------------------------------------------------------------ assignment */

static int fits(const balance_plan_t *p, int r, int64_t len, int64_t budget)
{
    return budget <= 0 || p->tokens[r] + len <= budget;
}

/* The least-loaded rank (by tokens, or by cost when by_cost) that can take
 * `len` more tokens; -1 when none can. */
static int least_loaded_fitting(const balance_plan_t *p, int nranks, int64_t len, int64_t budget, int by_cost)
{
    int best = -1;
    double best_load = 0.0;
    for (int r = 0; r < nranks; r++) {
        if (!fits(p, r, len, budget))
            continue;
        double load = by_cost ? p->cost[r] : (double)p->tokens[r];
        if (best < 0 || load < best_load) {
            best = r;
            best_load = load;
        }
    }
    return best;
}

static void give(balance_plan_t *p, int64_t i, int r, int64_t len, double c)
{
    p->rank_of[i] = r;
    p->tokens[r] += len;
    p->cost[r] += balance_cost(len, c);
}

static void assign_uniform(balance_plan_t *p, const int64_t *lens, int64_t n, int nranks, double c, int64_t budget)
{
    for (int64_t i = 0; i < n; i++) {
        int r = (int)(i % nranks);
        if (!fits(p, r, lens[i], budget))
            r = least_loaded_fitting(p, nranks, lens[i], budget, 0);
        if (r >= 0)
            give(p, i, r, lens[i], c);
    }
}

static void assign_sorted(balance_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int nranks, double c,
                          int64_t budget, int by_cost)
{
    balance_order_by_length(p->order, ids, lens, n);

    rank_heap_t h = {p->heap, p->heap_pos, nranks, p->cost, p->tokens, by_cost};
    /* All loads are 0: rank order is already a valid heap. */
    for (int r = 0; r < nranks; r++) {
        h.heap[r] = r;
        h.pos[r] = r;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t i = p->order[k];
        int r = h.heap[0];
        if (!fits(p, r, lens[i], budget))
            r = least_loaded_fitting(p, nranks, lens[i], budget, by_cost);
        if (r < 0)
            continue;
        give(p, i, r, lens[i], c);
        heap_sift_down(&h, h.pos[r]);
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

void balance_plan_make(balance_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int nranks,
                       loader_sampler_t strategy, double c, int64_t budget)
{
    FB_ASSERT(n >= 0 && nranks >= 1 && c >= 0.0 && n < INT64_MAX / 2);
    reserve(p, n, nranks);
    p->nranks = nranks;
    for (int r = 0; r < nranks; r++) {
        p->cost[r] = 0.0;
        p->tokens[r] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        FB_ASSERT(lens[i] >= 1 && (budget <= 0 || lens[i] <= budget));
        p->rank_of[i] = -1;
    }
    if (strategy == LOADER_SAMPLER_UNIFORM)
        assign_uniform(p, lens, n, nranks, c, budget);
    else
        assign_sorted(p, ids, lens, n, nranks, c, budget, strategy == LOADER_SAMPLER_LPT);

    /* Group by rank, keeping input order inside each rank (a counting sort). */
    for (int r = 0; r <= nranks; r++)
        p->start[r] = 0;
    p->ndeferred = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p->rank_of[i] < 0) {
            p->deferred[p->ndeferred] = ids[i];
            p->deferred_lens[p->ndeferred++] = lens[i];
        } else {
            p->start[p->rank_of[i] + 1]++;
        }
    }
    for (int r = 0; r < nranks; r++)
        p->start[r + 1] += p->start[r];
    p->n = p->start[nranks];
    int64_t *cursor = p->cursor;
    for (int r = 0; r < nranks; r++)
        cursor[r] = p->start[r];
    for (int64_t i = 0; i < n; i++) {
        int r = p->rank_of[i];
        if (r < 0)
            continue;
        p->ids[cursor[r]] = ids[i];
        p->lens[cursor[r]++] = lens[i];
    }
    p->imbalance_cost = imbalance(p->cost, nranks);
    p->imbalance_tokens = imbalance_i64(p->tokens, nranks);
}

void balance_plan_free(balance_plan_t *p)
{
    free(p->ids);
    free(p->lens);
    free(p->start);
    free(p->cost);
    free(p->tokens);
    free(p->deferred);
    free(p->deferred_lens);
    free(p->order);
    free(p->rank_of);
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
