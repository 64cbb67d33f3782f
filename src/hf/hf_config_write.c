/* model_config_t <-> the checkpoint's saved config and transformers'
 * config.json (docs/export.md "config.json"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf_export.h"
#include "util/error.h"

static json_t *need(const char *ckpt, json_t *obj, const char *sect, const char *key, int want_int)
{
    json_t *v = json_object_get(obj, key);
    if (!v || (want_int ? !json_is_integer(v) : !json_is_number(v) && !json_is_boolean(v)))
        fb_fatal(FB_EXIT_DATA, "checkpoint %s: its saved config lacks %s.%s (or it is not a %s)", ckpt, sect, key,
                 want_int ? "integer" : "number");
    return v;
}

static int geti(const char *ckpt, json_t *m, const char *key)
{
    return (int)json_integer_value(need(ckpt, m, "model", key, 1));
}

static double getr(const char *ckpt, json_t *m, const char *key)
{
    json_t *v = need(ckpt, m, "model", key, 0);
    return json_is_boolean(v) ? (double)json_is_true(v) : json_number_value(v);
}

void hf_model_from_config(const char *ckpt, const char *config_json, model_config_t *mc, char **tokenizer)
{
    json_error_t err;
    json_t *root = json_loads(config_json ? config_json : "", 0, &err);
    json_t *m = root ? json_object_get(root, "model") : NULL;
    if (!m || !json_is_object(m))
        fb_fatal(FB_EXIT_DATA, "checkpoint %s: its saved config has no model section%s%s", ckpt,
                 root ? "" : ": ", root ? "" : err.text);
    memset(mc, 0, sizeof *mc);
    mc->vocab_size = geti(ckpt, m, "vocab_size");
    mc->hidden_size = geti(ckpt, m, "hidden_size");
    mc->intermediate_size = geti(ckpt, m, "intermediate_size");
    mc->num_hidden_layers = geti(ckpt, m, "num_hidden_layers");
    mc->num_attention_heads = geti(ckpt, m, "num_attention_heads");
    mc->num_key_value_heads = geti(ckpt, m, "num_key_value_heads");
    mc->num_local_experts = geti(ckpt, m, "num_local_experts");
    mc->num_experts_per_tok = geti(ckpt, m, "num_experts_per_tok");
    mc->moe_layer_freq = geti(ckpt, m, "moe_layer_freq");
    mc->rope_theta = getr(ckpt, m, "rope_theta");
    mc->rms_norm_eps = getr(ckpt, m, "rms_norm_eps");
    json_t *tie = json_object_get(m, "tie_word_embeddings");
    if (!json_is_boolean(tie))
        fb_fatal(FB_EXIT_DATA, "checkpoint %s: its saved config lacks model.tie_word_embeddings", ckpt);
    mc->tie_word_embeddings = json_is_true(tie);
    mc->router_aux_loss_coef = getr(ckpt, m, "router_aux_loss_coef");
    mc->router_z_loss_coef = getr(ckpt, m, "router_z_loss_coef");
    mc->capacity_factor = getr(ckpt, m, "capacity_factor");
    mc->expert_dropout = getr(ckpt, m, "expert_dropout");
    mc->initializer_range = getr(ckpt, m, "initializer_range");
    mc->max_position_embeddings = geti(ckpt, m, "max_position_embeddings");
    if (mc->vocab_size < 1 || mc->hidden_size < 1 || mc->num_hidden_layers < 1 || mc->num_attention_heads < 1 ||
        mc->num_key_value_heads < 1 || mc->hidden_size % mc->num_attention_heads != 0 || mc->moe_layer_freq < 1)
        fb_fatal(FB_EXIT_DATA, "checkpoint %s: its saved model section is not a valid model", ckpt);
    json_t *data = json_object_get(root, "data");
    json_t *tok = data ? json_object_get(data, "tokenizer") : NULL;
    *tokenizer = json_is_string(tok) && json_string_length(tok) > 0 ? fb_strdup(json_string_value(tok)) : NULL;
    json_decref(root);
}

int hf_model_is_moe(const model_config_t *mc) { return config_model_is_moe(mc); }

void hf_model_check(const char *ckpt, const model_config_t *mc, int allow_dropless, int quiet)
{
    if (!hf_model_is_moe(mc))
        return;
    for (int l = 0; l < mc->num_hidden_layers; l++)
        if (l % mc->moe_layer_freq != 0)
            fb_fatal(FB_EXIT_USAGE,
                     "checkpoint %s: model.moe_layer_freq = %d makes layer %d dense beside MoE layers; "
                     "MixtralForCausalLM has an MoE block in every layer and LlamaForCausalLM none, so "
                     "neither computes this model",
                     ckpt, mc->moe_layer_freq, l);
    if (mc->capacity_factor > 0 && !allow_dropless)
        fb_fatal(FB_EXIT_USAGE,
                 "checkpoint %s: model.capacity_factor = %g (the default MoE's is 1.25) dropped the assignments "
                 "over an expert's capacity in training; transformers' Mixtral, like `fabula generate`, is "
                 "dropless, so it differs from the training's forward wherever an expert would overflow. Give "
                 "--allow-dropless-inference to export it as that dropless model",
                 ckpt, mc->capacity_factor);
    if (quiet)
        return;
    if (mc->capacity_factor > 0)
        fb_warn("export: model.capacity_factor = %g is not exported: the Mixtral model computes every "
                "assignment (dropless); fabula's forward with capacity differs on inputs where an expert "
                "overflows (--allow-dropless-inference)",
                mc->capacity_factor);
    if (mc->router_z_loss_coef != 0)
        fb_warn("export: model.router_z_loss_coef = %g is a training loss only (no effect on the outputs); "
                "transformers has no such key, it is not exported",
                mc->router_z_loss_coef);
    if (mc->expert_dropout != 0)
        fb_warn("export: model.expert_dropout = %g acts in training only; not exported", mc->expert_dropout);
}

/* The shortest decimal that reads back as the same double. */
static void fmt_real(char *buf, size_t n, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* an integral value as "10000.0", not "1e+04": both are JSON numbers,
     * the first reads as transformers writes it */
    if (strpbrk(buf, "eE") && v == (double)(long long)v && v > -1e15 && v < 1e15)
        snprintf(buf, n, "%.1f", v);
    if (!strpbrk(buf, ".eEn"))
        strncat(buf, ".0", n - strlen(buf) - 1);
}

static void fmt_id(char *buf, size_t n, int id)
{
    if (id < 0)
        snprintf(buf, n, "null");
    else
        snprintf(buf, n, "%d", id);
}

char *hf_config_json(const model_config_t *mc, const char *torch_dtype, int bos, int eos, int pad)
{
    const int moe = hf_model_is_moe(mc);
    char theta[40], eps[40], init[40], aux[40], b[16], e[16], p[16];
    fmt_real(theta, sizeof theta, mc->rope_theta);
    fmt_real(eps, sizeof eps, mc->rms_norm_eps);
    fmt_real(init, sizeof init, mc->initializer_range);
    fmt_real(aux, sizeof aux, mc->router_aux_loss_coef);
    fmt_id(b, sizeof b, bos);
    fmt_id(e, sizeof e, eos);
    fmt_id(p, sizeof p, pad);
    size_t cap = 4096;
    char *out = fb_malloc(cap);
    size_t n = 0;
#define OUT(...) n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__)
    OUT("{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", moe ? "MixtralForCausalLM" : "LlamaForCausalLM",
        moe ? "mixtral" : "llama");
    OUT("  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n", mc->vocab_size,
        mc->hidden_size, mc->intermediate_size);
    OUT("  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n",
        mc->num_hidden_layers, mc->num_attention_heads, mc->num_key_value_heads);
    OUT("  \"head_dim\": %d,\n", mc->hidden_size / mc->num_attention_heads);
    OUT("  \"hidden_act\": \"silu\",\n  \"max_position_embeddings\": %d,\n", mc->max_position_embeddings);
    OUT("  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n  \"rope_scaling\": null,\n", eps, theta);
    OUT("  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    if (moe) {
        OUT("  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": %d,\n", mc->num_local_experts,
            mc->num_experts_per_tok);
        OUT("  \"output_router_logits\": false,\n  \"router_aux_loss_coef\": %s,\n", aux);
        OUT("  \"router_jitter_noise\": 0.0,\n  \"sliding_window\": null,\n");
    } else {
        OUT("  \"mlp_bias\": false,\n  \"pretraining_tp\": 1,\n");
    }
    OUT("  \"tie_word_embeddings\": %s,\n  \"initializer_range\": %s,\n", mc->tie_word_embeddings ? "true" : "false",
        init);
    OUT("  \"bos_token_id\": %s,\n  \"eos_token_id\": %s,\n  \"pad_token_id\": %s,\n", b, e, p);
    OUT("  \"torch_dtype\": \"%s\",\n  \"use_cache\": true\n}\n", torch_dtype);
#undef OUT
    FB_ASSERT(n < cap);
    return out;
}

char *hf_generation_config_json(int bos, int eos, int pad)
{
    char b[16], e[16], p[16];
    fmt_id(b, sizeof b, bos);
    fmt_id(e, sizeof e, eos);
    fmt_id(p, sizeof p, pad);
    char *out = fb_malloc(256);
    snprintf(out, 256, "{\n  \"bos_token_id\": %s,\n  \"eos_token_id\": %s,\n  \"pad_token_id\": %s\n}\n", b, e, p);
    return out;
}
