/* Per-rank memory of a layout (docs/plan.md, "Memory").
 *
 * The layouts `fabula train` runs today (any tp, pp and interleaved
 * stages, no sequence parallelism; model.recompute) are sized by the very
 * functions train's objects are built from: zero_memory_of for the ZeRO
 * states and workspaces, model_arena_bytes_chunks and model_ep_buffer_bytes
 * for the activations of each pipeline stage's own layers (times the
 * micro-batches its order keeps in flight there, model_stage_inflight), so
 * the figures equal train's start-up "memory bytes" lines. Sequence
 * parallelism (and recomputation with it) is applied to fabula's own
 * buffers by Megatron's rules: predictions of that implementation until
 * issue 17 lands. */
#include <string.h>

#include "model/model_memory.h"
#include "model/params.h"
#include "model/stages.h"
#include "plan/plan.h"
#include "zero/zero_memory.h"

/* Megatron's tensor-parallel split of one parameter: norms and the router
 * are replicated, k/v split by kv heads (one head's copy a rank when there
 * are fewer kv heads than ranks), everything else (q, o, the FFN and the
 * experts along the intermediate dimension, the vocab-parallel embedding and
 * head) by tp. */
static size_t tp_numel(const model_config_t *mc, const param_view_t *v, int tp)
{
    if (tp == 1 || strstr(v->name, "norm") || strstr(v->name, "block_sparse_moe.gate."))
        return v->numel;
    if (strstr(v->name, "k_proj") || strstr(v->name, "v_proj")) {
        const int kv = mc->num_key_value_heads;
        return kv >= tp ? v->numel / (size_t)tp : v->numel / (size_t)kv;
    }
    return v->numel / (size_t)tp;
}

/* The pipeline stage of parameter block b (0 embedding, 1+l layer l, L+1
 * final norm and head), Megatron's: the embedding on the first stage, the
 * head on the last, the layers in pp equal runs. */
static int block_stage(int b, int L, int pp)
{
    if (b == 0)
        return 0;
    if (b == L + 1)
        return pp - 1;
    return (b - 1) / (L / pp);
}

/* The shapes of one stage's reduction groups on one tp rank. */
static void stage_shapes(const config_t *cfg, const param_table_t *t, const plan_layout_t *lay, int stage,
                         zero_group_shape_t shape[PARAM_NGROUPS])
{
    const model_config_t *mc = &cfg->model;
    const int L = mc->num_hidden_layers;
    size_t block[PARAM_NGROUPS];
    int cur = -1;
    memset(shape, 0, PARAM_NGROUPS * sizeof *shape);
    memset(block, 0, sizeof block);
    for (int i = 0; i <= t->n; i++) {
        const param_view_t *v = i < t->n ? &t->views[i] : NULL;
        if (!v || v->block != cur) {
            for (int g = 0; g < PARAM_NGROUPS; g++) {
                if (block[g] > shape[g].max_block)
                    shape[g].max_block = block[g];
                if (cur == 0)
                    shape[g].block0 = block[g];
                block[g] = 0;
            }
            if (!v)
                break;
            cur = v->block;
        }
        int s = block_stage(v->block, L, lay->pp);
        /* tied embeddings with pp > 1: the last stage keeps its own copy for
         * the head and the two are reduced together (Megatron) */
        const int tied_copy = v->block == 0 && mc->tie_word_embeddings && lay->pp > 1 && stage == lay->pp - 1;
        if (s != stage && !tied_copy)
            continue;
        const size_t n = tp_numel(mc, v, lay->tp);
        shape[v->group].numel += n;
        block[v->group] += n;
    }
}

/* One layer's stored activations, bytes, for T tokens (fabula's carve_buffers
 * per-layer buffers with Megatron's divisions): token-sized ones divided by
 * tp under sequence parallelism, attention and FFN internals by tp. `keep`
 * says which survive: 0 all (no recomputation), 1 selective (not the
 * attention core's output and softmax statistics, not the SwiGLU product
 * and dropout mask), 2 full (the layer's input alone). */
static double layer_bytes(const model_config_t *mc, const plan_layout_t *lay, int moe, int keep)
{
    const double T = lay->micro_batch_tokens, ab = lay->act_bytes, tp = lay->tp;
    const double D = mc->hidden_size, I = mc->intermediate_size, H = mc->num_attention_heads;
    const double hd = (double)(mc->hidden_size / mc->num_attention_heads), qd = hd * H;
    const int kv = mc->num_key_value_heads;
    const double kvd = hd * (kv >= lay->tp ? (double)kv / tp : 1.0);
    const double E = moe ? mc->num_local_experts : 1, K = moe ? mc->num_experts_per_tok : 1, R = T * K;
    const double sp = lay->sequence_parallel ? tp : 1.0;
    if (keep == 2)
        return T * D * ab / sp;
    double b = (4 * T * D * ab + 2 * T * 4) / sp;  /* x_in, h1, x_mid, h2; two rstd */
    b += T * qd * ab / tp + 2 * T * kvd * ab;      /* q, k, v (kvd is already per rank) */
    if (keep == 0)
        b += T * qd * ab / tp + T * H * 4 / tp; /* att, lse */
    if (moe) {
        b += (2 * T * E * 4 + T * 4 + 2 * T * K * 4 + 2 * R * D * ab + 2 * R * 4) / sp + E * 4;
        if (lay->ep == 1) {
            b += 2 * R * I * ab / tp;   /* g, u */
            if (keep == 0)
                b += R * I * ab / tp + R * I / tp; /* act, mask */
        }
    } else {
        b += 2 * T * I * ab / tp;
        if (keep == 0)
            b += T * I * ab / tp;
    }
    return b;
}

/* The backward's scratch (one set a rank, carve_buffers' d* buffers). */
static double backward_scratch(const model_config_t *mc, const plan_layout_t *lay)
{
    const double T = lay->micro_batch_tokens, ab = lay->act_bytes, tp = lay->tp;
    const double D = mc->hidden_size, I = mc->intermediate_size, H = mc->num_attention_heads;
    const double hd = (double)(mc->hidden_size / mc->num_attention_heads), qd = hd * H;
    const int kv = mc->num_key_value_heads;
    const double kvd = hd * (kv >= lay->tp ? (double)kv / tp : 1.0);
    const int moe = config_model_is_moe(mc);
    const double E = moe ? mc->num_local_experts : 1, K = moe ? mc->num_experts_per_tok : 1, R = T * K;
    const double sp = lay->sequence_parallel ? tp : 1.0;
    const double widest = qd > D ? qd : D;
    double b = (T * D * ab + T * widest * ab) / sp;          /* dx, dh */
    b += 2 * T * qd * ab / tp + 2 * T * kvd * ab;             /* dq, datt, dk, dv */
    b += 3 * R * I * ab / tp + (2 * R * D * ab + T * E * ab + T * K * 4) / sp; /* dg du dact, dxp dtmp, drl, dtw */
    return b;
}

/* Everything on the device at the peak. */
static size_t device_total(const plan_memory_t *o)
{
    return o->params + o->grads + o->optimizer + o->workspace + o->activations_peak + o->moe_buffers_capacity +
           o->weight_copy;
}

static void fill_states(const config_t *cfg, const plan_layout_t *lay, const zero_group_shape_t shape[PARAM_NGROUPS],
                        plan_memory_t *o)
{
    config_t c = *cfg;
    c.zero.stage = lay->zero;
    c.zero.offload_optimizer = lay->offload_optimizer;
    c.zero.offload_param = lay->offload_param;
    /* the dense weights reduce over dp, the experts over the dp / ep ranks
     * holding the same ones; rank 0 holds the largest shard */
    const int size[PARAM_NGROUPS] = {lay->dp, lay->dp / lay->ep};
    const int rank[PARAM_NGROUPS] = {0, 0};
    zero_memory_t z = zero_memory_of(&c, shape, size, rank, (size_t)lay->act_bytes);
    o->params = z.params - z.host_params;
    o->host_params = z.host_params;
    o->grads = z.grads - z.host_grads;
    o->host_grads = z.host_grads;
    o->optimizer = z.optimizer - z.host_optimizer;
    o->host_optimizer = z.host_optimizer;
    o->host_staging = z.host_staging;
    o->workspace = z.workspace + z.buckets;
    o->workspace_zero = z.workspace;
    o->comm_buckets = z.buckets;
    o->weight_copy = z.weights16 - z.host_weights16;
    o->host_weight_copy = z.host_weights16;
}

int plan_memory_exact(const config_t *cfg, const plan_layout_t *lay)
{
    /* the layouts train's tensor parallelism builds: kv heads split over
     * tp, or (fewer than tp) each replicated on tp / kv ranks */
    const model_config_t *mc = &cfg->model;
    const int tp = lay->tp, kv = mc->num_key_value_heads;
    return lay->pp * lay->virtual_stages <= PARALLEL_MAX_STAGES && mc->num_attention_heads % tp == 0 &&
           (kv % tp == 0 || tp % kv == 0) && mc->intermediate_size % tp == 0 && mc->vocab_size % tp == 0;
}

/* Stage s's exact shapes: the stage's own parameter table on tp rank 0
 * (train's split, model_stage_chunks: the config's pipeline_layers when vpp
 * is 1 and the layout's pp is the config's), the tied embedding's workspace
 * on the first and last stage (zero.c); its chunks' layers into lo, hi, and
 * their number returned. */
static int exact_shapes(const config_t *cfg, const plan_layout_t *lay, int stage,
                        zero_group_shape_t shape[PARAM_NGROUPS], int *lo, int *hi)
{
    const model_config_t *mc = &cfg->model;
    const int pp = lay->pp;
    parallel_config_t pc = cfg->parallel;
    pc.pipeline_parallel_size = pp;
    pc.virtual_pipeline_stages = pp > 1 ? lay->virtual_stages : 1;
    if (pp != cfg->parallel.pipeline_parallel_size)
        memset(pc.pipeline_layers, 0, sizeof pc.pipeline_layers);
    const int nchunks = model_stage_chunks(mc, &pc, stage, lo, hi);
    param_table_t t;
    param_table_build_chunks(&t, mc, lay->ep, 0, lay->tp, 0, nchunks, lo, hi);
    for (int g = 0; g < PARAM_NGROUPS; g++)
        zero_group_shape_of(&t, g, &shape[g]);
    if (pp > 1 && mc->tie_word_embeddings && (stage == 0 || stage == pp - 1)) {
        const param_view_t *v = t.tied_copy >= 0 ? &t.views[t.tied_copy]
                                                 : param_table_find(&t, "model.embed_tokens.weight");
        shape[PARAM_GROUP_DENSE].tied_pp = v->numel;
    }
    param_table_free(&t);
    return nchunks;
}

static void plan_stage(const config_t *cfg, const plan_layout_t *lay, const param_table_t *t, int stage,
                       plan_memory_t *o)
{
    const model_config_t *mc = &cfg->model;
    memset(o, 0, sizeof *o);
    o->stage = stage;
    zero_group_shape_t shape[PARAM_NGROUPS];
    const int plain = plan_memory_exact(cfg, lay);
    int lo[PARALLEL_MAX_STAGES] = {0}, hi[PARALLEL_MAX_STAGES] = {mc->num_hidden_layers}, nchunks = 1;
    if (plain) {
        nchunks = exact_shapes(cfg, lay, stage, shape, lo, hi);
    } else {
        stage_shapes(cfg, t, lay, stage, shape);
    }
    fill_states(cfg, lay, shape, o);
    const int L = mc->num_hidden_layers;
    if (plain) {
        /* the layout's recomputation, which may differ from the config's */
        model_config_t rc = *mc, local;
        rc.recompute = (int)lay->recompute;
        rc.sequence_parallel = lay->sequence_parallel && lay->tp > 1;
        model_config_tp_local(&rc, lay->tp, &local); /* the ep buffers of the layout's recompute too */
        /* 1F1B: stage s holds a model (activations, ep buffers) for each
         * of the min(pp - s, accum) micro-batches it keeps in flight
         * (train/pipeline.h), interleaved for each its order keeps */
        const size_t inflight =
            lay->pp > 1 ? (size_t)model_stage_inflight(lay->pp, nchunks, stage, lay->grad_accum) : 1;
        const size_t ep_one = model_ep_buffer_bytes(&local, (size_t)lay->act_bytes, lay->micro_batch_tokens, lay->ep);
        o->moe_buffers = ep_one * inflight;
        /* the arena and the tensor-parallel token maps: train's
         * activations less the expert-parallel buffers */
        o->activations = model_activation_bytes_chunks(&rc, (size_t)lay->act_bytes, lay->micro_batch_tokens,
                                                       lay->ep, lay->tp, nchunks, lo, hi) -
                         ep_one;
        o->moe_buffers_capacity =
            model_ep_buffer_bytes_at_capacity(&local, (size_t)lay->act_bytes, lay->micro_batch_tokens, lay->ep) *
            inflight;
        o->inflight_microbatches = inflight;
        o->activations_peak = o->activations * inflight;
    } else {
        o->predicted = 1;
        const int per_stage = L / lay->pp, first = stage * per_stage;
        const int keep = lay->recompute == PLAN_RECOMPUTE_FULL ? 2 : lay->recompute == PLAN_RECOMPUTE_SELECTIVE ? 1 : 0;
        const double T = lay->micro_batch_tokens, ab = lay->act_bytes;
        const double sp = lay->sequence_parallel ? lay->tp : 1.0;
        double stored = 4 * T * 4 + 4; /* tokens, positions, targets, cu_seqlens */
        double working = 0;
        for (int l = first; l < first + per_stage; l++) {
            const int moe = model_layer_is_moe(mc, l);
            stored += layer_bytes(mc, lay, moe, keep);
            /* full recomputation rebuilds one layer at a time in the backward */
            if (keep == 2 && layer_bytes(mc, lay, moe, 0) > working)
                working = layer_bytes(mc, lay, moe, 0);
        }
        if (stage == lay->pp - 1) /* final norm, vocab-parallel logits, losses */
            stored += (2 * T * mc->hidden_size * ab + T * 4) / sp + T * mc->vocab_size * ab / lay->tp + T * 4;
        /* 1F1B: stage s holds up to pp - s micro-batches before its first
         * backward (never more than the step has); interleaving over v chunks
         * multiplies the first stage's by 1 + (pp - 1) / (pp v) (Megatron) */
        int inflight = lay->pp - stage;
        if (inflight > lay->grad_accum)
            inflight = lay->grad_accum;
        double factor = inflight;
        if (lay->virtual_stages > 1)
            factor *= 1.0 + (double)(lay->pp - 1) / ((double)lay->pp * lay->virtual_stages);
        o->activations = (size_t)stored;
        o->inflight_microbatches = (size_t)inflight;
        o->activations_peak = (size_t)(stored * factor + working + backward_scratch(mc, lay));
        o->moe_buffers = model_ep_buffer_bytes(mc, (size_t)lay->act_bytes, lay->micro_batch_tokens, lay->ep) /
                         (size_t)lay->pp;
        o->moe_buffers_capacity =
            model_ep_buffer_bytes_at_capacity(mc, (size_t)lay->act_bytes, lay->micro_batch_tokens, lay->ep) /
            (size_t)lay->pp;
    }
    o->device_total = device_total(o);
    o->host_total = o->host_params + o->host_optimizer + o->host_staging + o->host_grads + o->host_weight_copy;
    o->stage_device_max = o->device_total;
    o->stage_host_max = o->host_total;
}

void plan_memory_stage(const config_t *cfg, const plan_layout_t *lay, int stage, plan_memory_t *out)
{
    /* the exact layouts size each stage's own tensors on tp rank 0
     * (exact_shapes); the predictions split the whole model's themselves */
    if (plan_memory_exact(cfg, lay)) {
        plan_stage(cfg, lay, NULL, stage, out);
        return;
    }
    param_table_t t;
    param_table_build_tp(&t, &cfg->model, lay->ep, 0, 1, 0);
    plan_stage(cfg, lay, &t, stage, out);
    param_table_free(&t);
}

void plan_memory(const config_t *cfg, const plan_layout_t *lay, plan_memory_t *out)
{
    plan_memory_stage(cfg, lay, 0, out);
    size_t dev = out->device_total, host = out->host_total;
    for (int s = 1; s < lay->pp; s++) {
        plan_memory_t m;
        plan_memory_stage(cfg, lay, s, &m);
        dev = m.device_total > dev ? m.device_total : dev;
        host = m.host_total > host ? m.host_total : host;
        if (m.device_total + m.host_total > out->device_total + out->host_total)
            *out = m;
    }
    out->stage_device_max = dev;
    out->stage_host_max = host;
}
