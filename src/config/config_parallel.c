/* "parallel": the process layout (src/parallel/groups.h). Checked here so
 * that `fabula train --dry-run` reports a layout that cannot be built;
 * groups_create checks again when it builds the groups. */
#include "config/config_internal.h"
#include "parallel/groups.h"

#include <string.h>

#define EP "parallel.expert_parallel_size"
#define TP "parallel.tensor_parallel_size"
#define PP "parallel.pipeline_parallel_size"
#define PP_LAYERS "parallel.pipeline_layers"
#define VPP "parallel.virtual_pipeline_stages"

/* parallel.tensor_parallel_size, or DeepSpeed's tensor_parallel.autotp_size
 * (the same number: the ranks one layer's matmuls are split over); *key is
 * the key the value came from, for the messages. */
static int read_tp(cj_ctx_t *c, const char **key)
{
    int tp = cj_int(c, TP, 1);
    *key = TP;
    if (cj_section(c, "tensor_parallel")) {
        const int autotp = cj_int(c, "tensor_parallel.autotp_size", tp);
        if (autotp != tp && tp != 1)
            cj_invalid(c, "tensor_parallel.autotp_size", "the value of " TP " (%d) when both are given", tp);
        else if (autotp != tp)
            *key = "tensor_parallel.autotp_size";
        tp = autotp;
        /* the effective config (and the run's config.json) says what runs */
        if (tp >= 1)
            cj_put(c, TP, json_integer(tp));
    }
    cj_section(c, "parallel");
    return tp;
}

/* The model dimensions the tp ranks split (docs/parallel.md): attention
 * heads, kv heads (split when tp divides them, each replicated on tp / kv
 * ranks when they divide tp), the FFN width and the vocabulary (not padded).
 * The kv heads divide the heads, so a tp that fails the heads fails them
 * too: one message for both. */
static void check_tp_model(cj_ctx_t *c, const char *key, const model_config_t *m, int tp, int world_size)
{
    if (tp < 1) {
        cj_invalid(c, key, "a positive integer");
        return;
    }
    if (world_size % tp != 0)
        cj_invalid(c, key, "a divisor of the world size (%d ranks)", world_size);
    if (tp == 1)
        return;
    if (m->num_attention_heads % tp != 0)
        cj_invalid(c, key, "a divisor of model.num_attention_heads = %d (each rank holds heads / tp heads)",
                   m->num_attention_heads);
    else if (m->num_key_value_heads >= tp && m->num_key_value_heads % tp != 0)
        cj_invalid(c, key, "a divisor of model.num_key_value_heads = %d (with at least as many kv heads as ranks "
                           "each rank holds kv / tp of them)", m->num_key_value_heads);
    else if (m->num_key_value_heads < tp && tp % m->num_key_value_heads != 0)
        cj_invalid(c, key, "a multiple of model.num_key_value_heads = %d (with fewer kv heads than ranks each "
                           "head is replicated on tp / kv ranks)", m->num_key_value_heads);
    if (m->vocab_size % tp != 0)
        cj_invalid(c, key, "a divisor of model.vocab_size = %d (each rank holds vocab / tp rows of the embedding "
                           "and the head; the vocabulary is not padded)", m->vocab_size);
    if (m->intermediate_size % tp != 0)
        cj_invalid(c, key, "a divisor of model.intermediate_size = %d (each rank holds intermediate / tp columns)",
                   m->intermediate_size);
}

int config_read_tensor_parallel(cj_ctx_t *c, config_t *cfg, int world_size)
{
    cj_section(c, "parallel");
    const char *key;
    const int tp = read_tp(c, &key);
    check_tp_model(c, key, &cfg->model, tp, world_size);
    cfg->parallel.tensor_parallel_size = tp >= 1 && world_size % tp == 0 ? tp : 1;
    return cfg->parallel.tensor_parallel_size;
}

/* What tensor-parallel training does not do yet, refused by name. */
void config_check_tensor_parallel(cj_ctx_t *c, const config_t *cfg)
{
    const int tp = cfg->parallel.tensor_parallel_size;
    if (tp <= 1)
        return;
#define NEED(key, cond, what)                                                                                   \
    do {                                                                                                        \
        if (!(cond))                                                                                            \
            cj_invalid(c, key, what " with " TP " = %d (not implemented for tensor parallelism yet)", tp);     \
    } while (0)
    /* the CPU backends sum 16-bit activations in fp32 on the host (model/tp.c);
     * the device path (NCCL sums, 16-bit logits on the GPU) is untested. The
     * cuda backend computes in bf16 even without bf16.enabled, so the
     * backend itself is refused ("auto" is resolved before this check). */
    const int cpu = cfg->run.backend == RUN_BACKEND_CPU || cfg->run.backend == RUN_BACKEND_CPU16;
    if (cfg->bf16_enabled || cfg->fp16.enabled) {
        NEED(cfg->bf16_enabled ? "bf16.enabled" : "fp16.enabled", cpu,
             "false unless run.backend is \"cpu\" or \"cpu16\"");
    } else {
        NEED("run.backend", cpu, "\"cpu\" or \"cpu16\" (the cuda backend computes in 16 bits)");
    }
#undef NEED
    /* the reduce-scatters of sequence parallelism sum fp32 activations
     * only; the widening path of the 16-bit tp sums is not written for them */
    if (cfg->parallel.sequence_parallel && (cfg->bf16_enabled || cfg->fp16.enabled))
        cj_invalid(c, "parallel.sequence_parallel", "false with %s (sequence parallelism is fp32 only)",
                   cfg->bf16_enabled ? "bf16.enabled" : "fp16.enabled");
}

void config_read_parallel(cj_ctx_t *c, config_t *cfg, int world_size)
{
    cj_section(c, "parallel");
    int ep = cj_int(c, EP, 1);
    int experts = cfg->model.num_local_experts;
    if (ep < 1) {
        cj_invalid(c, EP, "a positive integer");
        ep = 1;
    }
    const int tp = cfg->parallel.tensor_parallel_size, pp = cfg->parallel.pipeline_parallel_size;
    char why[3][GROUPS_EP_WHY];
    const int broken = groups_ep_check(world_size, tp, pp, ep, experts, why, 3);
    for (int i = 0; i < broken && i < 3; i++)
        cj_invalid(c, EP, "%s", why[i]);
    cfg->parallel.expert_parallel_size = ep;
    int chunks = cj_int(c, "parallel.moe_a2a_chunks", 1);
    if (chunks < 1 || chunks > 64)
        cj_invalid(c, "parallel.moe_a2a_chunks", "an integer from 1 to 64");
    cfg->parallel.moe_a2a_chunks = chunks;
    /* Sequence parallelism shards the tensor-parallel group's tokens:
     * nothing to shard without tp, so asking for it there is an error
     * rather than a silent no-op. */
    const int sp = cj_bool(c, "parallel.sequence_parallel", 0);
    if (sp && tp == 1)
        cj_invalid(c, "parallel.sequence_parallel", "false with " TP " = 1 (sequence parallelism splits the "
                                                    "tensor-parallel group's tokens; it needs " TP " > 1)");
    cfg->parallel.sequence_parallel = sp && tp > 1;
    cfg->model.sequence_parallel = cfg->parallel.sequence_parallel;
}

/* parallel.pipeline_layers: an array of pp positive integers summing to
 * the layers, read by hand (the getters read fixed-length number arrays). */
static void read_pipeline_layers(cj_ctx_t *c, config_t *cfg, int pp)
{
    if (!cj_strs_has(&c->known, PP_LAYERS))
        cj_strs_push(&c->known, PP_LAYERS);
    json_t *arr = cj_lookup(c, c->root, PP_LAYERS);
    if (!arr || json_is_null(arr) || cj_is_auto(arr))
        return;
    const int L = cfg->model.num_hidden_layers;
    int sum = 0, ok = json_is_array(arr) && json_array_size(arr) == (size_t)pp;
    for (size_t i = 0; ok && i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        ok = json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= L;
        if (ok) {
            cfg->parallel.pipeline_layers[i] = (int)json_integer_value(v);
            sum += cfg->parallel.pipeline_layers[i];
        }
    }
    if (!ok || sum != L) {
        cj_invalid(c, PP_LAYERS, "an array of " PP " = %d positive integers, the layers of each stage, summing to "
                                 "model.num_hidden_layers = %d", pp, L);
        memset(cfg->parallel.pipeline_layers, 0, sizeof cfg->parallel.pipeline_layers);
    }
}

int config_read_pipeline_parallel(cj_ctx_t *c, config_t *cfg, int world_size)
{
    cj_section(c, "parallel");
    const int pp = cj_int(c, PP, 1), tp = cfg->parallel.tensor_parallel_size;
    const int L = cfg->model.num_hidden_layers;
    int ok = 1;
    if (pp < 1 || pp > PARALLEL_MAX_STAGES) {
        cj_invalid(c, PP, "an integer from 1 to %d", PARALLEL_MAX_STAGES);
        ok = 0;
    } else if (world_size % (pp * tp) != 0 && tp == 1) {
        cj_invalid(c, PP, "a divisor of the world size (%d ranks)", world_size);
        ok = 0;
    } else if (world_size % (pp * tp) != 0) {
        cj_invalid(c, PP, "a divisor of the world size (%d ranks) / " TP " = %d", world_size, tp);
        ok = 0;
    } else if (pp > L) {
        cj_invalid(c, PP, "at most model.num_hidden_layers = %d (each stage holds at least one layer)", L);
        ok = 0;
    }
    cfg->parallel.pipeline_parallel_size = ok ? pp : 1;
    memset(cfg->parallel.pipeline_layers, 0, sizeof cfg->parallel.pipeline_layers);
    if (ok && pp > 1)
        read_pipeline_layers(c, cfg, pp);
    else if (cj_given(c, c->root, PP_LAYERS) && ok) {
        cj_strs_push(&c->known, PP_LAYERS);
        cj_invalid(c, PP_LAYERS, "unset without pipeline parallelism (" PP " = 1)");
    }
    /* interleaved 1F1B: v chunks a stage, pp v chunks of the layers in all */
    const int v = cj_int(c, VPP, 1);
    cfg->parallel.virtual_pipeline_stages = 1;
    if (v < 1 || v > PARALLEL_MAX_STAGES)
        cj_invalid(c, VPP, "an integer from 1 to %d", PARALLEL_MAX_STAGES);
    else if (v > 1 && ok && pp == 1)
        cj_invalid(c, VPP, "1 without pipeline parallelism (" PP " = 1): the chunks are of a stage's layers");
    else if (v > 1 && !ok)
        ; /* the pp error says it */
    else if (v > 1 && pp * v > L)
        cj_invalid(c, VPP, "at most model.num_hidden_layers / " PP " = %d / %d (each chunk holds at least one "
                           "layer)", L, pp);
    else if (v > 1 && pp * v > PARALLEL_MAX_STAGES)
        cj_invalid(c, VPP, "at most %d / " PP " = %d (at most %d chunks in all)", PARALLEL_MAX_STAGES,
                   PARALLEL_MAX_STAGES / pp, PARALLEL_MAX_STAGES);
    else if (v > 1 && cfg->parallel.pipeline_layers[0] > 0)
        cj_invalid(c, PP_LAYERS, "unset with " VPP " = %d (the %d chunks are balanced by cost)", v, pp * v);
    else
        cfg->parallel.virtual_pipeline_stages = v;
    return cfg->parallel.pipeline_parallel_size;
}

/* What pipeline-parallel training does not do yet, refused by name. */
void config_check_pipeline_parallel(cj_ctx_t *c, const config_t *cfg)
{
    const int pp = cfg->parallel.pipeline_parallel_size;
    if (pp <= 1)
        return;
    /* the interleaved order deals the micro-batches to the chunks in groups
     * of pp (Megatron's rule) */
    const int v = cfg->parallel.virtual_pipeline_stages;
    if (v > 1 && cfg->grad_accum % pp != 0)
        cj_invalid(c, VPP, "1 when the micro-batches a step (gradient_accumulation_steps = %d) are not a multiple "
                           "of " PP " = %d (the interleaved schedule needs them so)", cfg->grad_accum, pp);
#define NEED(key, cond, what)                                                                                   \
    do {                                                                                                        \
        if (!(cond))                                                                                            \
            cj_invalid(c, key, what " with " PP " = %d (not implemented for pipeline parallelism yet)", pp);   \
    } while (0)
    /* activations go through host buffers; only the CPU backends are tested */
    NEED("run.backend", cfg->run.backend == RUN_BACKEND_CPU || cfg->run.backend == RUN_BACKEND_CPU16,
         "\"cpu\" or \"cpu16\"");
#undef NEED
}
