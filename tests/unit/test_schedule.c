/* Checks schedule_lr against (a) a step-by-step simulation of DeepSpeed's
 * engine loop (constructor, then optimizer.step() followed by
 * scheduler.step()), written here independently of schedule.c, (b) closed
 * forms at points where the formula simplifies, and (c) shape properties:
 * monotonic warm-up, end values, no jumps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "zero/schedule.h"

static int failures;
static int checks;

static void expect_close(double got, double want, double rtol, const char *what, long step)
{
    checks++;
    double tol = rtol * fmax(fabs(want), 1e-300);
    if (!(fabs(got - want) <= tol)) {
        failures++;
        fprintf(stderr, "FAIL %s at step %ld: got %.17g, want %.17g\n", what, step, got, want);
    }
}

static void expect_true(int cond, const char *what, long step)
{
    checks++;
    if (!cond) {
        failures++;
        fprintf(stderr, "FAIL %s at step %ld\n", what, step);
    }
}

/* ---- a simulated DeepSpeed scheduler object ------------------------------ */

typedef struct {
    sched_config_t cfg;
    double org_lr;          /* the optimizer's lr when the scheduler was built */
    long last;              /* last_batch_iteration */
    double group_lr;        /* param_group['lr'] */
} sim_t;

static double sim_get_lr(const sim_t *m)
{
    const sched_config_t *c = &m->cfg;
    long w = c->warmup_num_steps > 2 ? c->warmup_num_steps : 2;
    long t = m->last;
    if (c->type == SCHED_WARMUP_COSINE_LR) {
        if (t < 0)
            return 0.0;
        double r;
        if (t < w) {
            double g = c->warmup_type == WARMUP_LOG ? log((double)t + 1.0) / log((double)w)
                                                    : (double)t / (double)w;
            r = c->warmup_min_ratio + g * (1.0 - c->warmup_min_ratio);
        } else {
            double x = (double)(t - w + 1) / (double)(c->total_num_steps - w);
            r = c->cos_min_ratio + (1.0 - c->cos_min_ratio) * 0.5 * (1.0 + cos(M_PI * x));
            if (r < 0.0)
                r = 0.0;
        }
        return m->org_lr * r;
    }
    if (t < 0)
        return c->warmup_min_lr;
    double g;
    if (t < w)
        g = c->warmup_type == WARMUP_LOG ? log((double)t + 1.0) / log((double)w) : (double)t / (double)w;
    else if (c->type == SCHED_WARMUP_LR)
        g = 1.0;
    else {
        double span = (double)(c->total_num_steps - w);
        g = (double)(c->total_num_steps - t) / (span < 1.0 ? 1.0 : span);
        if (g < 0.0)
            g = 0.0;
    }
    return c->warmup_min_lr + g * (c->warmup_max_lr - c->warmup_min_lr);
}

static void sim_init(sim_t *m, const sched_config_t *c, double optimizer_lr)
{
    m->cfg = *c;
    m->org_lr = optimizer_lr;
    m->last = -1;
    m->group_lr = sim_get_lr(m);
}

static void sim_step(sim_t *m)
{
    m->last++;
    m->group_lr = sim_get_lr(m);
}

/* Runs `n` updates and compares the lr each one uses. */
static void check_against_engine(const char *name, const sched_config_t *c, const optim_config_t *o, long n)
{
    sim_t m;
    sim_init(&m, c, o->lr);
    for (long k = 0; k < n; k++) {
        expect_close(schedule_lr(c, o, k), m.group_lr, 1e-13, name, k);
        if (k > 0)
            expect_close(schedule_lr_at_iteration(c, o, k - 1), m.group_lr, 1e-13, name, k);
        sim_step(&m);
    }
    printf("  %s: %ld updates match the simulated engine loop\n", name, n);
}

static sched_config_t warmup_cfg(sched_type_t type, warmup_type_t wt, long w, long total)
{
    sched_config_t c = {0};
    c.type = type;
    c.warmup_type = wt;
    c.warmup_num_steps = w;
    c.total_num_steps = total;
    c.warmup_min_lr = 1e-5;
    c.warmup_max_lr = 3e-4;
    c.warmup_min_ratio = 0.05;
    c.cos_min_ratio = 0.1;
    return c;
}

int main(void)
{
    optim_config_t o = {.adam_w_mode = 1, .lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};

    /* ---- (a) against the simulated engine, every type and warm-up kind */
    printf("engine-loop comparison:\n");
    const sched_type_t types[] = {SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR};
    const char *tnames[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};
    const long warmups[] = {0, 1, 2, 7, 50};
    for (int ti = 0; ti < 3; ti++)
        for (int wt = 0; wt < 2; wt++)
            for (int wi = 0; wi < 5; wi++) {
                sched_config_t c = warmup_cfg(types[ti], (warmup_type_t)wt, warmups[wi], 120);
                char name[96];
                snprintf(name, sizeof name, "%s/%s/warmup=%ld", tnames[ti], wt ? "linear" : "log", warmups[wi]);
                check_against_engine(name, &c, &o, 140);
            }

    /* ---- constant */
    sched_config_t cc = {0};
    cc.type = SCHED_CONSTANT;
    for (long k = 0; k < 1000; k += 37)
        expect_close(schedule_lr(&cc, &o, k), o.lr, 0.0, "constant == optimizer lr", k);
    printf("constant: equals optimizer lr\n");

    /* ---- (b) closed forms */
    const long W = 50, T = 400;
    sched_config_t lg = warmup_cfg(SCHED_WARMUP_LR, WARMUP_LOG, W, T);
    /* update k (1..W) uses iteration k-1: gamma = log(k)/log(W) */
    for (long k = 1; k <= W; k++) {
        double want = lg.warmup_min_lr + (lg.warmup_max_lr - lg.warmup_min_lr) * (log((double)k) / log((double)W));
        expect_close(schedule_lr(&lg, &o, k), want, 1e-12, "log warm-up closed form", k);
    }
    expect_close(schedule_lr(&lg, &o, 0), lg.warmup_min_lr, 0.0, "log warm-up first update = min", 0);
    expect_close(schedule_lr(&lg, &o, 1), lg.warmup_min_lr, 0.0, "log warm-up second update = min", 1);
    expect_close(schedule_lr(&lg, &o, W), lg.warmup_max_lr, 1e-15, "log warm-up reaches max at step W", W);

    sched_config_t ln = warmup_cfg(SCHED_WARMUP_LR, WARMUP_LINEAR, W, T);
    for (long k = 1; k <= W + 1; k++) {
        double frac = k <= W ? (double)(k - 1) / (double)W : 1.0;
        double want = ln.warmup_min_lr + frac * (ln.warmup_max_lr - ln.warmup_min_lr);
        expect_close(schedule_lr(&ln, &o, k), want, 1e-12, "linear warm-up closed form", k);
    }

    /* warmup_num_steps 0 and 1 are raised to 2 (max(2, n) in DeepSpeed) */
    for (long w = -1; w <= 1; w++) {
        sched_config_t a = warmup_cfg(SCHED_WARMUP_DECAY_LR, WARMUP_LOG, w, T);
        sched_config_t b = warmup_cfg(SCHED_WARMUP_DECAY_LR, WARMUP_LOG, 2, T);
        for (long k = 0; k < 10; k++)
            expect_close(schedule_lr(&a, &o, k), schedule_lr(&b, &o, k), 0.0, "warmup_num_steps clamp to 2", k);
        expect_true(isfinite(schedule_lr(&a, &o, 1)), "finite lr with tiny warm-up", 1);
    }
    printf("closed forms: log/linear warm-up, warm-up clamp\n");

    /* WarmupDecayLR: linear from max at iteration W down to 0 at iteration T */
    sched_config_t dc = warmup_cfg(SCHED_WARMUP_DECAY_LR, WARMUP_LOG, W, T);
    for (long it = W; it <= T + 20; it++) {
        double frac = it >= T ? 0.0 : (double)(T - it) / (double)(T - W);
        double want = dc.warmup_min_lr + frac * (dc.warmup_max_lr - dc.warmup_min_lr);
        expect_close(schedule_lr(&dc, &o, it + 1), want, 1e-12, "decay closed form", it + 1);
    }
    expect_close(schedule_lr(&dc, &o, T + 1), dc.warmup_min_lr, 1e-15, "decay ends at warmup_min_lr", T + 1);

    /* WarmupCosineLR: o->lr * ratio; end of cosine at iteration T-1 */
    sched_config_t cs = warmup_cfg(SCHED_WARMUP_COSINE_LR, WARMUP_LINEAR, W, T);
    expect_close(schedule_lr(&cs, &o, 0), 0.0, 0.0, "cosine first update lr 0 (DeepSpeed ctor)", 0);
    expect_close(schedule_lr(&cs, &o, 1), o.lr * cs.warmup_min_ratio, 1e-14, "cosine warm-up start", 1);
    expect_close(schedule_lr(&cs, &o, T), o.lr * cs.cos_min_ratio, 1e-12, "cosine end value", T);
    {
        /* real_last_step = (T-W)/2 -> cos(pi/2) = 0 -> ratio halfway */
        long it = W - 1 + (T - W) / 2;
        double want = o.lr * (cs.cos_min_ratio + 0.5 * (1.0 - cs.cos_min_ratio));
        expect_close(schedule_lr(&cs, &o, it + 1), want, 1e-12, "cosine midpoint", it + 1);
    }
    printf("closed forms: decay to 0 at total_num_steps, cosine start/mid/end\n");

    /* ---- (c) shape properties */
    for (int ti = 0; ti < 3; ti++)
        for (int wt = 0; wt < 2; wt++) {
            sched_config_t c = warmup_cfg(types[ti], (warmup_type_t)wt, W, T);
            double prev = schedule_lr(&c, &o, 1);
            double peak = types[ti] == SCHED_WARMUP_COSINE_LR ? o.lr : c.warmup_max_lr;
            for (long k = 2; k <= W; k++) {
                double v = schedule_lr(&c, &o, k);
                expect_true(v >= prev, "warm-up non-decreasing", k);
                expect_true(v <= peak * (1 + 1e-15), "warm-up never exceeds the peak", k);
                prev = v;
            }
            /* log warm-up: gamma = log(W)/log(W) = 1 at iteration W-1 (step W);
             * linear: the warm-up branch ends at (W-1)/W, then gamma 1 (or
             * the first cosine point) at step W+1 */
            if (wt == WARMUP_LOG)
                expect_close(schedule_lr(&c, &o, W), peak, 1e-15, "log warm-up peak at step W", W);
            else if (types[ti] != SCHED_WARMUP_COSINE_LR)
                expect_close(schedule_lr(&c, &o, W + 1), peak, 1e-15, "linear warm-up peak at step W+1", W + 1);
            /* after warm-up: constant (WarmupLR) or non-increasing, small steps */
            prev = schedule_lr(&c, &o, W + 1);
            double max_jump = 0.0;
            for (long k = W + 2; k <= T; k++) {
                double v = schedule_lr(&c, &o, k);
                if (types[ti] == SCHED_WARMUP_LR)
                    expect_close(v, peak, 0.0, "WarmupLR holds max", k);
                else
                    expect_true(v <= prev, "decay non-increasing", k);
                max_jump = fmax(max_jump, fabs(v - prev));
                prev = v;
            }
            /* continuity: no single step moves more than a few times the
             * average slope of a linear ramp over the decay span */
            expect_true(max_jump <= 2.0 * peak / (double)(T - W), "no jumps after warm-up", T);
            for (long k = 0; k < T + 50; k++) {
                double v = schedule_lr(&c, &o, k);
                expect_true(v >= 0.0 && v <= peak * (1 + 1e-15), "0 <= lr <= peak", k);
            }
        }
    printf("properties: monotone warm-up, peak, monotone decay, continuity, non-negative\n");

    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
