/* The layout search: an exhaustive walk over the few divisors a world has,
 * which stays small even at 10,000 ranks (tp is bounded by a node, pp by
 * the layers), with two prunes of layouts that cannot fit: activations grow
 * with the micro-batch, so once a layout is over device memory at some
 * micro-batch size the larger ones are not evaluated; and what no ZeRO
 * stage or offload moves off the device (the 16-bit weight copy, the
 * activations, the expert buffers) over it at one state rules out every
 * state of that split. */
#include "plan/plan_search.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const int plan_search_micro_samples[] = {1, 2, 4, 8};
const int plan_search_n_micro_samples = (int)(sizeof plan_search_micro_samples / sizeof plan_search_micro_samples[0]);

/* interleaved 1F1B chunks per stage tried with pp > 1: the divisors of a
 * stage's layers up to this */
#define MAX_VPP 8

void plan_search_workload(const config_t *cfg, int tokens, plan_workload_t *w)
{
    double L = cfg->data.seq_len;
    memset(w, 0, sizeof *w);
    w->tokens_per_microbatch = tokens;
    w->sum_len_sq_per_microbatch = (double)tokens / L * L * L;
}

int plan_search_fits(const plan_memory_t *mem, const plan_machine_t *mach, double headroom, double *free_frac)
{
    /* every stage must fit: the fullest device and the fullest host, which
     * under pp may be two stages */
    double dev = (double)mem->stage_device_max, host = (double)mem->stage_host_max;
    double cap = mach->device_memory;
    /* one memory (the CPU machine): what is "offloaded" is still in it; the
     * stage with the most of both (plan_memory's) */
    if (mach->host_link_bandwidth <= 0.0)
        dev = (double)mem->device_total + (double)mem->host_total;
    *free_frac = cap > 0 ? 1.0 - dev / cap : -INFINITY;
    if (dev > cap * (1.0 - headroom))
        return 1;
    if (mach->host_link_bandwidth > 0.0 && host > mach->host_memory / mach->devices_per_node)
        return 2;
    return 0;
}

/* a ranks before b: faster, then more memory left, then (equal) found first */
static int better(const plan_candidate_t *a, const plan_candidate_t *b)
{
    double ta = a->time.tokens_per_s, tb = b->time.tokens_per_s;
    if (fabs(ta - tb) > 1e-9 * fmax(ta, tb))
        return ta > tb;
    return a->headroom > b->headroom + 1e-12;
}

static void keep(plan_candidate_t *best, int *n, int cap, const plan_candidate_t *c)
{
    int i = *n;
    if (i == cap) {
        if (!better(c, &best[cap - 1]))
            return;
        i = cap - 1;
    } else {
        (*n)++;
    }
    while (i > 0 && better(c, &best[i - 1])) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = *c;
}

typedef struct walk {
    const config_t *cfg;
    const plan_machine_t *mach;
    const plan_search_opts_t *o;
    plan_layout_t base;
    plan_candidate_t *best;
    int nbest, cap;
    plan_search_stats_t *st;
} walk_t;

#define NRECOMPUTE 3

/* A rank's bytes that no ZeRO state or offload walked after this one takes
 * off its device: the device part of its 16-bit weights, the activations
 * and the expert-parallel buffers. The walk goes from ZeRO-3 with both
 * offloads (no 16-bit weights on the device, a floor under every state) down
 * to ZeRO-0, and every state of stages 0-2 keeps the 16-bit weights whole
 * on the device (docs/zero.md "Mixed precision"), so over the device memory
 * allowed at the first state walked, or at the first of stages 0-2, so is
 * every state after it (the brute force of tests/e2e/plan_layout.sh and
 * plan_semantics.sh checks the prunes drop nothing that fits). */
static int floor_over(const plan_memory_t *m, const plan_machine_t *mach, double headroom)
{
    const double floor = (double)m->weight_copy + (double)m->activations_peak + (double)m->moe_buffers_capacity;
    return floor > mach->device_memory * (1.0 - headroom);
}

/* One layout with recomputation `lay.recompute`: 0 kept or dropped for
 * host memory or its divisions, 1 over device memory, 2 over it by what no
 * state moves (floor_over). */
static int walk_one(walk_t *w, const plan_layout_t *lay)
{
    char err[256];
    if (plan_layout_check(w->cfg, lay, err, sizeof err) != 0) {
        w->st->invalid++;
        return 0;
    }
    plan_candidate_t c = {.lay = *lay};
    plan_memory(w->cfg, lay, &c.mem);
    int fit = plan_search_fits(&c.mem, w->mach, w->o->headroom, &c.headroom);
    if (fit == 1) {
        w->st->device++;
        return floor_over(&c.mem, w->mach, w->o->headroom) ? 2 : 1;
    }
    if (fit == 2) {
        w->st->host++;
        return 0;
    }
    plan_workload_t wl;
    plan_search_workload(w->cfg, lay->micro_batch_tokens, &wl);
    plan_time(w->cfg, lay, w->mach, &wl, &c.time);
    w->st->feasible++;
    if (w->o->ref && better(&c, w->o->ref))
        w->st->ref_beaten_by++;
    keep(w->best, &w->nbest, w->cap, &c);
    return 0;
}

/* The micro-batch of `samples` windows: 0 when the global batch divides
 * into it over dp (its tokens and accumulation set in *lay), else -1. */
static int micro_of(const walk_t *w, plan_layout_t *lay, int samples)
{
    const long long T = (long long)samples * w->cfg->data.seq_len, per_step = T * lay->dp;
    if (w->o->global_batch_tokens % per_step != 0)
        return -1;
    lay->micro_batch_tokens = (int)T;
    lay->grad_accum = (int)(w->o->global_batch_tokens / per_step);
    /* interleaving needs whole rounds of pp micro-batches (Megatron's rule) */
    return lay->virtual_stages > 1 && lay->grad_accum % lay->pp != 0 ? -1 : 0;
}

/* Every micro-batch size of one layout, smallest first, and at each the
 * recomputations from full to none. Activations grow with the micro-batch
 * and shrink with recomputation, so a layout over device memory ends the
 * lesser recomputations at its size, and with full recomputation every
 * larger size too. Returns walk_one's answer for the first layout
 * evaluated (full recomputation, the smallest micro-batch the batch
 * divides into), -1 when none was. */
static int walk_micro(walk_t *w, plan_layout_t lay)
{
    int first = -1;
    for (int i = 0; i < plan_search_n_micro_samples; i++) {
        w->st->evaluated += NRECOMPUTE;
        if (micro_of(w, &lay, plan_search_micro_samples[i]) != 0) {
            w->st->batch += NRECOMPUTE;
            continue;
        }
        for (int r = PLAN_RECOMPUTE_FULL; r >= PLAN_RECOMPUTE_NONE; r--) {
            lay.recompute = (plan_recompute_t)r;
            const int over = walk_one(w, &lay);
            if (first < 0)
                first = over;
            if (over) {
                /* the lesser recomputations at this size: skipped, not evaluated */
                w->st->pruned += r;
                w->st->evaluated -= r;
                if (r == PLAN_RECOMPUTE_FULL) {
                    w->st->pruned += (long long)NRECOMPUTE * (plan_search_n_micro_samples - 1 - i);
                    return first;
                }
                break;
            }
        }
    }
    return first;
}

/* The layouts of a state walk_micro would have walked, counted as it
 * counts a state over the device at its first: the sizes before it as not
 * dividing the batch, the rest skipped. */
static void skip_micro(walk_t *w, plan_layout_t lay)
{
    int i = 0;
    for (; i < plan_search_n_micro_samples && micro_of(w, &lay, plan_search_micro_samples[i]) != 0; i++) {
        w->st->evaluated += NRECOMPUTE;
        w->st->batch += NRECOMPUTE;
    }
    w->st->pruned += (long long)NRECOMPUTE * (plan_search_n_micro_samples - i);
}

/* ZeRO stage, offload and sequence parallelism of one dp x tp x pp x ep x
 * vpp split. The states are walked from the one that moves the most off
 * the device (ZeRO-3, both offloads) down, so that a floor_over at the
 * first is of the least any state holds: then every state is skipped. And
 * offloading moves bytes from the device to the host, never onto the
 * device: with its own host memory (host_link_bandwidth > 0) a state over
 * the device rules out the same ZeRO stage offloading less (a subset of its
 * offloads), at the same micro-batch and recomputation. */
static void walk_states(walk_t *w, plan_layout_t lay)
{
    int z_lo = 0, z_hi = 3;
    if (w->o->keep_zero)
        z_lo = z_hi = w->base.zero;
    const int host_apart = w->mach->host_link_bandwidth > 0.0;
    for (int sp = 0; sp <= (lay.tp > 1); sp++) {
        int floor = 0, walked = 0, walked_low = 0;
        for (int z = z_hi; z >= z_lo; z--) {
            unsigned over_offloads = 0; /* bit k: the offload set k was over the device */
            for (int off = 3; off >= 0; off--) {
                int opt = off & 1, par = (off >> 1) & 1;
                if (w->o->keep_zero && (opt != w->base.offload_optimizer || par != w->base.offload_param))
                    continue;
                /* DeepSpeed's rules: optimizer offload from stage 1, parameter offload at stage 3 */
                if ((opt && z < 1) || (par && z != 3))
                    continue;
                plan_layout_t l = lay;
                l.zero = z;
                l.offload_optimizer = opt;
                l.offload_param = par;
                l.sequence_parallel = sp;
                int dominated = floor;
                for (int k = off + 1; k < 4 && host_apart && !dominated; k++)
                    dominated = (over_offloads >> k & 1u) && (off & ~k) == 0;
                if (dominated) {
                    skip_micro(w, l);
                    continue;
                }
                const int first = walk_micro(w, l);
                /* floor_over's bytes at the first state walked bound every
                 * state from below; at the first of stages 0-2 (the 16-bit
                 * weights whole, as at every stage below it) they bound
                 * the stages left, all of which are below 3 */
                if (!walked++ || (z <= 2 && !walked_low++))
                    floor |= first == 2;
                if (first >= 1)
                    over_offloads |= 1u << off;
            }
        }
    }
}

int plan_search_evaluate(const config_t *cfg, const plan_machine_t *mach, double headroom, const plan_layout_t *lay,
                         plan_candidate_t *c)
{
    memset(c, 0, sizeof *c);
    c->lay = *lay;
    plan_memory(cfg, lay, &c->mem);
    int fit = plan_search_fits(&c->mem, mach, headroom, &c->headroom);
    plan_workload_t wl;
    plan_search_workload(cfg, lay->micro_batch_tokens, &wl);
    plan_time(cfg, lay, mach, &wl, &c->time);
    return fit;
}

int plan_search(const config_t *cfg, const plan_machine_t *mach, const plan_search_opts_t *o, plan_candidate_t *best,
                plan_search_stats_t *st)
{
    memset(st, 0, sizeof *st);
    walk_t w = {.cfg = cfg, .mach = mach, .o = o, .best = best, .cap = o->top, .st = st};
    plan_layout_from_config(cfg, o->world, &w.base);
    const int N = o->world, layers = cfg->model.num_hidden_layers;
    const int experts = config_model_experts(&cfg->model);
    for (int tp = 1; tp <= mach->devices_per_node; tp++) {
        /* tensor parallelism stays inside a node: its collectives are per layer */
        if (mach->devices_per_node % tp || N % tp)
            continue;
        for (int pp = 1; pp <= layers; pp++) {
            if (layers % pp || (N / tp) % pp)
                continue;
            const int dp = N / (tp * pp);
            for (int ep = 1; ep <= dp && ep <= experts; ep++) {
                if (dp % ep || experts % ep)
                    continue;
                for (int vpp = 1; vpp <= MAX_VPP; vpp++) {
                    if (vpp > 1 && (pp == 1 || (layers / pp) % vpp))
                        continue;
                    plan_layout_t lay = w.base;
                    lay.world = N;
                    lay.dp = dp;
                    lay.tp = tp;
                    lay.pp = pp;
                    lay.ep = ep;
                    lay.virtual_stages = vpp;
                    walk_states(&w, lay);
                }
            }
        }
    }
    return w.nbest;
}

static const char *recompute_name(plan_recompute_t r)
{
    return r == PLAN_RECOMPUTE_FULL ? "full" : r == PLAN_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

static const char *offload_name(const plan_layout_t *l)
{
    if (l->offload_optimizer && l->offload_param)
        return "both";
    return l->offload_optimizer ? "optimizer" : l->offload_param ? "param" : "none";
}

void plan_search_layout_spec(const plan_layout_t *l, char *buf, size_t n)
{
    int k = snprintf(buf, n, "dp=%d,tp=%d,pp=%d,ep=%d,zero=%d", l->dp, l->tp, l->pp, l->ep, l->zero);
    if (k >= 0 && (size_t)k < n && (l->offload_optimizer || l->offload_param))
        k += snprintf(buf + k, n - (size_t)k, ",offload=%s", offload_name(l));
    if (k >= 0 && (size_t)k < n && l->sequence_parallel)
        k += snprintf(buf + k, n - (size_t)k, ",sp");
    if (k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ",recompute=%s,vpp=%d,tokens=%d,accum=%d", recompute_name(l->recompute),
                 l->virtual_stages, l->micro_batch_tokens, l->grad_accum);
}

/* appends "name A vs B" for each layout field that differs */
static size_t diff_fields(const plan_layout_t *a, const plan_layout_t *b, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
#define DIFF_INT(name, f)                                                                                          \
    if (a->f != b->f && k < n)                                                                                     \
        k += (size_t)snprintf(buf + k, n - k, "%s%s %d vs %d", k ? ", " : "", name, a->f, b->f);
    DIFF_INT("dp", dp)
    DIFF_INT("tp", tp)
    DIFF_INT("pp", pp)
    DIFF_INT("ep", ep)
    DIFF_INT("ZeRO", zero)
    DIFF_INT("vpp", virtual_stages)
    DIFF_INT("micro-batch tokens", micro_batch_tokens)
    DIFF_INT("sp", sequence_parallel)
#undef DIFF_INT
    if (strcmp(offload_name(a), offload_name(b)) != 0 && k < n)
        k += (size_t)snprintf(buf + k, n - k, "%soffload %s vs %s", k ? ", " : "", offload_name(a), offload_name(b));
    if (a->recompute != b->recompute && k < n)
        k += (size_t)snprintf(buf + k, n - k, "%srecompute %s vs %s", k ? ", " : "", recompute_name(a->recompute),
                              recompute_name(b->recompute));
    return k;
}

void plan_search_explain(const plan_candidate_t *a, const char *an, const plan_candidate_t *b, const char *bn,
                         char *buf, size_t n)
{
    char fields[512];
    if (!diff_fields(&a->lay, &b->lay, fields, sizeof fields))
        snprintf(fields, sizeof fields, "no layout field");
    const double ta = a->time.step_s, tb = b->time.step_s;
    if (fabs(ta - tb) <= 1e-9 * fmax(ta, tb)) {
        snprintf(buf, n,
                 "%s and %s (%s) predict the same step time (%.4g s); %s ranks first for its memory headroom "
                 "(%.1f%% of device memory free against %.1f%%).",
                 an, bn, fields, ta, an, 100 * a->headroom, 100 * b->headroom);
        return;
    }
    /* what b spends more on, term by term */
    const char *names[] = {"compute", "exposed communication", "pipeline bubble", "data-parallel imbalance",
                           "synchronisation waits"};
    const double d[] = {b->time.compute_s - a->time.compute_s, b->time.comm_exposed_s - a->time.comm_exposed_s,
                        b->time.bubble_s - a->time.bubble_s, b->time.imbalance_s - a->time.imbalance_s,
                        b->time.sync_s - a->time.sync_s};
    int top = 0;
    for (int i = 1; i < 5; i++)
        if (d[i] > d[top])
            top = i;
    char why[160] = "", sync[64] = "";
    /* only machines calibrated with synchronisation waits have the term */
    if (a->time.sync_s > 0 || b->time.sync_s > 0)
        snprintf(sync, sizeof sync, ", synchronisation waits %+.4g s", d[4]);
    if (top == 1) {
        /* the collective whose exposed time differs most */
        int r = 0;
        for (int k = 1; k < PLAN_COMM_N; k++)
            if (b->time.comm[k].exposed_s - a->time.comm[k].exposed_s >
                b->time.comm[r].exposed_s - a->time.comm[r].exposed_s)
                r = k;
        snprintf(why, sizeof why, ", mostly %s: %.4g s against %.4g s", plan_comm_role_name((plan_comm_role_t)r),
                 b->time.comm[r].exposed_s, a->time.comm[r].exposed_s);
    }
    if (top == 0 && b->lay.recompute > a->lay.recompute)
        snprintf(why, sizeof why, ": %s recomputes more, memory bought with time", bn);
    else if (top != 1 &&
             b->lay.offload_optimizer + b->lay.offload_param > a->lay.offload_optimizer + a->lay.offload_param)
        snprintf(why, sizeof why, "; %s offloads more to the host, memory bought with time", bn);
    snprintf(buf, n,
             "%s beats %s by %.2f%% tokens/s (%s): its step is %.4g s shorter, the largest difference %s "
             "(%.4g s less%s); "
             "%s spends compute %+.4g s, exposed communication %+.4g s, bubble %+.4g s, imbalance %+.4g s%s more.",
             an, bn, 100 * (a->time.tokens_per_s / b->time.tokens_per_s - 1), fields, tb - ta, names[top], d[top],
             why, bn, d[0], d[1], d[2], d[3], sync);
}
