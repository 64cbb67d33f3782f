/* Load balancing over data-parallel ranks (src/loader/balance.h) and the
 * step plan (src/loader/step_plan.h): the micro-batches of a step do not
 * depend on the number of ranks (the same samples in the same micro-batches,
 * the same deferrals, at 1 to 8 ranks, with both packers, all samplers and
 * the curriculum), every micro-batch is run by exactly one rank and none
 * runs more than gradient_accumulation_steps; the balancer's uniform and
 * greedy rules match naive re-implementations, lpt never does worse than
 * plain LPT (written naively here) and stops only where no exchange with the
 * least loaded ranks lowers the busiest one; the imbalance is recomputed from
 * the lists; c agrees with the model's FLOP count; on the bundled corpus
 * split by chapters lpt <= uniform; the plan on simulated ranks adds up.
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
#include "loader/step_plan.h"
#include "loader/step_plan_stats.h"
#include "model/model.h"
#include "rng.h"
#include "testlib.h"
#include "model/config_resolve.h"

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

static double max_over_mean(const double *load, int n)
{
    double sum = 0, max = 0;
    for (int r = 0; r < n; r++) {
        sum += load[r];
        max = fmax(max, load[r]);
    }
    return sum > 0 ? fmax(0.0, max / (sum / n) - 1) : 0;
}

/* Layout of a plan: every micro-batch on one rank, at most per_rank each,
 * ascending inside a rank, totals and imbalance recomputed. */
static void check_plan(const balance_plan_t *p, const double *cost, const int64_t *tok, int nbins, int nranks,
                       int per_rank, const char *what)
{
    int *seen = calloc((size_t)nbins + 1, sizeof *seen);
    double *rc = calloc((size_t)nranks, sizeof *rc), *rt = calloc((size_t)nranks, sizeof *rt);
    EXPECT(p->start[0] == 0 && p->start[nranks] == nbins, "%s: %d of %d micro-batches assigned", what,
           p->start[nranks], nbins);
    for (int r = 0; r < nranks; r++) {
        EXPECT(p->start[r + 1] - p->start[r] <= per_rank, "%s: rank %d runs %d > %d", what, r,
               p->start[r + 1] - p->start[r], per_rank);
        for (int k = p->start[r]; k < p->start[r + 1]; k++) {
            int b = p->bins[k];
            EXPECT(b >= 0 && b < nbins && p->rank_of[b] == r, "%s: micro-batch %d misplaced", what, b);
            EXPECT(k == p->start[r] || b > p->bins[k - 1], "%s: rank %d out of order", what, r);
            if (b >= 0 && b < nbins) {
                seen[b]++;
                rc[r] += cost[b];
                rt[r] += (double)tok[b];
            }
        }
        EXPECT(fabs(rc[r] - p->cost[r]) <= 1e-9 * fmax(1.0, rc[r]) && rt[r] == (double)p->tokens[r],
               "%s: rank %d totals %g %lld, recount %g %g", what, r, p->cost[r], (long long)p->tokens[r], rc[r], rt[r]);
    }
    int once = 1;
    for (int b = 0; b < nbins; b++)
        once &= seen[b] == 1;
    EXPECT(once, "%s: a micro-batch is lost or run twice", what);
    EXPECT(fabs(p->imbalance_cost - max_over_mean(rc, nranks)) < 1e-9, "%s: imbalance %g, recount %g", what,
           p->imbalance_cost, max_over_mean(rc, nranks));
    EXPECT(fabs(p->imbalance_tokens - max_over_mean(rt, nranks)) < 1e-9, "%s: token imbalance %g, recount %g", what,
           p->imbalance_tokens, max_over_mean(rt, nranks));
    free(seen);
    free(rc);
    free(rt);
}

/* uniform and greedy as balance.h states them, and plain LPT: the rank of
 * each micro-batch, and the largest load. */
static double naive_assign(const double *cost, const int64_t *tok, int nbins, int nranks, int per_rank,
                           loader_sampler_t s, int *rank_of)
{
    double load[64] = {0};
    int held[64] = {0}, used[512] = {0};
    for (int q = 0; q < nbins; q++) {
        int k = q;
        if (s != LOADER_SAMPLER_UNIFORM) { /* the largest key left, the lower index among equals */
            k = -1;
            for (int i = 0; i < nbins; i++) {
                if (used[i])
                    continue;
                double ki = s == LOADER_SAMPLER_LPT ? cost[i] : (double)tok[i];
                double kk = k < 0 ? 0 : s == LOADER_SAMPLER_LPT ? cost[k] : (double)tok[k];
                if (k < 0 || ki > kk)
                    k = i;
            }
            used[k] = 1;
        }
        int pick = -1;
        if (s == LOADER_SAMPLER_UNIFORM) {
            pick = k % nranks;
        } else {
            for (int r = 0; r < nranks; r++) {
                if (held[r] == per_rank)
                    continue;
                if (pick < 0 || load[r] < load[pick])
                    pick = r;
            }
        }
        rank_of[k] = pick;
        held[pick]++;
        load[pick] += s == LOADER_SAMPLER_GREEDY ? (double)tok[k] : cost[k];
    }
    double max = 0;
    for (int r = 0; r < nranks; r++)
        max = fmax(max, load[r]);
    return max;
}

static void random_bins(double *cost, int64_t *tok, int nbins, int trial)
{
    for (int k = 0; k < nbins; k++) {
        tok[k] = trial % 4 == 0 ? 100 * (1 + k % 3) : 1 + (int64_t)(fb_hash2(500 + (uint64_t)trial, (uint64_t)k) % 5000);
        cost[k] = (double)tok[k] + 1e-4 * (double)tok[k] * (double)(1 + fb_hash2(9, (uint64_t)k) % 4000);
    }
}

static void test_rules_against_naive(void)
{
    const int nranks_list[4] = {1, 3, 7, 16};
    for (int trial = 0; trial < 48; trial++) {
        const int nranks = nranks_list[trial % 4], per_rank = 1 + trial % 5;
        const int nbins = trial % 3 == 0 ? nranks * per_rank : (nranks * per_rank * (1 + trial % 7)) / 8;
        double cost[512];
        int64_t tok[512];
        random_bins(cost, tok, nbins, trial);
        for (int s = 0; s < 3; s++) {
            char what[64];
            snprintf(what, sizeof what, "trial %d %s", trial, config_sampler_name(strategies[s]));
            balance_plan_t p = {0};
            balance_plan_make(&p, cost, tok, nbins, nranks, per_rank, strategies[s]);
            check_plan(&p, cost, tok, nbins, nranks, per_rank, what);
            int rank_of[512];
            double lpt_max = naive_assign(cost, tok, nbins, nranks, per_rank, strategies[s], rank_of);
            if (strategies[s] != LOADER_SAMPLER_LPT) {
                int match = 1;
                for (int k = 0; k < nbins; k++)
                    match &= p.rank_of[k] == rank_of[k];
                EXPECT(match, "%s: assignment differs from the naive rule", what);
            } else {
                double max = 0;
                int A = 0;
                for (int r = 0; r < nranks; r++)
                    if (p.cost[r] > max) {
                        max = p.cost[r];
                        A = r;
                    }
                EXPECT(max <= lpt_max * (1 + 1e-12), "%s: busiest rank %g, plain LPT %g", what, max, lpt_max);
                /* up to 9 ranks every other rank is a partner: no exchange lowers A */
                int better = 0;
                for (int B = 0; nranks <= 9 && B < nranks; B++) {
                    if (B == A)
                        continue;
                    for (int i = p.start[A]; i < p.start[A + 1]; i++)
                        for (int j = p.start[B]; j <= p.start[B + 1]; j++) {
                            /* j == end: an empty slot, if B has one */
                            if (j == p.start[B + 1] && p.start[B + 1] - p.start[B] == per_rank)
                                continue;
                            double cb = j < p.start[B + 1] ? cost[p.bins[j]] : 0.0;
                            double d = cost[p.bins[i]] - cb;
                            if (d > 0 && fmax(p.cost[A] - d, p.cost[B] + d) < max * (1 - 1e-12))
                                better = 1;
                        }
                }
                EXPECT(!better, "%s: an exchange would still lower the busiest rank", what);
            }
            balance_plan_free(&p);
        }
    }
}

/* Worked by hand. */
static void test_worked_examples(void)
{
    balance_plan_t p = {0};
    /* costs 10 9 1 1, 2 ranks of 2: uniform 0 1 0 1 (11 / 10); plain LPT
     * 10 -> 0, 9 -> 1, 1 -> 1 (10 / 10), 1 -> 0 (11 / 10), which no exchange
     * improves (10+1 vs 9+1: swapping the 10 and the 9 gives 10 / 11) */
    const double c1[4] = {10, 9, 1, 1};
    const int64_t t1[4] = {10, 9, 1, 1};
    balance_plan_make(&p, c1, t1, 4, 2, 2, LOADER_SAMPLER_UNIFORM);
    EXPECT(p.rank_of[0] == 0 && p.rank_of[1] == 1 && p.rank_of[2] == 0 && p.rank_of[3] == 1, "uniform");
    balance_plan_make(&p, c1, t1, 4, 2, 2, LOADER_SAMPLER_LPT);
    EXPECT(p.cost[0] == 11 && p.cost[1] == 10, "lpt 10 9 1 1: %g %g", p.cost[0], p.cost[1]);
    /* the cap: costs 5 1 1 1, 2 ranks of 2: LPT gives 5 -> 0, 1 -> 1, 1 -> 1,
     * 1 -> 0 (rank 1 is full): 6 / 2; cap respected */
    const double c2[4] = {5, 1, 1, 1};
    balance_plan_make(&p, c2, t1, 4, 2, 2, LOADER_SAMPLER_LPT);
    EXPECT(p.cost[0] == 6 && p.cost[1] == 2 && p.start[1] == 2, "lpt with the cap: %g %g", p.cost[0], p.cost[1]);
    /* refinement: costs 6 5 4 4 3, 2 ranks of 3: LPT 6 -> 0, 5 -> 1, 4 -> 1
     * (9), 4 -> 0 (10), 3 -> 1 (12): 10 / 12; exchanging rank 1's 5 for
     * rank 0's 4 gives 11 / 11 */
    const double c3[5] = {6, 5, 4, 4, 3};
    const int64_t t3[5] = {6, 5, 4, 4, 3};
    balance_plan_make(&p, c3, t3, 5, 2, 3, LOADER_SAMPLER_LPT);
    EXPECT(p.cost[0] == 11 && p.cost[1] == 11 && p.imbalance_cost == 0, "lpt refined: %g %g", p.cost[0], p.cost[1]);
    /* greedy is by tokens: tokens 1 2, costs 9 1, 2 ranks of 1 */
    const double c4[2] = {9, 1};
    const int64_t t4[2] = {1, 2};
    balance_plan_make(&p, c4, t4, 2, 2, 1, LOADER_SAMPLER_GREEDY);
    EXPECT(p.rank_of[1] == 0 && p.rank_of[0] == 1, "greedy by tokens");
    /* no micro-batches at all: every rank runs empty ones */
    balance_plan_make(&p, c4, t4, 0, 3, 2, LOADER_SAMPLER_LPT);
    EXPECT(p.start[3] == 0 && p.imbalance_cost == 0, "nothing to assign");
    balance_plan_free(&p);
}

/* A config for a step plan of dp ranks with M micro-batches in all. */
static void plan_config(config_t *cfg, int M, int dp, int batch, int64_t capacity, int seq_len)
{
    config_load(cfg, NULL, 0, NULL, 0, 1, 0);
    model_config_resolve(cfg, 0);
    cfg->train_batch_size = batch;
    cfg->grad_accum = M / dp;
    cfg->data.seq_len = seq_len;
    cfg->loader.max_tokens_per_batch = (int)capacity;
    cfg->loader.attention_cost = 1e-3;
    cfg->run.seed = 17;
    cfg->run.steps = 10;
}

/* The heart of the invariance (fabula issue 13): the same run on 1, 2, 4
 * and 8 data-parallel ranks (M = 8 micro-batches in all) cuts every step
 * into the same micro-batches, holding the same samples, defers the same
 * samples, and every rank's share together is exactly those micro-batches,
 * each run once. With budget pressure, so that deferral happens. */
static void test_layout_invariance(void)
{
    enum { N = 600, M = 8, BATCH = 80, STEPS = 10, SEQ = 512 };
    static const int dps[4] = {1, 2, 4, 8};
    int64_t lens[N];
    random_lengths(lens, N, 2, SEQ, 41);
    for (int variant = 0; variant < 12; variant++) {
        const loader_sampler_t smp = strategies[variant % 3];
        const loader_packing_t pck = (variant / 3) % 2 ? LOADER_PACK_SEQUENTIAL : LOADER_PACK_BEST_FIT;
        const int curriculum = variant >= 6;
        config_t cfg[4];
        step_plan_t plan[4][8];
        for (int d = 0; d < 4; d++) {
            plan_config(&cfg[d], M, dps[d], BATCH, 1024, SEQ);
            cfg[d].loader.sampler = smp;
            cfg[d].loader.packing = pck;
            cfg[d].loader.curriculum = curriculum;
            cfg[d].loader.short_threshold = 64;
            cfg[d].loader.long_threshold = 256;
            for (int r = 0; r < dps[d]; r++)
                step_plan_init(&plan[d][r], &cfg[d], lens, N, dps[d], r);
        }
        int same = 1, complete = 1;
        int64_t deferred = 0;
        for (int step = 0; step < STEPS; step++) {
            for (int d = 0; d < 4; d++)
                for (int r = 0; r < dps[d]; r++)
                    step_plan_next(&plan[d][r], step);
            const pack_plan_t *ref = &plan[0][0].pack;
            deferred += plan[0][0].ndeferred;
            for (int d = 0; d < 4; d++) {
                const step_plan_t *p0 = &plan[d][0];
                same &= p0->pack.nbins == ref->nbins && p0->ndeferred == plan[0][0].ndeferred &&
                        memcmp(p0->deferred, plan[0][0].deferred, (size_t)p0->ndeferred * sizeof *p0->deferred) == 0 &&
                        p0->tokens == plan[0][0].tokens && p0->targets == plan[0][0].targets;
                /* what each rank runs, by global index: the reference's micro-batches, each once */
                int *runs = calloc((size_t)M, sizeof *runs);
                for (int r = 0; r < dps[d]; r++)
                    for (int m = 0; m < M / dps[d]; m++) {
                        const int64_t *ids, *ls;
                        int n;
                        int g = step_plan_micro(&plan[d][r], m, &ids, &ls, &n);
                        if (g < 0) {
                            complete &= n == 0;
                            continue;
                        }
                        complete &= g < ref->nbins;
                        if (g >= ref->nbins)
                            continue;
                        runs[g]++;
                        const int64_t rn = ref->start[g + 1] - ref->start[g];
                        same &= n == rn && memcmp(ids, ref->ids + ref->start[g], (size_t)n * sizeof *ids) == 0 &&
                                memcmp(ls, ref->lens + ref->start[g], (size_t)n * sizeof *ls) == 0;
                    }
                for (int g = 0; g < M; g++)
                    complete &= runs[g] == (g < ref->nbins);
                free(runs);
            }
        }
        EXPECT(same, "%s/%s%s: the micro-batches depend on the number of ranks", config_sampler_name(smp),
               config_packing_name(pck), curriculum ? "/curriculum" : "");
        EXPECT(complete, "%s/%s%s: the ranks do not run each micro-batch exactly once", config_sampler_name(smp),
               config_packing_name(pck), curriculum ? "/curriculum" : "");
        EXPECT(variant >= 6 || deferred > 0, "%s/%s: nothing deferred; the test needs pressure",
               config_sampler_name(smp), config_packing_name(pck));
        for (int d = 0; d < 4; d++) {
            for (int r = 0; r < dps[d]; r++)
                step_plan_free(&plan[d][r]);
            config_free(&cfg[d]);
        }
    }
}

/* Every sample of an epoch trained on exactly once: with the batch dividing
 * n and room for every offer, n / batch steps hand out epoch 0. */
static void test_epoch_coverage(void)
{
    enum { N = 240, BATCH = 24 };
    int64_t lens[N];
    random_lengths(lens, N, 16, 256, 7);
    for (int s = 0; s < 3; s++) {
        config_t cfg;
        plan_config(&cfg, 8, 4, BATCH, 4 * 256, 256);
        cfg.loader.sampler = strategies[s];
        step_plan_t p;
        step_plan_init(&p, &cfg, lens, N, 4, 0);
        int used[N] = {0};
        for (int step = 0; step < N / BATCH; step++) {
            step_plan_next(&p, step);
            EXPECT(p.ndeferred == 0, "%s: deferred with room", config_sampler_name(strategies[s]));
            for (int64_t k = 0; k < p.pack.n; k++)
                used[p.pack.ids[k]]++;
        }
        int once = 1;
        for (int i = 0; i < N; i++)
            once &= used[i] == 1;
        EXPECT(once, "%s: an epoch does not use every sample exactly once", config_sampler_name(strategies[s]));
        step_plan_free(&p);
        config_free(&cfg);
    }
}

/* Same input, same output: the step loop twice with one seed, and another
 * seed giving another plan. */
static uint64_t run_digest(uint64_t seed, loader_sampler_t s)
{
    enum { N = 300 };
    int64_t lens[N];
    random_lengths(lens, N, 4, 900, 3);
    config_t cfg;
    plan_config(&cfg, 12, 6, 48, 2000, 900);
    cfg.loader.sampler = s;
    cfg.run.seed = seed;
    step_plan_t p;
    step_plan_init(&p, &cfg, lens, N, 6, 2);
    uint64_t h = 0;
    for (int step = 0; step < 20; step++) {
        step_plan_next(&p, step);
        for (int m = 0; m < p.nmicro; m++) {
            const int64_t *ids, *ls;
            int n;
            h = fb_hash2(h, (uint64_t)(int64_t)step_plan_micro(&p, m, &ids, &ls, &n));
            for (int i = 0; i < n; i++)
                h = fb_hash2(h, (uint64_t)ids[i]);
        }
    }
    step_plan_free(&p);
    config_free(&cfg);
    return h;
}

static void test_determinism(void)
{
    for (int s = 0; s < 3; s++) {
        uint64_t a = run_digest(42, strategies[s]), b = run_digest(42, strategies[s]);
        EXPECT(a == b, "%s: same seed, different plan", config_sampler_name(strategies[s]));
        EXPECT(a != run_digest(43, strategies[s]), "%s: another seed, same plan", config_sampler_name(strategies[s]));
    }
}

/* c against the model's own FLOP count: cost(len) must be the FLOPs of a
 * causal sample of length len (mean attended span len/2) over 6 N_active. */
static void test_attention_cost(void)
{
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    model_config_resolve(&cfg, 0);
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

/* The bundled corpus split by chapters, 4 ranks x 4 micro-batches of 2
 * chapters' room: mean cost imbalance over steps, recomputed from what each
 * rank runs. */
static void test_bundled_corpus_order(void)
{
    const char *path = testlib_srcdir_file("inputs/sample.jsonl", "bundled corpus");
    if (!path)
        return;
    novel_set_t novels;
    novels_load(&novels, path);
    int64_t *lens, cut;
    int64_t n = chapter_lengths_get(&novels, 32768, &lens, &cut);
    novels_free(&novels);
    enum { RANKS = 4, PER_RANK = 4, STEPS = 60 };
    double mean[3] = {0, 0, 0};
    for (int s = 0; s < 3; s++) {
        config_t cfg;
        plan_config(&cfg, RANKS * PER_RANK, RANKS, 32, 2 * 32768, 32768);
        cfg.loader.sampler = strategies[s];
        model_config_resolve(&cfg, 0);
        const double c = model_attention_cost(&cfg.model);
        cfg.loader.attention_cost = c;
        step_plan_t p;
        step_plan_init(&p, &cfg, lens, n, RANKS, 0);
        for (int step = 0; step < STEPS; step++) {
            step_plan_next(&p, step);
            double load[RANKS] = {0};
            for (int r = 0; r < RANKS; r++)
                for (int k = p.bal.start[r]; k < p.bal.start[r + 1]; k++) {
                    const int b = p.bal.bins[k];
                    for (int64_t i = p.pack.start[b]; i < p.pack.start[b + 1]; i++)
                        load[r] += (double)p.pack.lens[i] + c * (double)p.pack.lens[i] * (double)p.pack.lens[i];
                }
            mean[s] += max_over_mean(load, RANKS) / STEPS;
        }
        step_plan_free(&p);
        config_free(&cfg);
    }
    printf("bundled corpus by chapters: %lld samples, %d ranks x %d micro-batches, mean cost imbalance uniform "
           "%.2f%%, greedy %.2f%%, lpt %.2f%%\n",
           (long long)n, RANKS, PER_RANK, 100 * mean[0], 100 * mean[1], 100 * mean[2]);
    EXPECT(n == 33, "the bundled sample has 33 chapters, got %lld", (long long)n);
    EXPECT(mean[2] <= mean[1] && mean[2] <= mean[0], "lpt %g <= greedy %g, uniform %g", mean[2], mean[1], mean[0]);
    free(lens);
}

/* The step plan on simulated ranks carries deferrals: the micro-batches
 * used stay within ranks x accumulation per step, every sample offered is
 * trained on or carried, and the efficiencies are tokens / slots. */
static void test_sim(void)
{
    enum { N = 400, RANKS = 8, PER_RANK = 20, STEPS = 12, ACCUM = 2, CAPACITY = 1024, MAX_LEN = 512 };
    int64_t lens[N];
    random_lengths(lens, N, 2, MAX_LEN, 21);
    config_t cfg;
    plan_config(&cfg, RANKS * ACCUM, RANKS, RANKS * PER_RANK, CAPACITY, MAX_LEN);
    cfg.run.seed = 9;
    step_plan_stats_t st[3][2];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 2; k++) {
            cfg.loader.sampler = strategies[s];
            cfg.loader.packing = (loader_packing_t)k;
            step_plan_stats_t *t = &st[s][k];
            step_plan_stats_run(&cfg, lens, N, RANKS, STEPS, t);
            const char *sn = config_sampler_name(strategies[s]), *pn = config_packing_name((loader_packing_t)k);
            double want = (double)t->tokens / ((double)t->bins * (double)CAPACITY);
            EXPECT(fabs(t->packing - want) < 1e-12, "%s/%s efficiency %g, recount %g", sn, pn, t->packing, want);
            EXPECT(t->bins <= (int64_t)STEPS * RANKS * ACCUM && t->bins_max <= RANKS * ACCUM,
                   "%s/%s: %lld micro-batches", sn, pn, (long long)t->bins);
            /* each step offers RANKS x PER_RANK: trained on, or carried into the next offer */
            EXPECT(t->samples + t->deferred == (int64_t)STEPS * RANKS * PER_RANK,
                   "%s/%s: %lld samples trained + %lld deferred != %d offered", sn, pn, (long long)t->samples,
                   (long long)t->deferred, STEPS * RANKS * PER_RANK);
            EXPECT(t->deferred > 0, "%s/%s: nothing deferred; the test needs pressure", sn, pn);
        }
    /* the packing does not depend on the sampler */
    EXPECT(st[0][1].bins == st[2][1].bins && st[0][1].deferred == st[2][1].deferred, "the sampler changed the packing");
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
    test_rules_against_naive();
    test_worked_examples();
    test_layout_invariance();
    test_epoch_coverage();
    test_determinism();
    test_attention_cost();
    test_chapter_lengths();
    test_bundled_corpus_order();
    test_sim();
    printf("test_balance: %d checks, %d failures (rules vs naive, worked examples, micro-batches independent of "
           "the rank count, epoch coverage, determinism, c vs FLOPs, chapters, bundled corpus order, step plan on "
           "simulated ranks)\n",
           checks, failures);
    return failures ? 1 : 0;
}
