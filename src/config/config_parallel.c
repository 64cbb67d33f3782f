/* "parallel": the process layout (src/parallel/groups.h). Checked here so
 * that `fabula train --dry-run` reports a layout that cannot be built;
 * groups_create checks again when it builds the groups. */
#include "config/config_internal.h"

#include <string.h>

#define EP "parallel.expert_parallel_size"
#define TP "parallel.tensor_parallel_size"

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
    }
    cj_section(c, "parallel");
    return tp;
}

/* The model dimensions the tp ranks split (docs/parallel.md): attention
 * heads, kv heads (not replicated: kv < tp is refused), the FFN width and
 * the vocabulary (not padded).
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
    else if (m->num_key_value_heads % tp != 0)
        cj_invalid(c, key, "a divisor of model.num_key_value_heads = %d (kv heads are split, not replicated: kv "
                           "heads < tp is refused)", m->num_key_value_heads);
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
    NEED("checkpoint.save_interval", cfg->checkpoint.save_interval == -1, "-1 (no checkpoints)");
    NEED("run.resume", !strcmp(cfg->run.resume, "none"), "\"none\"");
    NEED("model.expert_dropout", cfg->model.expert_dropout == 0.0, "0");
    NEED("model.init_from", !cfg->init_from, "unset (no import)");
    /* the tp sums of 16-bit activations need NCCL; only fp32 is tested */
    NEED("bf16.enabled", !cfg->bf16_enabled, "false");
    NEED("fp16.enabled", !cfg->fp16.enabled, "false");
#undef NEED
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
    if (experts <= 1 && ep > 1)
        cj_invalid(c, EP, "1 for a dense model (model.num_local_experts = %d: no experts to distribute)", experts);
    const int tp = cfg->parallel.tensor_parallel_size;
    if (world_size / tp % ep != 0 && tp == 1)
        cj_invalid(c, EP, "a divisor of the world size (%d ranks)", world_size);
    else if (world_size / tp % ep != 0)
        cj_invalid(c, EP, "a divisor of the world size (%d ranks) / " TP " = %d, i.e. of %d", world_size, tp,
                   world_size / tp);
    if (experts > 1 && experts % ep != 0)
        cj_invalid(c, EP, "a divisor of model.num_local_experts = %d", experts);
    cfg->parallel.expert_parallel_size = ep;
    int chunks = cj_int(c, "parallel.moe_a2a_chunks", 1);
    if (chunks < 1 || chunks > 64)
        cj_invalid(c, "parallel.moe_a2a_chunks", "an integer from 1 to 64");
    cfg->parallel.moe_a2a_chunks = chunks;
    /* Pipeline and sequence parallelism are planned (`fabula plan memory
     * --layout`) but not trained yet (issue 17): a config asking for them is
     * refused by name rather than run as plain data parallelism. */
    if (cj_int(c, "parallel.pipeline_parallel_size", 1) != 1)
        cj_invalid(c, "parallel.pipeline_parallel_size", "1 (pipeline parallelism is not implemented yet; `fabula "
                                                         "plan memory --layout dp=..,pp=..` predicts its memory)");
    if (cj_bool(c, "parallel.sequence_parallel", 0))
        cj_invalid(c, "parallel.sequence_parallel", "false (sequence parallelism is not implemented yet; `fabula "
                                                    "plan memory --layout ..,sp` predicts it)");
}
