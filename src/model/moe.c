/* The MoE FFN: route, plan (capacity), permute, experts, combine; and its
 * backward (docs/model.md, "MoE FFN" and "Losses"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/expert_ffn.h"
#include "model/model_impl.h"
#include "util/error.h"

/* All of layer l's permuted rows, through all E experts. */
static expert_rows_t all_rows(model_t *m, int l)
{
    layer_acts_t *a = &m->acts[l];
    return (expert_rows_t){.rows = a->plan.R, .ne = m->mc.num_local_experts, .off = a->plan.offsets,
                           .x = a->xp, .g = a->g, .u = a->u, .act = a->act, .mask = a->mask,
                           .row_key = model_expert_row_keys(m, l, &a->plan)};
}

/* Layer l's statistics of this forward, from its plan. */
static void moe_count(model_t *m, int l, model_stats_t *stats, double aux, double z)
{
    const moe_plan_t *p = &m->acts[l].plan;
    const int T = m->T, E = m->mc.num_local_experts, K = m->mc.num_experts_per_tok;
    stats->aux += aux;
    stats->z += z;
    m->aux_per_layer[l] = aux;
    m->z_per_layer[l] = z;
    stats->dropped += (long)T * K - p->R;
    m->dropped_per_layer[l] = (long)T * K - p->R;
    for (int e = 0; e < E; e++) {
        m->tokens_per_expert[(size_t)l * E + e] = p->offsets[e + 1] - p->offsets[e];
        m->routed_per_expert[(size_t)l * E + e] = p->routed[e];
    }
}

/* stats NULL: the backward's recomputation of the layer (docs/model.md,
 * "Recomputation"). */
void model_forward_moe(model_t *m, int l, const fb_act *h2, fb_act *x_out, model_stats_t *stats)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    const layer_weights_t *w = &m->w.layers[l];
    layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = mc->hidden_size;
    const int E = mc->num_local_experts, K = mc->num_experts_per_tok;

    o->matmul_f32(a->rlogits, h2, w->router, T, E, D, 0, 1, 0.0f);
    o->router_fwd(a->probs, a->rlse, a->topk_idx, a->topk_w, a->rlogits, T, E, K);

    o->to_host(m->host_topk, a->topk_idx, (size_t)T * K * sizeof(int32_t));
    if (stats)
        model_moe_count_tags(m, l);
    moe_plan_t *p = &a->plan;
    moe_plan_build(p, m->host_topk, T, E, K, moe_capacity(mc->capacity_factor, T, K, E));
    o->to_backend(p->d_row_token, p->row_token, (size_t)p->R * sizeof(int32_t));
    o->to_backend(p->d_token_rows, p->token_rows, (size_t)T * K * sizeof(int32_t));

    /* losses of the router, on the host: both need whole-batch means */
    o->to_host(m->host_probs, a->probs, (size_t)T * E * sizeof(float));
    o->to_host(m->host_rlse, a->rlse, (size_t)T * sizeof(float));
    double aux = 0.0, z = 0.0;
    float *aux_dprob = fb_malloc((size_t)E * sizeof *aux_dprob);
    const double layer_w = m->sc.mb_weight * model_loss_scale(&m->sc) / m->nmoe;
    for (int e = 0; e < E; e++) {
        double P = 0.0;
        for (int t = 0; t < T; t++)
            P += m->host_probs[(size_t)t * E + e];
        P /= T;
        const double f = m->sc.aux_freq ? m->sc.aux_freq[(size_t)l * E + e] : (double)p->routed[e] / T;
        aux += E * f * P;
        aux_dprob[e] = (float)(layer_w * mc->router_aux_loss_coef * E * f / T);
    }
    for (int t = 0; t < T; t++)
        z += (double)m->host_rlse[t] * m->host_rlse[t];
    z /= T;
    o->to_backend(a->aux_dprob, aux_dprob, (size_t)E * sizeof(float));
    free(aux_dprob);
    /* a recomputation (stats NULL) rebuilds the buffers only: the forward
     * counted this micro-batch's statistics */
    if (stats)
        moe_count(m, l, stats, aux, z);

    const int R = p->R;
    if (R > 0)
        o->permute_fwd(a->xp, h2, p->d_row_token, R, D);
    if (m->ep_size > 1) {
        /* a->xp's rows are sorted by global expert, so each ep rank's
         * experts are one contiguous run of them */
        moe_ep_forward(m, l, p->offsets);
    } else if (R > 0) {
        const expert_rows_t rows = all_rows(m, l);
        model_expert_ffn_forward(m, l, &rows, a->eo);
    }
    o->combine_fwd(m->dtmp, a->eo, p->d_token_rows, a->topk_w, T, K, D);
    /* under tp the experts' outputs are partial sums over their split FFN
     * (reduce-scattered into x_out's token shard under sequence parallelism) */
    model_tp_reduce_add(m, x_out, m->dtmp);
}

void model_recompute_moe_act(model_t *m, int l)
{
    const expert_rows_t rows = all_rows(m, l);
    if (m->ep_size == 1 && rows.rows > 0)
        model_expert_ffn_act(m, &rows);
}

/* dy: d(layer output), all T rows; dh2_out: scratch [T, D] (overwritten).
 * Returns d(h2): dh2_out, or under sequence parallelism this rank's shard. */
fb_act *model_backward_moe(model_t *m, int l, const fb_act *dy, fb_act *dh2_out)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    const layer_weights_t *w = &m->w.layers[l];
    const layer_grads_t *dw = &m->dw.layers[l];
    layer_acts_t *a = &m->acts[l];
    moe_plan_t *p = &a->plan;
    const int T = m->T, D = mc->hidden_size;
    const int E = mc->num_local_experts, K = mc->num_experts_per_tok, R = p->R;

    o->combine_bwd(m->dxp, m->dtw, dy, a->eo, p->d_token_rows, a->topk_w, T, K, D);
    model_tp_allreduce_f32(m, m->dtw, (size_t)T * K); /* dot(dy, eo) of partial eo */
    o->zero(dh2_out, ACT_BYTES(m, (size_t)T * D));
    if (m->ep_size > 1) {
        moe_ep_backward(m, l);
        if (R > 0)
            o->permute_bwd(dh2_out, m->dtmp, p->d_token_rows, T, K, D);
    } else if (R > 0) {
        /* m->dxp holds d(expert outputs) [R, D] */
        const expert_rows_t rows = all_rows(m, l);
        model_expert_ffn_backward(m, l, &rows, m->dxp, m->dtmp, m->dg, m->du, m->dact);
        o->permute_bwd(dh2_out, m->dxp, p->d_token_rows, T, K, D);
    }
    /* the experts' share of d(h2) is partial under tp; the router's below is whole on every rank */
    fb_act *dh2 = model_tp_reduce_input_grad(m, dh2_out);
    const float z_scale = (float)(2.0 * m->sc.mb_weight * model_loss_scale(&m->sc) * mc->router_z_loss_coef /
                                  (m->nmoe * (double)T));
    o->router_bwd(m->drl, a->probs, a->rlse, a->topk_idx, a->topk_w, m->dtw, a->aux_dprob, z_scale, T, E, K);
    /* dy is dead: its buffer takes the re-gathered h2 under sequence parallelism */
    o->matmul_f32(dw->router, m->drl, model_sp_gather(m, a->h2), E, D, T, 1, 0, 1.0f);
    /* the router's part of d(h2), for this rank's rows (all without sp) */
    const int Ts = model_sp_rows(m);
    if (Ts > 0)
        o->matmul(dh2, ACT(m, m->drl, (size_t)model_sp_off(m) * E), w->router, Ts, D, E, 0, 0, 1.0f);
    return dh2;
}
