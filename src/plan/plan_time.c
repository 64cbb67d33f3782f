/* The step-time model (docs/plan.md, "Time"): compute from the model's
 * FLOPs of the packed micro-batches at the machine's sustained rates, the
 * step's collectives as train issues them (docs/zero.md, "collectives per
 * step"; docs/expert-parallel.md) each at its alpha-beta time, the part of
 * them overlap_comm hides, the 1F1B bubble and the wait for the slowest
 * data-parallel rank. One rank's view: every rank of a data-parallel group
 * does the same work up to the imbalance. */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "model/params.h"
#include "plan/plan.h"
#include "util/error.h"

/* Bytes one parameter moves through AdamW: p, g, m, v read, p, m, v
 * written, fp32 (the calibrated memory_bandwidth counts the same). */
#define ADAMW_BYTES_PER_PARAM 28.0
#define GRAD_BYTES 4.0 /* fabula reduces fp32 gradients and gathers fp32 parameters */

static double ceil_div(double a, double b) { return b > 0 ? ceil(a / b) : 1.0; }

/* Calls of a ZeRO 2/3 per-block collective: a block above the bucket goes
 * in several pieces. */
static double block_calls(const param_table_t *t, int group, double bucket)
{
    double calls = 0;
    for (int b = 0; b < t->nblocks; b++) {
        size_t lo, hi;
        param_table_block_range(t, b, group, &lo, &hi);
        if (hi > lo)
            calls += bucket > 0 ? ceil_div((double)(hi - lo), bucket) : 1.0;
    }
    return calls;
}

static double nonempty_blocks(const param_table_t *t, int group)
{
    double n = 0;
    for (int b = 0; b < t->nblocks; b++) {
        size_t lo, hi;
        param_table_block_range(t, b, group, &lo, &hi);
        n += hi > lo;
    }
    return n;
}

/* Calls of a ZeRO 0/1 reduction with overlap_comm (src/zero/zero.c): the
 * blocks, finishing last to first, grow one pending range that is launched,
 * in bucket-sized pieces, as soon as it reaches the bucket; the rest after
 * the backward. */
static double merged_calls(const param_table_t *t, int group, double bucket)
{
    double calls = 0, pend = 0;
    for (int b = t->nblocks - 1; b >= 0; b--) {
        size_t lo, hi;
        param_table_block_range(t, b, group, &lo, &hi);
        pend += (double)(hi - lo);
        if (bucket > 0 && pend >= bucket) {
            calls += ceil_div(pend, bucket);
            pend = 0;
        }
    }
    if (pend > 0)
        calls += bucket > 0 ? ceil_div(pend, bucket) : 1.0;
    return calls > 0 ? calls : 1.0;
}

/* The expected largest of n independent standard normal draws,
 * E max = integral of x n phi(x) Phi(x)^(n-1) dx (0 for one draw): how far
 * the slowest of n ranks lags their mean, in standard deviations, when each
 * rank's time varies independently. */
static double expected_max_normal(int n)
{
    /* a layout search asks for the same few group sizes again and again */
    static int cached_n[4] = {-1, -1, -1, -1};
    static double cached_e[4];
    static int next;
    if (n <= 1)
        return 0.0;
    for (int i = 0; i < 4; i++)
        if (cached_n[i] == n)
            return cached_e[i];
    const double h = 1e-3, c = 1.0 / sqrt(2.0 * M_PI);
    double e = 0;
    for (double x = -10.0; x <= 10.0; x += h) {
        const double cdf = 0.5 * erfc(-x / sqrt(2.0));
        if (cdf <= 0)
            continue;
        e += x * n * c * exp(-0.5 * x * x + (n - 1) * log(cdf)) * h;
    }
    cached_n[next] = n, cached_e[next] = e;
    next = (next + 1) % 4;
    return e;
}

static void add(plan_comm_t *c, plan_coll_t kind, int n, double calls, double bytes_each, const plan_link_t *l)
{
    if (n <= 1 || calls <= 0 || bytes_each <= 0)
        return;
    c->calls += calls;
    c->bytes += calls * bytes_each;
    c->seconds += calls * plan_coll_time(kind, n, bytes_each, l);
}

double plan_routing_excess(const plan_workload_t *w, int ep)
{
    const int E = w->routing_experts, L = w->routing_layers;
    if (!w->routing_loads || w->routing_steps <= 0 || ep <= 1 || E < ep || E % ep != 0 || L <= 0)
        return 0.0;
    const int per = E / ep;
    double sum = 0;
    long n = 0;
    for (int s = 0; s < w->routing_steps; s++)
        for (int l = 0; l < L; l++) {
            const double *row = w->routing_loads + ((size_t)s * L + l) * E;
            double total = 0, most = 0;
            for (int j = 0; j < ep; j++) {
                double rank = 0;
                for (int e = j * per; e < (j + 1) * per; e++)
                    rank += row[e];
                total += rank;
                most = fmax(most, rank);
            }
            if (total > 0) {
                sum += most / (total / ep) - 1.0;
                n++;
            }
        }
    return n ? sum / n : 0.0;
}

void plan_time(const config_t *cfg, const plan_layout_t *lay, const plan_machine_t *mach, const plan_workload_t *w,
               plan_time_t *out)
{
    memset(out, 0, sizeof *out);
    const model_config_t *mc = &cfg->model;
    const int dp = lay->dp, tp = lay->tp > 0 ? lay->tp : 1, pp = lay->pp > 0 ? lay->pp : 1;
    const int ep = lay->ep > 0 ? lay->ep : 1, edp = dp / ep > 0 ? dp / ep : 1;
    const int v = lay->virtual_stages > 0 ? lay->virtual_stages : 1;
    const double nmicro = w->microbatches_per_rank > 0 ? w->microbatches_per_rank
                          : (lay->grad_accum > 0 ? lay->grad_accum : 1);
    const double T = w->tokens_per_microbatch, S2 = w->sum_len_sq_per_microbatch;
    const double shard = (double)tp * (double)pp; /* model split within a data-parallel replica */

    /* ---- compute ---- */
    /* the linear part less the expert assignments capacity drops */
    const double f_lin = model_flops_packed(mc, T, 0.0) - w->dropped * T * model_expert_flops_per_token(mc);
    const double f_att = (model_flops_packed(mc, T, S2) - model_flops_packed(mc, T, 0.0)) / shard;
    const double f_dense = f_lin / shard;
    const double r_att = mach->attention_flops > 0 ? mach->attention_flops : mach->flops;
    /* the kept assignments' expert matmuls at their own rate: many small
     * GEMMs run at another speed than the model's average, so a dropped
     * assignment saves its FLOPs at that rate (docs/plan.md, "Compute") */
    const double r_exp = mach->expert_flops > 0 ? mach->expert_flops : mach->flops;
    const double f_exp_kept = (1.0 - w->dropped) * T * model_expert_flops_per_token(mc) / shard;
    /* forward 1/3 of the FLOPs, backward 2/3 (model_flops_per_token) */
    const double t_dense = (f_dense - f_exp_kept) / mach->flops + f_exp_kept / r_exp, t_att = f_att / r_att;
    const double fwd_mb = (t_dense + t_att) / 3.0, bwd_mb = 2.0 * (t_dense + t_att) / 3.0;
    double rec_mb = 0;
    if (lay->recompute == PLAN_RECOMPUTE_FULL)
        rec_mb = fwd_mb;
    else if (lay->recompute == PLAN_RECOMPUTE_SELECTIVE)
        rec_mb = t_att / 3.0;
    out->forward_s = nmicro * fwd_mb;
    out->backward_s = nmicro * bwd_mb;
    out->recompute_s = nmicro * rec_mb;
    out->flops = nmicro * (f_att + f_dense);

    param_table_t pt;
    param_table_build_ep(&pt, mc, ep, 0);
    const double psi_d = (double)pt.numel[PARAM_GROUP_DENSE] / shard;
    const double psi_e = (double)pt.numel[PARAM_GROUP_EXPERT] / shard;
    const double owned = lay->zero >= 1 ? psi_d / dp + psi_e / edp : psi_d + psi_e;
    if (mach->memory_bandwidth > 0)
        out->optimizer_s = owned * ADAMW_BYTES_PER_PARAM / mach->memory_bandwidth;
    if (mach->host_link_bandwidth > 0) {
        /* optimizer offload: the owned gradient down, the updated shard up;
         * parameter offload (ZeRO 3): the owned shard up for every block's
         * gather, forward and backward */
        if (lay->offload_optimizer)
            out->offload_s += 2.0 * owned * GRAD_BYTES / mach->host_link_bandwidth;
        if (lay->offload_param && lay->zero == 3)
            out->offload_s += 2.0 * nmicro * owned * GRAD_BYTES / mach->host_link_bandwidth;
    }
    out->overhead_s = mach->step_overhead_s + nmicro * mach->microbatch_overhead_s;

    /* ---- communication, by role ---- */
    plan_comm_t *c = out->comm;
    int inter;
    const plan_link_t *l_dp = plan_group_link(mach, tp, dp, &inter);
    c[PLAN_COMM_DP_GRAD].group = dp, c[PLAN_COMM_DP_GRAD].inter = inter;
    c[PLAN_COMM_DP_PARAM].group = dp, c[PLAN_COMM_DP_PARAM].inter = inter;
    c[PLAN_COMM_ZERO3_GATHER].group = dp, c[PLAN_COMM_ZERO3_GATHER].inter = inter;
    const plan_link_t *l_edp = plan_group_link(mach, tp * ep, edp, &inter);
    c[PLAN_COMM_EDP_GRAD].group = edp, c[PLAN_COMM_EDP_GRAD].inter = inter;
    const plan_link_t *l_ep = plan_group_link(mach, tp, ep, &inter);
    c[PLAN_COMM_EP_ALLTOALL].group = ep, c[PLAN_COMM_EP_ALLTOALL].inter = inter;
    const plan_link_t *l_tp = plan_group_link(mach, 1, tp, &inter);
    c[PLAN_COMM_TP].group = tp, c[PLAN_COMM_TP].inter = inter;
    const plan_link_t *l_pp = plan_group_link(mach, tp * dp, pp, &inter);
    c[PLAN_COMM_PP].group = pp, c[PLAN_COMM_PP].inter = inter;
    const int world = dp * tp * pp;
    const plan_link_t *l_w = plan_group_link(mach, 1, world, &inter);
    c[PLAN_COMM_NORM].group = world, c[PLAN_COMM_NORM].inter = inter;

    const double rb = cfg->zero.reduce_bucket_size, ab = cfg->zero.allgather_bucket_size;
    const int groups_n[2] = {dp, edp};
    const plan_link_t *groups_l[2] = {l_dp, l_edp};
    const plan_comm_role_t roles[2] = {PLAN_COMM_DP_GRAD, PLAN_COMM_EDP_GRAD};
    const double psi[2] = {psi_d, psi_e};
    for (int g = 0; g < 2; g++) {
        plan_comm_t *r = &c[roles[g]];
        if (psi[g] <= 0)
            continue;
        if (lay->zero <= 1) {
            /* once per step, in bucket-sized pieces */
            const double calls = cfg->zero.overlap_comm ? merged_calls(&pt, g, rb) : fmax(1.0, ceil_div(psi[g], rb));
            add(r, lay->zero == 0 ? PLAN_COLL_ALLREDUCE : PLAN_COLL_REDUCE_SCATTER, groups_n[g], calls,
                psi[g] * GRAD_BYTES / calls, groups_l[g]);
        } else {
            /* every micro-batch, every block, split at the bucket */
            const double calls = block_calls(&pt, g, rb);
            add(r, PLAN_COLL_REDUCE_SCATTER, groups_n[g], nmicro * calls, psi[g] * GRAD_BYTES / calls, groups_l[g]);
        }
        if (lay->zero == 1 || lay->zero == 2) {
            const double calls = ab > 0 ? fmax(1.0, ceil_div(psi[g], ab)) : 1.0;
            add(&c[PLAN_COMM_DP_PARAM], PLAN_COLL_ALLGATHER, groups_n[g], calls, psi[g] * GRAD_BYTES / calls,
                groups_l[g]);
        } else if (lay->zero == 3) {
            /* forward and backward gather every block holding parameters
             * of the group (src/zero/zero.c skips an empty one), a stage's
             * share of them with pp */
            const double calls = nonempty_blocks(&pt, g) / pp;
            add(&c[PLAN_COMM_ZERO3_GATHER], PLAN_COLL_ALLGATHER, groups_n[g], 2.0 * nmicro * calls,
                psi[g] * GRAD_BYTES / calls, groups_l[g]);
        }
    }
    add(&c[PLAN_COMM_NORM], PLAN_COLL_ALLREDUCE, world, 1.0, 8.0, l_w);

    /* expert parallelism: per MoE layer and micro-batch one all-to-all of
     * counts, then dispatch and return forward, and their mirrors
     * backward, each in moe_a2a_chunks pieces */
    int moe_layers = 0;
    for (int i = 0; i < mc->num_hidden_layers; i++)
        moe_layers += model_layer_is_moe(mc, i);
    const double moe_local = (double)moe_layers / pp;
    const int chunks = cfg->parallel.moe_a2a_chunks > 0 ? cfg->parallel.moe_a2a_chunks : 1;
    /* a rank drops before its dispatch: only kept rows travel */
    const double rows = T / tp * mc->num_experts_per_tok * (1.0 - w->dropped);
    const double row_bytes = (double)mc->hidden_size * lay->act_bytes;
    if (ep > 1 && moe_local > 0) {
        add(&c[PLAN_COMM_EP_ALLTOALL], PLAN_COLL_ALLTOALL, ep, nmicro * moe_local, 8.0 * ep, l_ep);
        add(&c[PLAN_COMM_EP_ALLTOALL], PLAN_COLL_ALLTOALL, ep, nmicro * moe_local * 4.0 * chunks,
            rows * row_bytes / chunks, l_ep);
    }
    /* tensor parallelism: two all-reduces of the layer's activations
     * forward and two backward, as Megatron; fabula's implementation
     * (docs/parallel.md, "Tensor parallelism") also sums the
     * vocabulary-parallel embedding forward and the head's input gradient,
     * the cross-entropy's row maxima (T doubles) and exp sums and target
     * logits (2T doubles), and in each MoE layer the top-k weights' gradient
     * (T K floats); full recomputation repeats the layers' forward sums.
     * Sequence parallelism (docs/parallel.md, "Sequence parallelism")
     * issues, per layer, forward two all-gathers (the normed inputs) and
     * two reduce-scatters (the block outputs), backward four all-gathers
     * (d(output) and the kept normed shard, for each block) and two
     * reduce-scatters (the input gradients), and one sum of D floats per
     * RMSNorm weight; the embedding's sum is a reduce-scatter and its
     * gradient an all-gather, the head's input an all-gather and its
     * gradient a reduce-scatter. The bytes of each are the full [T, D]
     * buffer (the alpha-beta formulas take the gathered size). With pp the
     * stage holding the head is counted. */
    const double layers_local = (double)mc->num_hidden_layers / pp;
    const double act = T * (double)mc->hidden_size * lay->act_bytes;
    /* cpu16's tp sums widen the 16-bit partials to fp32 on the host (MPI
     * cannot add 16-bit floats: src/model/tp.c); a device would sum them in
     * 16 bits with NCCL */
    const double tp_act = cfg->run.backend == RUN_BACKEND_CPU16 ? T * (double)mc->hidden_size * 4.0 : act;
    if (tp > 1) {
        const double full = lay->recompute == PLAN_RECOMPUTE_FULL ? 1.0 : 0.0;
        const double ends = pp > 1 ? 1.0 : 2.0; /* the head's gradient; the embedding on stage 0 */
        if (lay->sequence_parallel) {
            add(&c[PLAN_COMM_TP], PLAN_COLL_REDUCE_SCATTER, tp, nmicro * (layers_local * (4.0 + 2.0 * full) + ends),
                tp_act, l_tp);
            add(&c[PLAN_COMM_TP], PLAN_COLL_ALLGATHER, tp, nmicro * (layers_local * (6.0 + 2.0 * full) + ends),
                tp_act, l_tp);
            add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp, nmicro * (2.0 * layers_local + 1.0),
                4.0 * mc->hidden_size, l_tp);
        } else {
            add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp, nmicro * (layers_local * (4.0 + 2.0 * full) + ends),
                tp_act, l_tp);
        }
        add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp, nmicro, 8.0 * T, l_tp);
        add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp, nmicro, 16.0 * T, l_tp);
        if (moe_layers > 0)
            add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp, nmicro * moe_local, 4.0 * T * mc->num_experts_per_tok,
                l_tp);
    }
    /* fewer kv heads than tp (docs/parallel.md, "Replicated kv heads"):
     * per layer and micro-batch d(k) and d(v) [T, head_dim] summed over
     * the tp / kv ranks sharing a head (fp32 on cpu16, widened as above) */
    const int kv = mc->num_key_value_heads;
    if (tp > kv && tp % kv == 0) {
        const double hd = (double)(mc->hidden_size / mc->num_attention_heads);
        const double kv_act = T * hd * (cfg->run.backend == RUN_BACKEND_CPU16 ? 4.0 : lay->act_bytes);
        int kv_inter; /* the sharers are consecutive ranks: maybe inside a node where tp is not */
        const plan_link_t *l_kv = plan_group_link(mach, 1, tp / kv, &kv_inter);
        add(&c[PLAN_COMM_TP], PLAN_COLL_ALLREDUCE, tp / kv, nmicro * 2.0 * layers_local, kv_act, l_kv);
    }
    /* pipeline: each micro-batch's activations forward and their gradient
     * backward cross every stage boundary, v times with interleaving */
    if (pp > 1)
        add(&c[PLAN_COMM_PP], PLAN_COLL_P2P, 2, nmicro * 2.0 * v, act / (lay->sequence_parallel ? tp : 1), l_pp);

    /* ---- overlap ---- */
    const int ov = cfg->zero.overlap_comm;
    for (int r = 0; r < PLAN_COMM_N; r++)
        c[r].exposed_s = c[r].seconds;
    if (ov) {
        for (int g = 0; g < 2; g++) {
            plan_comm_t *r = &c[roles[g]];
            if (r->calls <= 0)
                continue;
            /* stage 0/1: under the last micro-batch's backward; 2/3: under
             * each micro-batch's backward; the last bucket is never hidden */
            const double window = lay->zero <= 1 ? bwd_mb : nmicro * bwd_mb;
            const double last = r->seconds / r->calls * (lay->zero <= 1 ? 1.0 : nmicro);
            r->exposed_s = fmax(r->seconds - window, fmin(last, r->seconds));
        }
        plan_comm_t *r = &c[PLAN_COMM_ZERO3_GATHER];
        if (r->calls > 0) {
            /* prefetch: the next block's gather under this block's work;
             * the first block of each pass waits */
            const double first = r->seconds / r->calls * 2.0 * nmicro;
            r->exposed_s = fmax(r->seconds - nmicro * (fwd_mb + bwd_mb), fmin(first, r->seconds));
        }
    }
    if (chunks > 1 && c[PLAN_COMM_EP_ALLTOALL].calls > 0) {
        /* a chunk's exchange overlaps another chunk's expert compute: all
         * but one chunk's worth of each exchange can hide under it */
        const double f_exp = 6.0 * 3.0 * (double)mc->hidden_size * mc->intermediate_size * rows * moe_local;
        const double t_exp = nmicro * f_exp / r_exp;
        plan_comm_t *r = &c[PLAN_COMM_EP_ALLTOALL];
        r->exposed_s = fmax(r->seconds - t_exp * (chunks - 1) / chunks, r->seconds / chunks);
    }
    /* what the model hides, the library hides only as far as it
     * progresses while the rank computes (machine "overlap") */
    for (int r = 0; r < PLAN_COMM_N; r++)
        c[r].exposed_s = c[r].seconds - mach->overlap * (c[r].seconds - c[r].exposed_s);
    for (int r = 0; r < PLAN_COMM_N; r++) {
        out->comm_s += c[r].seconds;
        out->comm_exposed_s += c[r].exposed_s;
    }

    /* ---- pipeline bubble, imbalance, the step ---- */
    const double mb_work = fwd_mb + bwd_mb + rec_mb;
    if (pp > 1) {
        out->bubble_fraction = (pp - 1.0) / (v * nmicro + pp - 1.0);
        /* Not shortened on an oversubscribed machine (ranks_per_cpu > 1):
         * a waiting stage's MPI wait yields, and a yielding rank keeps its
         * share of the CPU, so the stage it waits for runs no faster
         * (docs/plan.md, "Bubble and imbalance"). */
        out->bubble_s = (pp - 1.0) / v * mb_work;
    }
    /* Synchronisation waits (docs/plan.md): a collective waits for the
     * slowest rank of the group, and a machine whose speed varies from
     * rank to rank makes one rank the slowest at each meeting. calibrate
     * measures the share of a micro-batch's work the slowest rank lags by
     * when the ranks meet once per micro-batch and when they meet at every
     * block (ZeRO 2/3 per-block reductions and gathers, tensor and expert
     * parallelism); the share grows with the ranks as the expected maximum
     * of that many normal draws. A pipeline alone waits on its neighbour
     * stage, which the bubble counts. */
    if (mach->sync_ranks >= 2 && world > 1) {
        const int per_block = (lay->zero >= 2 && dp > 1) || tp > 1 || ep > 1;
        const double share = per_block ? mach->sync_wait_block : dp > 1 ? mach->sync_wait_pass : 0.0;
        out->sync_s = share * expected_max_normal(world) / expected_max_normal(mach->sync_ranks) * nmicro * mb_work;
    }
    /* Routing imbalance (docs/plan.md): each MoE layer's return exchange,
     * forward and backward, waits for the ep rank whose experts the router
     * loaded most; the compute above is the ranks' mean. */
    if (ep > 1 && moe_local > 0) {
        out->routing_excess = plan_routing_excess(w, ep);
        const double t_exp_layer = 6.0 * 3.0 * (double)mc->hidden_size * mc->intermediate_size * rows / r_exp;
        const double rec = lay->recompute == PLAN_RECOMPUTE_FULL ? 1.0 / 3.0 : 0.0;
        out->routing_s = out->routing_excess * nmicro * moe_local * t_exp_layer * (1.0 + rec);
    }
    /* Routing spread (docs/plan.md): data-parallel ranks route different
     * micro-batches, and capacity keeps a different share of each one's
     * assignments at each MoE layer, so their expert work differs where
     * they meet. The share's spread is measured at the pilot's micro-batch
     * tokens and scaled as the deviation of a mean, 1/sqrt(tokens). A
     * layer's forward and backward keep the same rows: one deviation each.
     * Ranks that meet once a step (ZeRO 0/1) wait for the sum of their
     * deviations over the step's layers and micro-batches; ZeRO 2 meets
     * at every block of the backward, the forward's sum met at the first;
     * ZeRO 3 at every block both ways. Expert parallelism meets at every
     * MoE layer and has its own term above. */
    if (w->routing_spread > 0 && dp > 1 && ep == 1 && moe_local > 0) {
        const double scale = w->routing_spread_tokens > 0 && T > 0 ? sqrt(w->routing_spread_tokens / T) : 1.0;
        out->spread = w->routing_spread * scale;
        const double t_exp = 6.0 * 3.0 * (double)mc->hidden_size * mc->intermediate_size * rows / r_exp;
        const double t_f = t_exp / 3.0;
        const double t_b = 2.0 * t_exp / 3.0 + (lay->recompute == PLAN_RECOMPUTE_FULL ? t_f : 0.0);
        const double g = expected_max_normal(dp) * out->spread;
        if (lay->zero >= 3)
            out->spread_s = g * nmicro * moe_local * (t_f + t_b);
        else if (lay->zero == 2)
            out->spread_s = g * nmicro * (sqrt(moe_local) * t_f + moe_local * t_b);
        else
            out->spread_s = g * sqrt(nmicro * moe_local) * (t_f + t_b);
    }
    out->compute_s =
        out->forward_s + out->backward_s + out->recompute_s + out->optimizer_s + out->offload_s + out->overhead_s;
    out->imbalance_s = dp > 1 ? w->imbalance * nmicro * mb_work : 0.0;
    out->step_s =
        out->compute_s + out->comm_exposed_s + out->bubble_s + out->imbalance_s + out->sync_s + out->routing_s +
        out->spread_s;
    out->tokens = T * nmicro * dp;
    out->tokens_per_s = out->step_s > 0 ? out->tokens / out->step_s : 0.0;
    param_table_free(&pt);
}
