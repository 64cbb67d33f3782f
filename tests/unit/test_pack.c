/* Padding-free packing into micro-batches (src/loader/pack.h): no sample lost
 * or duplicated, every micro-batch within capacity and never empty, at most
 * max_bins micro-batches, deferral only when nothing has room, sequential's
 * breaks only where the next sample does not fit, best_fit on a worked
 * example and leaving no two micro-batches that would fit in one, efficiencies
 * recounted, and batch_pack over a plan giving cu_seqlens, positions and
 * targets that cover every token once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/batch.h"
#include "loader/pack.h"
#include "corpus/windows.h"
#include "rng.h"
#include "testlib.h"

static const loader_packing_t packers[2] = {LOADER_PACK_SEQUENTIAL, LOADER_PACK_BEST_FIT};

static void random_lengths(int64_t *lens, int n, int64_t hi, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        lens[i] = 1 + (int64_t)(fb_hash2(seed, (uint64_t)i) % (uint64_t)hi);
}

/* Layout, conservation, capacity, deferral and efficiency of one plan. */
static void check_plan(const pack_plan_t *p, const int64_t *lens, int n, int64_t cap, int max_bins,
                       const char *what)
{
    int *seen = calloc((size_t)n, sizeof *seen); /* ids here are 0..n-1 */
    int64_t tokens = 0;
    EXPECT(max_bins <= 0 || p->nbins <= max_bins, "%s: %d micro-batches > %d", what, p->nbins, max_bins);
    for (int b = 0; b < p->nbins; b++) {
        int64_t t = 0;
        EXPECT(p->start[b + 1] > p->start[b], "%s: micro-batch %d is empty", what, b);
        for (int64_t k = p->start[b]; k < p->start[b + 1]; k++) {
            seen[p->ids[k]]++;
            EXPECT(p->lens[k] == lens[p->ids[k]], "%s: length of id %lld", what, (long long)p->ids[k]);
            t += lens[p->ids[k]];
            /* input order inside a micro-batch */
            EXPECT(k == p->start[b] || p->ids[k] > p->ids[k - 1], "%s: micro-batch %d out of input order", what, b);
        }
        EXPECT(t <= cap, "%s: micro-batch %d holds %lld > capacity %lld", what, b, (long long)t, (long long)cap);
        EXPECT(t == p->bin_tokens[b], "%s: micro-batch %d tokens %lld, recount %lld", what, b,
               (long long)p->bin_tokens[b], (long long)t);
        tokens += t;
    }
    for (int64_t k = 0; k < p->ndeferred; k++) {
        seen[p->deferred[k]]++;
        EXPECT(max_bins > 0 && p->nbins == max_bins, "%s: deferred with a micro-batch still to open", what);
        EXPECT(p->deferred_lens[k] == lens[p->deferred[k]], "%s: deferred length", what);
    }
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= seen[i] == 1;
    EXPECT(ok, "%s: a sample is lost or duplicated", what);
    EXPECT(tokens == p->tokens && p->n + p->ndeferred == n, "%s: totals", what);
    double eff = p->nbins ? (double)tokens / ((double)p->nbins * (double)cap) : 0.0;
    EXPECT(fabs(pack_plan_efficiency(p) - eff) < 1e-12, "%s: efficiency %g, recount %g", what,
           pack_plan_efficiency(p), eff);
    free(seen);
}

static void test_random_plans(void)
{
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + (trial * 7) % 90;
        int64_t cap = 50 + 13 * trial;
        int64_t ids[128], lens[128];
        random_lengths(lens, n, cap, 500 + (uint64_t)trial);
        for (int i = 0; i < n; i++)
            ids[i] = i;
        int max_bins = trial % 3 == 0 ? 0 : 1 + trial % 5;
        for (int s = 0; s < 2; s++) {
            pack_plan_t p = {0};
            pack_plan_make(&p, ids, lens, n, cap, max_bins, packers[s], 0.0);
            char what[64];
            snprintf(what, sizeof what, "trial %d %s", trial, config_packing_name(packers[s]));
            check_plan(&p, lens, n, cap, max_bins, what);
            /* A deferred sample found no room: best_fit looks at every
             * micro-batch, sequential only at the last one it opened (rooms
             * only shrink, so the final rooms are an upper bound). */
            for (int64_t k = 0; k < p.ndeferred; k++)
                for (int b = packers[s] == LOADER_PACK_BEST_FIT ? 0 : p.nbins - 1; b < p.nbins; b++)
                    EXPECT(p.bin_tokens[b] + p.deferred_lens[k] > cap, "%s: deferred sample fits micro-batch %d",
                           what, b);
            if (packers[s] == LOADER_PACK_SEQUENTIAL && max_bins <= 0) {
                /* in order, a break only where the next sample did not fit */
                for (int64_t k = 0; k < p.n; k++)
                    EXPECT(p.ids[k] == k, "%s: order", what);
                for (int b = 0; b + 1 < p.nbins; b++)
                    EXPECT(p.bin_tokens[b] + lens[p.ids[p.start[b + 1]]] > cap, "%s: needless break after %d", what,
                           b);
            }
            if (packers[s] == LOADER_PACK_BEST_FIT) {
                /* Any-fit: a micro-batch is opened only for a sample that fit
                 * no open one, and loads only grow, so no two could merge. */
                for (int a = 0; a < p.nbins; a++)
                    for (int b = a + 1; b < p.nbins; b++)
                        EXPECT(p.bin_tokens[a] + p.bin_tokens[b] > cap, "%s: micro-batches %d and %d fit in one",
                               what, a, b);
            }
            pack_plan_free(&p);
        }
    }
}

/* Worked by hand, capacity 10, lengths 6 5 4 3 2 in that order:
 * sequential: [6] [5 4] [3 2]; best_fit (6 5 4 3 2 by length): 6 -> A,
 * 5 -> B, 4 -> A (room 4 = exact), 3 -> B, 2 -> B: [6 4] [5 3 2]. */
/* balanced: with room everywhere, greedy least-cost placement of samples
 * by decreasing length into exactly min(max_bins, n) micro-batches, none
 * empty; checked against a direct transcription, and by hand: capacity 100,
 * c = 0, lengths 50 40 30 20 10 into 2 -> A 50; B 40; B 30 (70); A 20 (70);
 * A 10 (80, lower index on the tie). Its cost spread is at most the
 * longest sample's cost (the LPT bound), which best_fit does not give. */
static void test_balanced(void)
{
    int64_t ids[5] = {0, 1, 2, 3, 4}, lens[5] = {50, 40, 30, 20, 10};
    pack_plan_t p = {0};
    pack_plan_make(&p, ids, lens, 5, 100, 2, LOADER_PACK_BALANCED, 0.0);
    EXPECT(p.nbins == 2 && p.bin_tokens[0] == 80 && p.bin_tokens[1] == 70 && p.ndeferred == 0,
           "worked example: %d micro-batches, tokens %lld %lld", p.nbins, (long long)p.bin_tokens[0],
           (long long)p.bin_tokens[1]);
    pack_plan_free(&p);
    for (int trial = 0; trial < 40; trial++) {
        const int n = 8 + (trial * 11) % 120, bins = 1 + trial % 9;
        const double c = trial % 2 ? 0.0 : 1e-3;
        int64_t tid[128], tl[128];
        random_lengths(tl, n, 400, 900 + (uint64_t)trial);
        for (int i = 0; i < n; i++)
            tid[i] = i;
        /* capacity with room for everything: the pure cost balance */
        pack_plan_make(&p, tid, tl, n, 400 * 128, bins, LOADER_PACK_BALANCED, c);
        char what[64];
        snprintf(what, sizeof what, "balanced trial %d", trial);
        check_plan(&p, tl, n, 400 * 128, bins, what);
        const int want = bins < n ? bins : n;
        EXPECT(p.nbins == want && p.ndeferred == 0, "%s: %d micro-batches, %lld deferred", what, p.nbins,
               (long long)p.ndeferred);
        double lo = 1e300, hi = 0, maxc = 0;
        for (int b = 0; b < p.nbins; b++) {
            double cost = 0;
            for (int64_t k = p.start[b]; k < p.start[b + 1]; k++)
                cost += (double)p.lens[k] + c * (double)p.lens[k] * (double)p.lens[k];
            lo = cost < lo ? cost : lo;
            hi = cost > hi ? cost : hi;
        }
        for (int i = 0; i < n; i++) {
            double ci = (double)tl[i] + c * (double)tl[i] * (double)tl[i];
            maxc = ci > maxc ? ci : maxc;
        }
        EXPECT(hi - lo <= maxc + 1e-9, "%s: cost spread %g above the longest sample's cost %g", what, hi - lo, maxc);
        pack_plan_free(&p);
    }
}

static void test_worked_example(void)
{
    const int64_t ids[5] = {0, 1, 2, 3, 4}, lens[5] = {6, 5, 4, 3, 2};
    pack_plan_t p = {0};
    pack_plan_make(&p, ids, lens, 5, 10, 0, LOADER_PACK_SEQUENTIAL, 0.0);
    EXPECT(p.nbins == 3 && p.start[1] == 1 && p.start[2] == 3 && p.ids[1] == 1 && p.ids[2] == 2, "sequential %d bins",
           p.nbins);
    pack_plan_make(&p, ids, lens, 5, 10, 0, LOADER_PACK_BEST_FIT, 0.0);
    EXPECT(p.nbins == 2 && p.start[1] == 2 && p.ids[0] == 0 && p.ids[1] == 2 && p.ids[2] == 1 && p.ids[3] == 3 &&
               p.ids[4] == 4,
           "best_fit %d bins", p.nbins);
    EXPECT(fabs(pack_plan_efficiency(&p) - 20.0 / 20.0) < 1e-15, "efficiency %g", pack_plan_efficiency(&p));
    /* one micro-batch allowed, best_fit: 6 -> A, 5 finds no room -> deferred,
     * 4 -> A (now full), 3 and 2 deferred; deferred in input order 1 3 4. */
    pack_plan_make(&p, ids, lens, 5, 10, 1, LOADER_PACK_BEST_FIT, 0.0);
    EXPECT(p.nbins == 1 && p.tokens == 10 && p.ndeferred == 3 && p.deferred[0] == 1 && p.deferred[1] == 3 &&
               p.deferred[2] == 4,
           "best_fit, one micro-batch: %d bins, %lld deferred", p.nbins, (long long)p.ndeferred);
    /* sequential, one micro-batch: 6 in, 5 deferred, 4 fits (10), 3, 2 deferred */
    pack_plan_make(&p, ids, lens, 5, 10, 1, LOADER_PACK_SEQUENTIAL, 0.0);
    EXPECT(p.nbins == 1 && p.tokens == 10 && p.ndeferred == 3, "sequential, one micro-batch: %lld deferred",
           (long long)p.ndeferred);
    EXPECT(fabs(pack_padded_efficiency(20, 5, 8) - 0.5) < 1e-15, "padded efficiency %g",
           pack_padded_efficiency(20, 5, 8));
    pack_plan_free(&p);
}

/* A plan fed to batch_pack: every token of every sample exactly once,
 * positions restarting per sample, targets -1 at each sample's end. */
static void test_batch_pack(void)
{
    enum { N = 37 };
    int64_t lens[N], ids[N];
    random_lengths(lens, N, 60, 77);
    sample_set_t set = {0};
    set.n = N;
    set.offsets = malloc((N + 1) * sizeof *set.offsets);
    set.genre = calloc(N, 1);
    set.offsets[0] = 0;
    for (int i = 0; i < N; i++) {
        set.offsets[i + 1] = set.offsets[i] + lens[i];
        ids[i] = i;
    }
    set.ntokens = set.offsets[N];
    set.tokens = malloc((size_t)set.ntokens * sizeof *set.tokens);
    /* token value = (sample << 8) | position: identifies where it came from */
    for (int i = 0; i < N; i++)
        for (int64_t t = 0; t < lens[i]; t++)
            set.tokens[set.offsets[i] + t] = (int32_t)((i << 8) | t);
    pack_plan_t p = {0};
    pack_plan_make(&p, ids, lens, N, 128, 0, LOADER_PACK_BEST_FIT, 0.0);
    check_plan(&p, lens, N, 128, 0, "batch_pack input");
    batch_t b = {0};
    int *hit = calloc((size_t)set.ntokens, sizeof *hit);
    for (int k = 0; k < p.nbins; k++) {
        int nseq = (int)(p.start[k + 1] - p.start[k]);
        batch_pack(&b, &set, p.ids + p.start[k], nseq);
        EXPECT(b.T == p.bin_tokens[k] && b.T <= 128, "micro-batch %d: T %d, plan %lld", k, b.T,
               (long long)p.bin_tokens[k]);
        EXPECT(b.ntargets == b.T - nseq, "micro-batch %d: ntargets %ld", k, b.ntargets);
        for (int s = 0; s < nseq; s++) {
            int64_t id = p.ids[p.start[k] + s];
            EXPECT(b.cu_seqlens[s + 1] - b.cu_seqlens[s] == lens[id], "cu_seqlens of sample %lld", (long long)id);
            for (int32_t t = b.cu_seqlens[s]; t < b.cu_seqlens[s + 1]; t++) {
                int32_t pos = t - b.cu_seqlens[s];
                EXPECT(b.positions[t] == pos, "position");
                EXPECT((b.tokens[t] >> 8) == id && (b.tokens[t] & 255) == pos, "token from the wrong place");
                int32_t want = pos + 1 < lens[id] ? (int32_t)((id << 8) | (pos + 1)) : -1;
                EXPECT(b.targets[t] == want, "target crosses a sample boundary");
                hit[set.offsets[id] + pos]++;
            }
        }
    }
    int once = 1;
    for (int64_t t = 0; t < set.ntokens; t++)
        once &= hit[t] == 1;
    EXPECT(once, "a token is lost or duplicated by pack + batch_pack");
    free(hit);
    batch_free(&b);
    pack_plan_free(&p);
    free(set.offsets);
    free(set.genre);
    free(set.tokens);
}

/* best_fit against the rule of pack.h written as a scan: samples by
 * descending length (ties by id, then position), each into the open
 * micro-batch with the least room that fits, the lower index among equals,
 * else a new one while fewer than max_bins are open, else deferred. Large
 * steps with many equal lengths, as the packer sees a whole global batch. */
static void test_best_fit_against_scan(void)
{
    enum { N = 3000 };
    static int64_t ids[N], lens[N], bin_tok[N];
    static int order[N], bin_of[N];
    for (int trial = 0; trial < 12; trial++) {
        const int n = trial < 6 ? 200 + 400 * trial : N;
        const int64_t cap = trial % 2 ? 1000 : 4096;
        const int max_bins = trial % 3 == 0 ? 0 : n / (3 + trial % 4);
        for (int i = 0; i < n; i++) {
            ids[i] = (int64_t)((i * 7919 + trial) % 100003);
            lens[i] = trial % 4 == 1 ? 1 + (int64_t)(fb_hash2(31, (uint64_t)(i + trial)) % 5) * (cap / 8)
                                     : 1 + (int64_t)(fb_hash2(77, (uint64_t)(i * 13 + trial)) % (uint64_t)cap);
        }
        /* selection order by hand: insertion sort on (len desc, id asc, position) */
        for (int i = 0; i < n; i++) {
            int j = i;
            while (j > 0 && (lens[order[j - 1]] < lens[i] ||
                             (lens[order[j - 1]] == lens[i] && ids[order[j - 1]] > ids[i]))) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = i;
        }
        int nb = 0;
        for (int k = 0; k < n; k++) {
            const int i = order[k];
            int best = -1;
            for (int b = 0; b < nb; b++)
                if (cap - bin_tok[b] >= lens[i] && (best < 0 || cap - bin_tok[b] < cap - bin_tok[best]))
                    best = b;
            if (best < 0 && (max_bins <= 0 || nb < max_bins)) {
                bin_tok[nb] = 0;
                best = nb++;
            }
            bin_of[i] = best;
            if (best >= 0)
                bin_tok[best] += lens[i];
        }
        pack_plan_t p = {0};
        pack_plan_make(&p, ids, lens, n, cap, max_bins, LOADER_PACK_BEST_FIT, 0.0);
        int same = p.nbins == nb;
        for (int b = 0; same && b < p.nbins; b++) {
            for (int64_t k = p.start[b]; same && k < p.start[b + 1]; k++) {
                /* ids are distinct here: find the position */
                int pos = -1;
                for (int i = 0; i < n && pos < 0; i++)
                    pos = ids[i] == p.ids[k] ? i : -1;
                same = pos >= 0 && bin_of[pos] == b;
            }
        }
        int64_t ndef = 0;
        for (int i = 0; i < n; i++)
            ndef += bin_of[i] < 0;
        same = same && p.ndeferred == ndef;
        EXPECT(same, "trial %d (n %d, capacity %lld, max %d): best_fit differs from the scan (%d vs %d micro-batches)",
               trial, n, (long long)cap, max_bins, p.nbins, nb);
        pack_plan_free(&p);
    }
}

int main(void)
{
    test_random_plans();
    test_best_fit_against_scan();
    test_worked_example();
    test_balanced();
    test_batch_pack();
    printf("test_pack: %d checks, %d failures (conservation, capacity, max micro-batches, deferral, sequential "
           "breaks, best_fit leaves no mergeable pair, best_fit vs a scan, worked example, balanced, efficiencies, "
           "batch_pack tokens)\n",
           checks, failures);
    return failures ? 1 : 0;
}
