/* Load-balanced sampling over data-parallel ranks (src/loader/balance.h):
 * the step loop covers an epoch exactly once, the assignment depends only on
 * its input, budgets hold and deferral happens only when no rank has room,
 * each strategy matches a naive re-implementation of its rule, the imbalance
 * is recomputed from the lists, c agrees with the model's FLOP count, and on
 * the bundled corpus split by chapters lpt <= greedy <= uniform; the step
 * plan run on simulated ranks (step_plan_stats.h) adds up consistently.
 * Expected values come from naive loops written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "corpus/chapter_lengths.h"
#include "corpus/novels.h"
#include "loader/balance.h"
#include "loader/pack.h"
#include "loader/sampler.h"
#include "loader/step_plan_stats.h"
#include "model/model.h"
#include "rng.h"
#include "testlib.h"
#include "train/train_config.h"

static const loader_sampler_t strategies[3] = {LOADER_SAMPLER_UNIFORM, LOADER_SAMPLER_GREEDY, LOADER_SAMPLER_LPT};

/* Heavy-tailed lengths in [lo, hi]: a cube of a uniform variate. */
static void random_lengths(int64_t *lens, int64_t n, int64_t lo, int64_t hi, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(fb_hash2(seed, (uint64_t)i) >> 11) / 9007199254740992.0;
        lens[i] = lo + (int64_t)(u * u * u * (double)(hi - lo + 1));
        if (lens[i] > hi)
            lens[i] = hi;
    }
}

/* Checks the layout of a plan against its input: every input id is either
 * assigned once or deferred once, per-rank totals and imbalance recomputed,
 * budgets respected, deferral only when no rank had room. */
static void check_plan(const balance_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, double c,
                       int64_t budget, const char *what)
{
    /* Multisets (a step may hold an id twice across an epoch boundary):
     * +1 per input, -1 per output; all must end at 0. */
    int64_t max_id = 0;
    for (int64_t i = 0; i < n; i++)
        max_id = ids[i] > max_id ? ids[i] : max_id;
    int *seen = calloc((size_t)max_id + 1, sizeof *seen);
    int64_t *len_of = calloc((size_t)max_id + 1, sizeof *len_of);
    for (int64_t i = 0; i < n; i++) {
        seen[ids[i]]++;
        len_of[ids[i]] = lens[i];
    }
    double sum_cost = 0, max_cost = 0, sum_tok = 0, max_tok = 0;
    for (int r = 0; r < p->nranks; r++) {
        int64_t tok = 0;
        double cost = 0;
        for (int64_t k = p->start[r]; k < p->start[r + 1]; k++) {
            seen[p->ids[k]] -= p->ids[k] <= max_id ? 1 : 0;
            EXPECT(p->ids[k] <= max_id, "%s: unknown id %lld", what, (long long)p->ids[k]);
            EXPECT(p->ids[k] > max_id || p->lens[k] == len_of[p->ids[k]], "%s: id %lld has the wrong length", what,
                   (long long)p->ids[k]);
            tok += p->lens[k];
            cost += (double)p->lens[k] + c * (double)p->lens[k] * (double)p->lens[k];
        }
        EXPECT(tok == p->tokens[r], "%s: rank %d tokens %lld, recount %lld", what, r, (long long)p->tokens[r],
               (long long)tok);
        EXPECT(fabs(cost - p->cost[r]) <= 1e-9 * fmax(1.0, cost), "%s: rank %d cost %g, recount %g", what, r,
               p->cost[r], cost);
        EXPECT(budget <= 0 || tok <= budget, "%s: rank %d holds %lld tokens > budget %lld", what, r, (long long)tok,
               (long long)budget);
        sum_cost += cost;
        sum_tok += (double)tok;
        max_cost = fmax(max_cost, cost);
        max_tok = fmax(max_tok, (double)tok);
    }
    for (int64_t k = 0; k < p->ndeferred; k++) {
        EXPECT(p->deferred[k] <= max_id, "%s: unknown id %lld", what, (long long)p->deferred[k]);
        if (p->deferred[k] <= max_id) {
            seen[p->deferred[k]]--;
            EXPECT(p->deferred_lens[k] == len_of[p->deferred[k]], "%s: deferred id %lld has the wrong length", what,
                   (long long)p->deferred[k]);
        }
        for (int r = 0; r < p->nranks; r++)
            EXPECT(p->tokens[r] + p->deferred_lens[k] > budget, "%s: deferred id %lld (len %lld) fits rank %d", what,
                   (long long)p->deferred[k], (long long)p->deferred_lens[k], r);
    }
    int ok = 1;
    for (int64_t i = 0; i <= max_id; i++)
        ok &= seen[i] == 0;
    EXPECT(ok, "%s: an id is lost or duplicated", what);
    EXPECT(p->n + p->ndeferred == n, "%s: %lld assigned + %lld deferred != %lld", what, (long long)p->n,
           (long long)p->ndeferred, (long long)n);
    double want_c = sum_cost > 0 ? fmax(0.0, max_cost / (sum_cost / p->nranks) - 1) : 0;
    double want_t = sum_tok > 0 ? fmax(0.0, max_tok / (sum_tok / p->nranks) - 1) : 0;
    EXPECT(fabs(p->imbalance_cost - want_c) < 1e-9, "%s: imbalance %g, recount %g", what, p->imbalance_cost, want_c);
    EXPECT(fabs(p->imbalance_tokens - want_t) < 1e-9, "%s: token imbalance %g, recount %g", what,
           p->imbalance_tokens, want_t);
    free(seen);
    free(len_of);
}

/* Every sample of an epoch used exactly once across ranks: with the batch
 * dividing n and no budget pressure, n / batch steps hand out epoch 0. */
static void test_epoch_coverage(void)
{
    enum { N = 240, RANKS = 4, PER_RANK = 6 };
    int64_t lens_all[N];
    random_lengths(lens_all, N, 16, 4096, 7);
    for (int s = 0; s < 3; s++) {
        sampler_t smp;
        sampler_init(&smp, N, 99);
        balance_plan_t p = {0};
        int used[N] = {0};
        int64_t ids[RANKS * PER_RANK], lens[RANKS * PER_RANK];
        for (int step = 0; step < N / (RANKS * PER_RANK); step++) {
            balance_step_ids(&smp, NULL, 0, RANKS * PER_RANK, ids);
            for (int i = 0; i < RANKS * PER_RANK; i++)
                lens[i] = lens_all[ids[i]];
            balance_plan_make(&p, ids, lens, RANKS * PER_RANK, RANKS, strategies[s], 1e-3, 0);
            check_plan(&p, ids, lens, RANKS * PER_RANK, 1e-3, 0, config_sampler_name(strategies[s]));
            for (int64_t k = 0; k < p.n; k++)
                used[p.ids[k]]++;
        }
        int once = 1;
        for (int i = 0; i < N; i++)
            once &= used[i] == 1;
        EXPECT(once, "%s: an epoch does not use every sample exactly once", config_sampler_name(strategies[s]));
        balance_plan_free(&p);
        sampler_free(&smp);
    }
}

/* Budget pressure: a step offers more tokens than the ranks may hold; the
 * deferred samples come first in the next step, and over the run every
 * handed-out id is assigned exactly once or still pending. */
static void test_budget_and_deferral(void)
{
    enum { N = 500, RANKS = 5, COUNT = 40, STEPS = 30 };
    const int64_t budget = 3000;
    int64_t lens_all[N];
    random_lengths(lens_all, N, 8, 2000, 11);
    for (int s = 0; s < 3; s++) {
        sampler_t smp;
        sampler_init(&smp, N, 5);
        balance_plan_t p = {0};
        int64_t ids[COUNT], lens[COUNT], carry[COUNT], ncarry = 0, ndeferred_total = 0;
        long handed[N] = {0}, assigned[N] = {0};
        for (int step = 0; step < STEPS; step++) {
            int64_t fresh = balance_step_ids(&smp, carry, ncarry, COUNT, ids);
            EXPECT(fresh == COUNT - ncarry, "fresh %lld", (long long)fresh);
            EXPECT(ncarry == 0 || memcmp(ids, carry, (size_t)ncarry * sizeof *ids) == 0,
                   "deferred ids must come first");
            for (int64_t i = ncarry; i < COUNT; i++)
                handed[ids[i]]++;
            for (int i = 0; i < COUNT; i++)
                lens[i] = lens_all[ids[i]];
            balance_plan_make(&p, ids, lens, COUNT, RANKS, strategies[s], 2e-4, budget);
                        check_plan(&p, ids, lens, COUNT, 2e-4, budget, config_sampler_name(strategies[s]));
            for (int64_t k = 0; k < p.n; k++)
                assigned[p.ids[k]]++;
            ncarry = p.ndeferred;
            ndeferred_total += ncarry;
            memcpy(carry, p.deferred, (size_t)ncarry * sizeof *carry);
        }
        for (int64_t k = 0; k < ncarry; k++)
            assigned[carry[k]]++;
        int ok = 1;
        for (int i = 0; i < N; i++)
            ok &= handed[i] == assigned[i];
        EXPECT(ok, "%s: handed-out ids != assigned + pending", config_sampler_name(strategies[s]));
        EXPECT(ndeferred_total > 0, "%s: the budget never bound; the test needs pressure",
               config_sampler_name(strategies[s]));
        balance_plan_free(&p);
        sampler_free(&smp);
    }
}

/* The rules of balance.h, written naively: the rank each input goes to. */
static void naive_assign(const int64_t *ids, const int64_t *lens, int n, int nranks, loader_sampler_t s, double c,
                         int64_t budget, int *rank_of)
{
    double load[64] = {0};
    int64_t tok[64] = {0};
    int order[256], used[256] = {0};
    for (int k = 0; k < n; k++) {
        if (s == LOADER_SAMPLER_UNIFORM) {
            order[k] = k;
            continue;
        }
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (used[i])
                continue;
            if (best < 0 || lens[i] > lens[best] || (lens[i] == lens[best] && ids[i] < ids[best]))
                best = i;
        }
        used[best] = 1;
        order[k] = best;
    }
    for (int k = 0; k < n; k++) {
        int i = order[k], pick = -1;
        int by_cost = s == LOADER_SAMPLER_LPT;
        if (s == LOADER_SAMPLER_UNIFORM && (budget <= 0 || tok[k % nranks] + lens[i] <= budget)) {
            pick = k % nranks;
        } else {
            for (int r = 0; r < nranks; r++) {
                if (budget > 0 && tok[r] + lens[i] > budget)
                    continue;
                double lr = by_cost ? load[r] : (double)tok[r];
                double lp = pick < 0 ? 0 : by_cost ? load[pick] : (double)tok[pick];
                if (pick < 0 || lr < lp)
                    pick = r;
            }
        }
        rank_of[i] = pick;
        if (pick >= 0) {
            tok[pick] += lens[i];
            load[pick] += (double)lens[i] + c * (double)lens[i] * (double)lens[i];
        }
    }
}

static void test_rules_against_naive(void)
{
    const int nranks_list[3] = {1, 3, 7};
    for (int trial = 0; trial < 40; trial++) {
        int n = 5 + trial * 3 % 120;
        int nranks = nranks_list[trial % 3];
        int64_t ids[256], lens[256];
        random_lengths(lens, n, 1, 300, 100 + (uint64_t)trial);
        for (int i = 0; i < n; i++) {
            ids[i] = (int64_t)((i * 37 + trial) % 997); /* distinct, not sorted */
            if (trial % 4 == 0)
                lens[i] = 1 + i % 3; /* many ties */
        }
        int64_t budget = trial % 2 ? 0 : 400 + 30 * trial;
        double c = trial % 5 == 0 ? 0.0 : 0.003;
        for (int s = 0; s < 3; s++) {
            balance_plan_t p = {0};
            balance_plan_make(&p, ids, lens, n, nranks, strategies[s], c, budget);
            check_plan(&p, ids, lens, n, c, budget, config_sampler_name(strategies[s]));
            int rank_of[256];
            naive_assign(ids, lens, n, nranks, strategies[s], c, budget, rank_of);
            /* The plan, expanded back to a rank per input position. */
            int match = 1;
            int64_t next_def = 0;
            int64_t *cursor = calloc((size_t)nranks, sizeof *cursor);
            for (int r = 0; r < nranks; r++)
                cursor[r] = p.start[r];
            for (int i = 0; i < n; i++) {
                int r = rank_of[i];
                if (r < 0) {
                    match &= next_def < p.ndeferred && p.deferred[next_def++] == ids[i];
                } else {
                    match &= cursor[r] < p.start[r + 1] && p.ids[cursor[r]++] == ids[i];
                }
            }
            free(cursor);
            EXPECT(match, "trial %d %s: assignment differs from the naive rule", trial,
                   config_sampler_name(strategies[s]));
            balance_plan_free(&p);
        }
    }
}

/* The fallback when the chosen rank has no room: the least-loaded rank that
 * has, the lower index among equals, else deferral. Worked by hand. */
static void test_fallback(void)
{
    const int64_t ids[5] = {0, 1, 2, 3, 4};
    balance_plan_t p = {0};
    /* uniform, 3 ranks, budget 10, lengths 9 2 2 5: ranks 0 1 2 get 9 2 2;
     * the 5 (rank 0 by round robin) does not fit there; ranks 1 and 2 tie
     * at 2 tokens -> rank 1 */
    const int64_t l1[4] = {9, 2, 2, 5};
    balance_plan_make(&p, ids, l1, 4, 3, LOADER_SAMPLER_UNIFORM, 0.0, 10);
    EXPECT(p.start[1] == 1 && p.start[2] == 3 && p.ids[1] == 1 && p.ids[2] == 3 && p.ndeferred == 0,
           "uniform fallback: rank sizes %lld %lld %lld", (long long)(p.start[1] - p.start[0]),
           (long long)(p.start[2] - p.start[1]), (long long)(p.start[3] - p.start[2]));
    /* greedy: lengths 6 6 4 4 (sorted: 6 6 4 4), 3 ranks, budget 8:
     * 6 -> 0, 6 -> 1, 4 -> 2 (4), 4 -> top is 2 (4 + 4 = 8 fits) -> 2 */
    const int64_t l2[4] = {6, 6, 4, 4};
    balance_plan_make(&p, ids, l2, 4, 3, LOADER_SAMPLER_GREEDY, 0.0, 8);
    EXPECT(p.tokens[0] == 6 && p.tokens[1] == 6 && p.tokens[2] == 8 && p.ndeferred == 0, "greedy: %lld %lld %lld",
           (long long)p.tokens[0], (long long)p.tokens[1], (long long)p.tokens[2]);
    /* lpt: lengths 5 5 5 5 2, 2 ranks, budget 10: 5 5 to ranks 0 1, 5 5 to
     * 0 1 (both full at 10), 2 fits nowhere -> deferred */
    const int64_t l3[5] = {5, 5, 5, 5, 2};
    balance_plan_make(&p, ids, l3, 5, 2, LOADER_SAMPLER_LPT, 1e-3, 10);
    EXPECT(p.ndeferred == 1 && p.deferred[0] == 4 && p.tokens[0] == 10 && p.tokens[1] == 10, "lpt deferral: %lld",
           (long long)p.ndeferred);
    balance_plan_free(&p);
}

/* Same input, same output: the whole step loop twice with one seed, and a
 * different seed giving a different assignment. */
static uint64_t run_digest(uint64_t seed, loader_sampler_t s)
{
    enum { N = 300, RANKS = 6, COUNT = 48 };
    int64_t lens_all[N], ids[COUNT], lens[COUNT], carry[COUNT], ncarry = 0;
    random_lengths(lens_all, N, 4, 900, 3);
    sampler_t smp;
    sampler_init(&smp, N, seed);
    balance_plan_t p = {0};
    uint64_t h = 0;
    for (int step = 0; step < 20; step++) {
        balance_step_ids(&smp, carry, ncarry, COUNT, ids);
        for (int i = 0; i < COUNT; i++)
            lens[i] = lens_all[ids[i]];
        balance_plan_make(&p, ids, lens, COUNT, RANKS, s, 1e-3, 4000);
        for (int r = 0; r <= RANKS; r++)
            h = fb_hash2(h, (uint64_t)p.start[r]);
        for (int64_t k = 0; k < p.n; k++)
            h = fb_hash2(h, (uint64_t)p.ids[k]);
        ncarry = p.ndeferred;
        memcpy(carry, p.deferred, (size_t)ncarry * sizeof *carry);
    }
    balance_plan_free(&p);
    sampler_free(&smp);
    return h;
}

static void test_determinism(void)
{
    for (int s = 0; s < 3; s++) {
        uint64_t a = run_digest(42, strategies[s]), b = run_digest(42, strategies[s]);
        EXPECT(a == b, "%s: same seed, different assignment", config_sampler_name(strategies[s]));
        EXPECT(a != run_digest(43, strategies[s]), "%s: another seed, same assignment",
               config_sampler_name(strategies[s]));
    }
}

/* c against the model's own FLOP count: cost(len) must be the FLOPs of a
 * causal sample of length len (mean attended span len/2) over 6 N_active. */
static void test_attention_cost(void)
{
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    train_config_resolve(&cfg, 0);
    double c = model_attention_cost(&cfg.model);
    double n_active = (double)model_active_params(&cfg.model);
    for (int64_t len = 1; len <= 65536; len *= 4) {
        double flops = model_flops_per_token(&cfg.model, (double)len / 2.0, 0) * (double)len;
        double want = flops / (6.0 * n_active);
        EXPECT(fabs(balance_cost(len, c) - want) <= 1e-9 * want, "len %lld: cost %g, FLOPs/(6N) %g", (long long)len,
               balance_cost(len, c), want);
    }
    EXPECT(fabs(cfg.loader.attention_cost - c) <= 1e-15, "data.attention_cost auto %g, derived %g",
           cfg.loader.attention_cost, c);
    config_free(&cfg);
}

/* Chapters end at runs of >= 3 newlines; a sample is genre + bytes, cut. */
static void test_chapter_lengths(void)
{
    static const char text[] = "A\n\n\nBB\n\nCC\n\n\n\nDDDDDDDDDD\n\n\n";
    novel_t nv = {.content = (uint8_t *)text, .len = sizeof text - 1, .genre = 0, .title = NULL};
    novel_set_t set = {.novels = &nv, .n = 1};
    int64_t *lens, cut;
    int64_t n = chapter_lengths_get(&set, 8, &lens, &cut);
    /* "A" -> 2, "BB\n\nCC" -> 7, "DDDDDDDDDD" -> 11 cut to 8 */
    EXPECT(n == 3 && lens[0] == 2 && lens[1] == 7 && lens[2] == 8 && cut == 1, "n %lld lens %lld %lld %lld cut %lld",
           (long long)n, (long long)lens[0], (long long)(n > 1 ? lens[1] : -1), (long long)(n > 2 ? lens[2] : -1),
           (long long)cut);
    free(lens);
}

/* The bundled corpus split by chapters: mean cost imbalance over steps. */
static void test_bundled_corpus_order(void)
{
    const char *path = testlib_srcdir_file("inputs/sample.jsonl", "bundled corpus");
    if (!path)
        return;
    novel_set_t novels;
    novels_load(&novels, path);
    int64_t *lens_all, cut;
    int64_t n = chapter_lengths_get(&novels, 32768, &lens_all, &cut);
    novels_free(&novels);
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    train_config_resolve(&cfg, 0);
    double c = cfg.loader.attention_cost;
    config_free(&cfg);

    enum { RANKS = 4, PER_RANK = 4, STEPS = 60 };
    double mean[3] = {0, 0, 0};
    for (int s = 0; s < 3; s++) {
        sampler_t smp;
        sampler_init(&smp, n, 1234);
        balance_plan_t p = {0};
        int64_t ids[RANKS * PER_RANK], lens[RANKS * PER_RANK];
        for (int step = 0; step < STEPS; step++) {
            balance_step_ids(&smp, NULL, 0, RANKS * PER_RANK, ids);
            for (int i = 0; i < RANKS * PER_RANK; i++)
                lens[i] = lens_all[ids[i]];
            balance_plan_make(&p, ids, lens, RANKS * PER_RANK, RANKS, strategies[s], c, 0);
            /* recomputed from the per-rank lists, not taken from the plan */
            double sum = 0, max = 0;
            for (int r = 0; r < RANKS; r++) {
                double cost = 0;
                for (int64_t k = p.start[r]; k < p.start[r + 1]; k++)
                    cost += (double)p.lens[k] + c * (double)p.lens[k] * (double)p.lens[k];
                sum += cost;
                max = fmax(max, cost);
            }
            mean[s] += (max / (sum / RANKS) - 1) / STEPS;
        }
        balance_plan_free(&p);
        sampler_free(&smp);
    }
    printf("bundled corpus by chapters: %lld samples, %d ranks x %d, mean cost imbalance uniform %.2f%%, greedy "
           "%.2f%%, lpt %.2f%%\n",
           (long long)n, RANKS, PER_RANK, 100 * mean[0], 100 * mean[1], 100 * mean[2]);
    EXPECT(n == 33, "the bundled sample has 33 chapters, got %lld", (long long)n);
    EXPECT(mean[2] <= mean[1] && mean[1] <= mean[0], "lpt %g <= greedy %g <= uniform %g", mean[2], mean[1], mean[0]);
    free(lens_all);
}

/* The step plan on simulated ranks carries deferrals: the micro-batches
 * used stay within ranks x accumulation per step, every sample offered is
 * trained on or carried, and the efficiencies are tokens / slots. */
static void test_sim(void)
{
    enum { N = 400, RANKS = 8, PER_RANK = 6, STEPS = 12, ACCUM = 2, CAPACITY = 1024, MAX_LEN = 512 };
    int64_t lens[N];
    random_lengths(lens, N, 2, MAX_LEN, 21);
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    train_config_resolve(&cfg, 0);
    cfg.train_batch_size = RANKS * PER_RANK;
    cfg.grad_accum = ACCUM;
    cfg.data.seq_len = MAX_LEN;
    cfg.loader.max_tokens_per_batch = CAPACITY;
    cfg.loader.attention_cost = 1e-3;
    cfg.run.seed = 9;
    step_plan_stats_t st[3][2];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 2; k++) {
            cfg.loader.sampler = strategies[s];
            cfg.loader.packing = (loader_packing_t)k;
            step_plan_stats_t *t = &st[s][k];
            step_plan_stats_run(&cfg, lens, N, RANKS, STEPS, t);
            double want = (double)t->tokens / ((double)t->bins * (double)CAPACITY);
            EXPECT(fabs(t->packing - want) < 1e-12, "%s/%s efficiency %g, recount %g",
                   config_sampler_name(strategies[s]), config_packing_name((loader_packing_t)k), t->packing, want);
            EXPECT(t->bins <= (int64_t)STEPS * RANKS * ACCUM, "%s/%s: %lld micro-batches",
                   config_sampler_name(strategies[s]), config_packing_name((loader_packing_t)k),
                   (long long)t->bins);
            /* each step offers RANKS x PER_RANK: trained on, or carried into the next offer */
            EXPECT(t->samples + t->deferred == (int64_t)STEPS * RANKS * PER_RANK,
                   "%s/%s: %lld samples trained + %lld deferred != %d offered", config_sampler_name(strategies[s]),
                   config_packing_name((loader_packing_t)k), (long long)t->samples, (long long)t->deferred,
                   STEPS * RANKS * PER_RANK);
            EXPECT(t->pack_deferred <= t->deferred, "packer deferrals %lld of %lld", (long long)t->pack_deferred,
                   (long long)t->deferred);
        }
    EXPECT(st[2][LOADER_PACK_BEST_FIT].imb_cost_mean <= st[0][LOADER_PACK_BEST_FIT].imb_cost_mean,
           "lpt %g vs uniform %g", st[2][LOADER_PACK_BEST_FIT].imb_cost_mean,
           st[0][LOADER_PACK_BEST_FIT].imb_cost_mean);
    const step_plan_stats_t *bf = &st[2][LOADER_PACK_BEST_FIT];
    EXPECT(fabs(pack_padded_efficiency(bf->tokens, bf->samples, MAX_LEN) -
                (double)bf->tokens / ((double)bf->samples * (double)MAX_LEN)) < 1e-12,
           "padded %g", pack_padded_efficiency(bf->tokens, bf->samples, MAX_LEN));
    config_free(&cfg);
}

int main(void)
{
    test_epoch_coverage();
    test_budget_and_deferral();
    test_rules_against_naive();
    test_fallback();
    test_determinism();
    test_attention_cost();
    test_chapter_lengths();
    test_bundled_corpus_order();
    test_sim();
    printf("test_balance: %d checks, %d failures (epoch coverage, budgets and deferral, rules vs naive, "
           "determinism, c vs FLOPs, chapters, bundled corpus order, step plan on simulated ranks)\n",
           checks, failures);
    return failures ? 1 : 0;
}
