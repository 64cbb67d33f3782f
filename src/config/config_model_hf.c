/* The keys of a Hugging Face config.json (LlamaConfig, MixtralConfig as
 * transformers saves them) in "model", beyond the sizes fabula reads by the
 * same names (config_model.c). Each is one of:
 *  - mapped: model_type picks the defaults that make fabula compute what
 *    transformers computes for that architecture (a Llama is dense; a Mixtral
 *    routes without capacity and without z-loss, and adds the load-balancing
 *    loss only with output_router_logits); rope_parameters.rope_theta is
 *    model.rope_theta;
 *  - checked: a key that changes the function (activation, biases, attention
 *    dropout, head size, RoPE scaling, sliding window, router jitter) is
 *    accepted at the value fabula computes and refused (exit 2, named) at
 *    any other;
 *  - bookkeeping: accepted without effect (the no-effect note).
 * The table in docs/model.md lists them one by one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static const cj_inert_t hf_inert[] = {
    {"architectures", CJ_ANY},        /* class names for loading weights */
    {"transformers_version", CJ_STRING},
    {"torch_dtype", CJ_ANY},          /* the weights' storage type; fabula's is run.backend's */
    {"dtype", CJ_ANY},
    {"_name_or_path", CJ_STRING},
    {"use_cache", CJ_BOOL},           /* generation's KV cache */
    {"bos_token_id", CJ_ANY},         /* the tokenizer's business (data.tokenizer) */
    {"eos_token_id", CJ_ANY},
    {"pad_token_id", CJ_ANY},
    {"pretraining_tp", CJ_NUMBER},    /* splits the matmuls into slices: the same function */
    {"return_dict", CJ_BOOL},
    {"output_attentions", CJ_BOOL},
    {"output_hidden_states", CJ_BOOL},
};

/* What an architecture close to these has that fabula's ops lack, so that
 * the refusal says which feature it is. */
static const char *unsupported_why(const char *type)
{
    static const struct {
        const char *type, *why;
    } known[] = {
        {"qwen2", ": a qwen2 model has biases on q_proj/k_proj/v_proj, which fabula's attention lacks"},
        {"qwen2_moe", ": a qwen2_moe model has q/k/v biases and shared experts beside the routed ones, which "
                      "fabula lacks"},
        {"qwen3", ": a qwen3 model normalises queries and keys (qk-norm), which fabula lacks"},
        {"olmoe", ": an olmoe model normalises queries and keys (qk-norm), which fabula lacks"},
        {"qwen3_moe", ": a qwen3_moe model normalises queries and keys (qk-norm), which fabula's attention "
                      "lacks"},
        {"deepseek_v2", ": a deepseek_v2 model has multi-head latent attention (low-rank keys and values) and "
                        "shared experts beside the routed ones, which fabula lacks"},
        {"deepseek_v3", ": a deepseek_v3 model has multi-head latent attention (low-rank keys and values) and "
                        "shared experts beside the routed ones, which fabula lacks"},
        {"gemma", ": a gemma model scales its embeddings by sqrt(hidden_size) and has a GeGLU MLP, not fabula's "
                  "SwiGLU"},
        {"gemma2", ": a gemma2 model scales its embeddings, caps its logits and has a GeGLU MLP, which fabula "
                   "lacks"},
        {"granitemoe", ": a granitemoe model scales its embeddings, residuals, attention and logits by "
                       "multipliers, which fabula lacks"},
        {"gpt_neox", ": a gpt_neox model has LayerNorm with biases, parallel attention and MLP and a GELU MLP, "
                     "not fabula's RMSNorm and SwiGLU"},
        {"gpt2", ": a gpt2 model has learned positions, LayerNorm with biases and a GELU MLP, not fabula's "
                 "RoPE, RMSNorm and SwiGLU"},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(type, known[i].type))
            return known[i].why;
    return ": fabula computes Llama's and Mixtral's decoder only (RoPE, RMSNorm, SwiGLU experts, no biases); "
           "the model section's other keys are not read";
}

/* The user's value at model.KEY (NULL when absent or null), recorded as known. */
static json_t *hf_key(cj_ctx_t *c, const char *key, char *path, size_t n)
{
    snprintf(path, n, "model.%s", key);
    if (!cj_strs_has(&c->known, path))
        cj_strs_push(&c->known, path);
    json_t *v = cj_lookup(c, c->root, path);
    return json_is_null(v) ? NULL : v;
}

static int user_gave(cj_ctx_t *c, const char *key)
{
    char path[96];
    snprintf(path, sizeof path, "model.%s", key);
    json_t *v = cj_lookup(NULL, c->user, path);
    return v && !json_is_null(v);
}

/* Sets model.KEY to `value` unless the user gave it. */
static void default_to(cj_ctx_t *c, const char *key, json_t *value)
{
    char path[96];
    snprintf(path, sizeof path, "model.%s", key);
    if (user_gave(c, key))
        json_decref(value);
    else
        cj_put(c, path, value);
}

/* rope_parameters (transformers 5) or rope_scaling (4.x): only the plain
 * RoPE fabula computes, whose base goes to model.rope_theta. */
static void read_rope(cj_ctx_t *c, const char *key)
{
    char path[96], sub[128];
    json_t *v = hf_key(c, key, path, sizeof path);
    if (!v)
        return;
    if (!json_is_object(v)) {
        cj_invalid(c, path, "an object or null");
        return;
    }
    json_t *type = json_object_get(v, "rope_type");
    const char *tkey = "rope_type";
    if (!type) {
        type = json_object_get(v, "type"); /* transformers 4's spelling */
        tkey = "type";
    }
    snprintf(sub, sizeof sub, "%s.%s", path, tkey);
    cj_strs_push(&c->known, sub);
    if (type && !(json_is_string(type) && strcmp(json_string_value(type), "default") == 0))
        cj_invalid(c, sub, "\"default\" (plain RoPE; fabula implements no RoPE scaling: %s must be null or of "
                           "type \"default\")", path);
    json_t *theta = json_object_get(v, "rope_theta");
    if (!theta)
        return;
    snprintf(sub, sizeof sub, "%s.rope_theta", path);
    cj_strs_push(&c->known, sub);
    if (!json_is_number(theta)) {
        cj_invalid(c, sub, "a number (the RoPE base)");
        return;
    }
    json_t *own = cj_lookup(NULL, c->user, "model.rope_theta");
    if (json_is_number(own) && json_number_value(own) != json_number_value(theta))
        cj_invalid(c, sub, "model.rope_theta's value (%.17g) when both are given", json_number_value(own));
    else
        cj_put(c, "model.rope_theta", json_real(json_number_value(theta)));
}

void config_read_model_hf(cj_ctx_t *c)
{
    char path[96];
    json_t *type = hf_key(c, "model_type", path, sizeof path);
    if (type) {
        const char *t = json_is_string(type) ? json_string_value(type) : "";
        if (strcmp(t, "llama") == 0) {
            /* a LlamaConfig has no experts: dense unless the user adds some */
            default_to(c, "num_local_experts", json_integer(0));
        } else if (strcmp(t, "mixtral") == 0) {
            /* transformers' Mixtral drops no token and has no z-loss */
            default_to(c, "capacity_factor", json_real(0.0));
            default_to(c, "router_z_loss_coef", json_real(0.0));
        } else {
            cj_invalid(c, path, "\"llama\" or \"mixtral\" (the transformers architectures fabula computes)%s",
                       unsupported_why(t));
            /* the refusal is the message: no unknown-key warning or note
             * about a section that will not be read */
            c->model_refused = 1;
        }
    }
    /* transformers' Mixtral adds router_aux_loss_coef * aux to its loss only
     * with output_router_logits true (its default is false) */
    int mixtral = json_is_string(type) && strcmp(json_string_value(type), "mixtral") == 0;
    json_t *out = hf_key(c, "output_router_logits", path, sizeof path);
    if (out && !json_is_boolean(out))
        cj_invalid(c, path, "true or false");
    if (out ? json_is_false(out) : mixtral) {
        json_t *coef = cj_lookup(NULL, c->user, "model.router_aux_loss_coef");
        if (json_is_number(coef) && json_number_value(coef) != 0.0 && !c->model_refused)
            cj_note(c, "model.output_router_logits is false: no load-balancing loss, as in transformers "
                       "(model.router_aux_loss_coef is not used; set output_router_logits true to add it)");
        cj_put(c, "model.router_aux_loss_coef", json_real(0.0));
    }
    read_rope(c, "rope_parameters");
    read_rope(c, "rope_scaling");
    cj_accept_inert(c, "model", hf_inert, sizeof hf_inert / sizeof *hf_inert);
}

void config_check_model_hf(cj_ctx_t *c, const model_config_t *m)
{
    char path[96];
    json_t *v = hf_key(c, "hidden_act", path, sizeof path);
    /* transformers' ACT2FN: "silu" and "swish" are both x * sigmoid(x) */
    if (v && !(json_is_string(v) && (!strcmp(json_string_value(v), "silu") || !strcmp(json_string_value(v), "swish"))))
        cj_invalid(c, path, "\"silu\" (fabula's FFN and experts are SwiGLU: down(silu(gate(h)) * up(h)))");
    v = hf_key(c, "attention_dropout", path, sizeof path);
    if (v && !(json_is_number(v) && json_number_value(v) == 0.0))
        cj_invalid(c, path, "0.0 (fabula has no attention dropout)");
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++) {
        v = hf_key(c, biases[i], path, sizeof path);
        if (v && !json_is_false(v))
            cj_invalid(c, path, "false (fabula's linear layers have no bias)");
    }
    v = hf_key(c, "head_dim", path, sizeof path);
    int hd = m->hidden_size / m->num_attention_heads;
    if (v && !(json_is_integer(v) && json_integer_value(v) == hd))
        cj_invalid(c, path, "null or hidden_size / num_attention_heads = %d (fabula's head size)", hd);
    v = hf_key(c, "sliding_window", path, sizeof path);
    if (v && !(json_is_integer(v) && json_integer_value(v) >= m->max_position_embeddings))
        cj_invalid(c, path,
                   "null or at least model.max_position_embeddings = %d (fabula's attention sees the whole "
                   "sample)",
                   m->max_position_embeddings);
    v = hf_key(c, "router_jitter_noise", path, sizeof path);
    if (v && !(json_is_number(v) && json_number_value(v) == 0.0))
        cj_invalid(c, path, "0.0 (fabula's router adds no noise)");
}
