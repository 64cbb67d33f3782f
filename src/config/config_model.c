/* "model": Hugging Face field names (Llama / Mixtral). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static int model_int(cj_ctx_t *c, const char *key)
{
    char path[96];
    snprintf(path, sizeof path, "model.%s", key);
    return cj_int(c, path, (int)cj_default_integer(c, path));
}

static double model_real(cj_ctx_t *c, const char *key)
{
    char path[96];
    snprintf(path, sizeof path, "model.%s", key);
    return cj_real(c, path, cj_default_real(c, path));
}

static int positive(cj_ctx_t *c, const char *key)
{
    int v = model_int(c, key);
    if (v <= 0) {
        char path[96];
        snprintf(path, sizeof path, "model.%s", key);
        cj_invalid(c, path, "a positive integer");
        /* the default goes on in its place, so that the checks below that
         * divide by it can run and report their own errors */
        return (int)cj_default_integer(c, path);
    }
    return v;
}

void config_read_model(cj_ctx_t *c, config_t *cfg)
{
    model_config_t *m = &cfg->model;
    if (cj_section(c, "model"))
        config_read_model_hf(c);
    m->vocab_size = positive(c, "vocab_size");
    m->hidden_size = positive(c, "hidden_size");
    m->intermediate_size = positive(c, "intermediate_size");
    m->num_hidden_layers = positive(c, "num_hidden_layers");
    m->num_attention_heads = positive(c, "num_attention_heads");
    m->num_key_value_heads = positive(c, "num_key_value_heads");
    m->num_local_experts = model_int(c, "num_local_experts");
    m->num_experts_per_tok = model_int(c, "num_experts_per_tok");
    m->moe_layer_freq = positive(c, "moe_layer_freq");
    m->rope_theta = model_real(c, "rope_theta");
    m->rms_norm_eps = model_real(c, "rms_norm_eps");
    m->tie_word_embeddings = cj_bool(c, "model.tie_word_embeddings", cj_default_bool(c, "model.tie_word_embeddings"));
    m->router_aux_loss_coef = model_real(c, "router_aux_loss_coef");
    const char *scope = cj_string(c, "model.router_aux_loss_scope", cj_default_string(c, "model.router_aux_loss_scope"));
    if (!strcmp(scope, "micro_batch"))
        m->router_aux_loss_scope = MODEL_AUX_SCOPE_MICRO_BATCH;
    else if (!strcmp(scope, "global_batch"))
        m->router_aux_loss_scope = MODEL_AUX_SCOPE_GLOBAL_BATCH;
    else
        cj_invalid(c, "model.router_aux_loss_scope", "\"micro_batch\" or \"global_batch\"");
    m->router_z_loss_coef = model_real(c, "router_z_loss_coef");
    m->capacity_factor = model_real(c, "capacity_factor");
    m->expert_dropout = model_real(c, "expert_dropout");
    m->initializer_range = model_real(c, "initializer_range");
    m->max_position_embeddings = positive(c, "max_position_embeddings");
    const char *rc = cj_string(c, "model.recompute", cj_default_string(c, "model.recompute"));
    if (!strcmp(rc, "none"))
        m->recompute = MODEL_RECOMPUTE_NONE;
    else if (!strcmp(rc, "selective"))
        m->recompute = MODEL_RECOMPUTE_SELECTIVE;
    else if (!strcmp(rc, "full"))
        m->recompute = MODEL_RECOMPUTE_FULL;
    else
        cj_invalid(c, "model.recompute", "\"none\", \"selective\" or \"full\"");

    if (m->hidden_size % m->num_attention_heads != 0)
        cj_invalid(c, "model.hidden_size", "a multiple of model.num_attention_heads (%d)", m->num_attention_heads);
    if (m->num_attention_heads % m->num_key_value_heads != 0)
        cj_invalid(c, "model.num_key_value_heads", "a divisor of model.num_attention_heads (%d)",
                   m->num_attention_heads);
    int head_dim = m->hidden_size / m->num_attention_heads;
    if (head_dim % 2 != 0)
        cj_invalid(c, "model.hidden_size",
                   "an even head size hidden_size / num_attention_heads for RoPE (here %d / %d = %d)",
                   m->hidden_size, m->num_attention_heads, head_dim);
    if (m->num_local_experts < 0)
        cj_invalid(c, "model.num_local_experts", "an integer >= 0 (0 or 1: dense model)");
    if (config_model_is_moe(m) && (m->num_experts_per_tok < 1 || m->num_experts_per_tok > m->num_local_experts))
        cj_invalid(c, "model.num_experts_per_tok", "an integer in [1, model.num_local_experts = %d]",
                   m->num_local_experts);
    if (!config_model_is_moe(m) && m->num_experts_per_tok < 0)
        cj_invalid(c, "model.num_experts_per_tok", "an integer >= 0");
    if (!(m->rope_theta > 0))
        cj_invalid(c, "model.rope_theta", "a number > 0");
    if (!(m->rms_norm_eps > 0))
        cj_invalid(c, "model.rms_norm_eps", "a number > 0");
    if (!(m->router_aux_loss_coef >= 0))
        cj_invalid(c, "model.router_aux_loss_coef", "a number >= 0");
    if (!(m->router_z_loss_coef >= 0))
        cj_invalid(c, "model.router_z_loss_coef", "a number >= 0");
    if (!(m->capacity_factor >= 0))
        cj_invalid(c, "model.capacity_factor", "a number >= 0 (0 = dropless)");
    if (!(m->expert_dropout >= 0 && m->expert_dropout < 1))
        cj_invalid(c, "model.expert_dropout", "a number in [0, 1)");
    if (!(m->initializer_range > 0))
        cj_invalid(c, "model.initializer_range", "a number > 0 (std of the initial weights)");
    if (cj_section(c, "model"))
        config_check_model_hf(c, m);
}
