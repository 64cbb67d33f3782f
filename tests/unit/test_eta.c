/* src/train/eta: the expected work of each step from the schedule (the
 * sequence-length warm-up, the length curriculum's classes and phases, the
 * micro-batches' capacity) against a brute-force sum over the samples and
 * numbers worked by hand, and the time left from steps whose times follow
 * a known law (issue 46: the ETA ignored that tokens per step grow). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "loader/curriculum.h"
#include "train/eta.h"
#include "testlib.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

/* The mean over `lens` of cost(min(len, cap)), cost = len + c len^2. */
static double brute_mean(const int64_t *lens, int n, int cap, double c, double *tokens)
{
    double cost = 0, tok = 0;
    for (int i = 0; i < n; i++) {
        const double l = (double)(lens[i] < cap ? lens[i] : cap);
        cost += l + c * l * l;
        tok += l;
    }
    *tokens = tok / n;
    return cost / n;
}

static void base_config(config_t *cfg)
{
    config_load(cfg, NULL, 0, NULL, 0, 1, 0);
    cfg->run.steps = 10;
    cfg->train_batch_size = 4;
    cfg->micro_batch = 4;
    cfg->data.seq_len = 256;
    cfg->loader.max_tokens_per_batch = 1 << 20;
    cfg->loader.attention_cost = 0.01;
    cfg->loader.curriculum = 0;
    cfg->loader.warmup = 1;
    cfg->loader.warmup_start = 64;
    cfg->loader.warmup_steps = 6;
}

static void test_warmup(void)
{
    config_t cfg;
    base_config(&cfg);
    const int64_t lens[] = {10, 100, 200, 300};
    eta_t e;
    eta_init(&e, &cfg, lens, 4);
    /* by hand, step 0 (cap 64): 10 + 0.01 * 100 = 11 and 3 x (64 + 40.96) */
    EXPECT(close_to(eta_step_cost(&e, 0), 4 * (11 + 3 * 104.96) / 4), "step 0: %.9g", eta_step_cost(&e, 0));
    double total = 0;
    for (long s = 0; s < 10; s++) {
        double t;
        const double want = 4 * brute_mean(lens, 4, curriculum_max_len(&cfg.loader, 256, s), 0.01, &t);
        EXPECT(close_to(eta_step_cost(&e, s), want), "step %ld: %.9g, want %.9g", s, eta_step_cost(&e, s), want);
        total += want;
    }
    EXPECT(close_to(eta_cost_from(&e, 0), total), "the run's cost %.9g, want %.9g", eta_cost_from(&e, 0), total);
    EXPECT(eta_step_cost(&e, 9) > 4 * eta_step_cost(&e, 0), "the warm-up grows the work: %g -> %g",
           eta_step_cost(&e, 0), eta_step_cost(&e, 9));

    /* steps whose time is 0.5 s + 2 ms per unit of cost, with 0.1 s between
     * steps: the time left is that law over the rest of the schedule */
    EXPECT(eta_seconds(&e, 0, 0.0) == 0.0, "no measured step: no estimate");
    for (long s = 1; s < 4; s++)
        eta_add(&e, eta_step_cost(&e, s), 0.5 + 0.002 * eta_step_cost(&e, s));
    double want = 0;
    for (long s = 4; s < 10; s++)
        want += 0.5 + 0.002 * eta_step_cost(&e, s) + 0.1;
    EXPECT(close_to(eta_seconds(&e, 4, 0.1), want), "fitted: %.9g s left, want %.9g", eta_seconds(&e, 4, 0.1), want);
    /* the old estimate, steps left x time per step so far, is far below */
    const double per_step = (3 * 0.5 + 0.002 * (eta_step_cost(&e, 1) + eta_step_cost(&e, 2) + eta_step_cost(&e, 3))) / 3;
    EXPECT(6 * (per_step + 0.1) < 0.7 * want, "steps x mean step time %.3g against %.3g", 6 * (per_step + 0.1), want);
    EXPECT(eta_seconds(&e, 10, 0.1) == 0.0, "nothing left after the last step");
    eta_free(&e);
    config_free(&cfg);
    printf("warm-up: expected work per step by brute force; the time left by a fitted law\n");
}

static void test_constant_and_capacity(void)
{
    config_t cfg;
    base_config(&cfg);
    cfg.loader.warmup = 0;
    const int64_t lens[] = {100, 100, 100, 100};
    eta_t e;
    eta_init(&e, &cfg, lens, 4);
    EXPECT(e.nseg == 1 && close_to(eta_step_cost(&e, 7), 4 * 200.0), "one segment of 4 x 200: %d, %g", e.nseg,
           eta_step_cost(&e, 7));
    /* equal costs: the time per step, scaled by the work left */
    for (int s = 0; s < 3; s++)
        eta_add(&e, 800.0, 0.3);
    EXPECT(close_to(eta_seconds(&e, 4, 0.0), 6 * 0.3), "constant: %.9g", eta_seconds(&e, 4, 0.0));
    eta_free(&e);
    /* 4 samples of 100 tokens into one micro-batch of 200: half waits, so a
     * step does half the work */
    cfg.loader.max_tokens_per_batch = 200;
    eta_init(&e, &cfg, lens, 4);
    EXPECT(close_to(eta_step_cost(&e, 0), 400.0), "capacity: %g", eta_step_cost(&e, 0));
    eta_free(&e);
    config_free(&cfg);
    printf("constant work, capacity-bound steps\n");
}

static void test_curriculum(void)
{
    config_t cfg;
    base_config(&cfg);
    cfg.loader.warmup = 0;
    cfg.loader.curriculum = 1;
    cfg.loader.short_threshold = 50;
    cfg.loader.long_threshold = 150;
    cfg.loader.nphases = 2;
    cfg.loader.phases[0] = (loader_phase_t){0.5, {0.5, 0.5, 0.0}};
    cfg.loader.phases[1] = (loader_phase_t){1.0, {0.0, 0.25, 0.75}};
    /* short 10, 20; no medium; long 200, 256 */
    const int64_t lens[] = {10, 200, 20, 256};
    eta_t e;
    eta_init(&e, &cfg, lens, 4);
    double t;
    const int64_t shrt[] = {10, 20}, lng[] = {200, 256};
    const double ms = brute_mean(shrt, 2, 256, 0.01, &t), ml = brute_mean(lng, 2, 256, 0.01, &t);
    /* phase 1: medium has no sample and passes its half to short, the
     * nearest class; phase 2: medium's quarter goes to short too */
    EXPECT(close_to(eta_step_cost(&e, 0), 4 * ms), "phase 1: %.9g, want %.9g", eta_step_cost(&e, 0), 4 * ms);
    EXPECT(close_to(eta_step_cost(&e, 5), 4 * (0.25 * ms + 0.75 * ml)), "phase 2: %.9g, want %.9g",
           eta_step_cost(&e, 5), 4 * (0.25 * ms + 0.75 * ml));
    EXPECT(e.nseg == 2, "two phases, two segments: %d", e.nseg);
    eta_free(&e);
    config_free(&cfg);
    printf("curriculum: class mix per phase, an empty class's share to the nearest\n");
}

int main(void)
{
    test_warmup();
    test_constant_and_capacity();
    test_curriculum();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
