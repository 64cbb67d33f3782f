#include "loader/pack.h"

#include <stdlib.h>
#include <string.h>

#include "loader/balance.h" /* balance_order_by_length */
#include "util/error.h"

static void reserve(pack_plan_t *p, int64_t n)
{
    if (n > p->cap_n || !p->ids) {
        size_t m = (size_t)(n > 16 ? n : 16);
        p->ids = fb_realloc(p->ids, m * sizeof *p->ids);
        p->lens = fb_realloc(p->lens, m * sizeof *p->lens);
        p->deferred = fb_realloc(p->deferred, m * sizeof *p->deferred);
        p->deferred_lens = fb_realloc(p->deferred_lens, m * sizeof *p->deferred_lens);
        p->order = fb_realloc(p->order, m * sizeof *p->order);
        p->bin_of = fb_realloc(p->bin_of, m * sizeof *p->bin_of);
        p->cap_n = (int64_t)m;
    }
    /* Never more bins than samples. */
    if (n + 1 > p->cap_bins || !p->start) {
        size_t m = (size_t)(n > 16 ? n : 16) + 1;
        p->start = fb_realloc(p->start, m * sizeof *p->start);
        p->bin_tokens = fb_realloc(p->bin_tokens, m * sizeof *p->bin_tokens);
        p->cursor = fb_realloc(p->cursor, m * sizeof *p->cursor);
        p->bin_cost = fb_realloc(p->bin_cost, m * sizeof *p->bin_cost);
        p->cap_bins = (int64_t)m;
    }
}

static int can_open(const pack_plan_t *p, int max_bins) { return max_bins <= 0 || p->nbins < max_bins; }

static int open_bin(pack_plan_t *p)
{
    p->bin_tokens[p->nbins] = 0;
    return p->nbins++;
}

static void pack_sequential(pack_plan_t *p, const int64_t *lens, int64_t n, int max_bins)
{
    int cur = -1;
    for (int64_t i = 0; i < n; i++) {
        if (cur < 0 || p->bin_tokens[cur] + lens[i] > p->capacity) {
            if (!can_open(p, max_bins))
                continue; /* deferred; a later, shorter sample may still fit */
            cur = open_bin(p);
        }
        p->bin_of[i] = cur;
        p->bin_tokens[cur] += lens[i];
    }
}

static void pack_best_fit(pack_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int max_bins)
{
    balance_order_by_length(p->order, ids, lens, n);
    /* never more micro-batches than samples */
    int64_t most = max_bins > 0 && max_bins < n ? max_bins : n;
    fit_tree_reset(&p->open, (int)most);
    for (int64_t k = 0; k < n; k++) {
        int64_t i = p->order[k];
        int best = fit_tree_best(&p->open, lens[i]);
        if (best < 0) {
            if (!can_open(p, max_bins))
                continue;
            best = open_bin(p);
        } else {
            fit_tree_remove(&p->open, best);
        }
        p->bin_of[i] = best;
        p->bin_tokens[best] += lens[i];
        if (p->bin_tokens[best] < p->capacity) /* a full one fits nothing more */
            fit_tree_insert(&p->open, best, p->capacity - p->bin_tokens[best]);
    }
}

static void pack_balanced(pack_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int max_bins,
                          double c)
{
    FB_ASSERT(max_bins > 0);
    balance_order_by_length(p->order, ids, lens, n);
    const int bins = (int64_t)max_bins < n ? max_bins : (int)n;
    for (int b = 0; b < bins; b++) {
        open_bin(p);
        p->bin_cost[b] = 0.0;
    }
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = p->order[k];
        int best = -1;
        for (int b = 0; b < bins; b++)
            if (p->bin_tokens[b] + lens[i] <= p->capacity && (best < 0 || p->bin_cost[b] < p->bin_cost[best]))
                best = b;
        if (best < 0)
            continue; /* deferred */
        p->bin_of[i] = best;
        p->bin_tokens[best] += lens[i];
        p->bin_cost[best] += balance_cost(lens[i], c);
    }
}

void pack_plan_make(pack_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int64_t capacity, int max_bins,
                    loader_packing_t strategy, double attention_cost)
{
    FB_ASSERT(n >= 0 && capacity >= 1);
    reserve(p, n);
    p->capacity = capacity;
    p->nbins = 0;
    for (int64_t i = 0; i < n; i++) {
        FB_ASSERT(lens[i] >= 1 && lens[i] <= capacity);
        p->bin_of[i] = -1;
    }
    if (strategy == LOADER_PACK_SEQUENTIAL)
        pack_sequential(p, lens, n, max_bins);
    else if (strategy == LOADER_PACK_BALANCED)
        pack_balanced(p, ids, lens, n, max_bins, attention_cost);
    else
        pack_best_fit(p, ids, lens, n, max_bins);

    /* Group by micro-batch, input order inside each (a counting sort). */
    for (int b = 0; b <= p->nbins; b++)
        p->start[b] = 0;
    p->ndeferred = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p->bin_of[i] < 0) {
            p->deferred[p->ndeferred] = ids[i];
            p->deferred_lens[p->ndeferred++] = lens[i];
        } else {
            p->start[p->bin_of[i] + 1]++;
        }
    }
    for (int b = 0; b < p->nbins; b++) {
        p->start[b + 1] += p->start[b];
        p->cursor[b] = p->start[b];
    }
    p->n = p->start[p->nbins];
    p->tokens = 0;
    for (int64_t i = 0; i < n; i++) {
        int b = p->bin_of[i];
        if (b < 0)
            continue;
        p->ids[p->cursor[b]] = ids[i];
        p->lens[p->cursor[b]++] = lens[i];
        p->tokens += lens[i];
    }
}

double pack_plan_efficiency(const pack_plan_t *p)
{
    return p->nbins > 0 ? (double)p->tokens / ((double)p->nbins * (double)p->capacity) : 0.0;
}

double pack_padded_efficiency(int64_t tokens, int64_t nsamples, int64_t max_seq_len)
{
    return nsamples > 0 ? (double)tokens / ((double)nsamples * (double)max_seq_len) : 0.0;
}

void pack_plan_free(pack_plan_t *p)
{
    free(p->ids);
    free(p->lens);
    free(p->start);
    free(p->bin_tokens);
    free(p->deferred);
    free(p->deferred_lens);
    free(p->order);
    free(p->bin_of);
    free(p->cursor);
    free(p->bin_cost);
    fit_tree_free(&p->open);
    memset(p, 0, sizeof *p);
}
