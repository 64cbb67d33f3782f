/* A rough lower bound on the memory one rank needs, so that absurd sizes
 * (model.vocab_size 2e9, model.hidden_size 1e6, a micro batch of 1e9) are
 * refused by `fabula train --dry-run`, naming the key, and not later by a
 * failed allocation.
 *
 * The bound errs low, so that no run that fits is refused:
 *  - model state: 16 bytes per parameter (fp32 weight, gradient, Adam's two
 *    moments), all of it divided by the world size (as if ZeRO-3 sharded
 *    everything over every rank);
 *  - activations of one micro-batch of data.max_tokens_per_batch tokens:
 *    the fp32 logits [T, V] and 4 floats of width D per token and layer
 *    (the real count is several times that).
 * Refused above max(1 TiB, 8 x this node's physical memory): beyond what
 * any rank has, even with swap or a GPU of its own. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "config/config_internal.h"

typedef struct factor {
    const char *key;
    double value, def;
} factor_t;

/* The key of `f` whose value is furthest above its default: the one that
 * makes the term absurd. */
static const factor_t *culprit(const factor_t *f, int n)
{
    const factor_t *best = &f[0];
    for (int i = 1; i < n; i++)
        if (f[i].value / f[i].def > best->value / best->def)
            best = &f[i];
    return best;
}

static double node_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

void config_check_memory(cj_ctx_t *c, const config_t *cfg, int world_size)
{
    const model_config_t *m = &cfg->model;
    double D = m->hidden_size, V = m->vocab_size, I = m->intermediate_size, L = m->num_hidden_layers;
    double hd = D / m->num_attention_heads, E = m->num_local_experts;
    double attn = D * m->num_attention_heads * hd * 2 + D * m->num_key_value_heads * hd * 2 + 2 * D;
    /* layers l < L with l % freq == 0 */
    double moe_layers = E > 1 ? ceil(L / m->moe_layer_freq) : 0;
    double ffn = (L - moe_layers) * 3 * D * I + moe_layers * E * (3 * D * I + D);
    double embed = V * D * (m->tie_word_embeddings ? 1 : 2);
    double state = 16.0 * (embed + L * attn + ffn + D) / world_size;
    double T = cfg->loader.max_tokens_per_batch;
    double act = 4.0 * T * (V + 4 * D * L);

    double mem = node_memory();
    double limit = fmax(1099511627776.0, 8 * mem);
    if (!(state + act > limit))
        return;
    double dm = (double)cj_default_integer(c, "train_micro_batch_size_per_gpu");
    double ds = (double)cj_default_integer(c, "data.seq_len");
    const factor_t size[] = {
        {"model.vocab_size", V, (double)cj_default_integer(c, "model.vocab_size")},
        {"model.hidden_size", D, (double)cj_default_integer(c, "model.hidden_size")},
        {"model.intermediate_size", I, (double)cj_default_integer(c, "model.intermediate_size")},
        {"model.num_hidden_layers", L, (double)cj_default_integer(c, "model.num_hidden_layers")},
        {"model.num_local_experts", config_model_experts(m), (double)cj_default_integer(c, "model.num_local_experts")},
    };
    const factor_t batch[] = {
        {"model.vocab_size", V, size[0].def},
        {"model.hidden_size", D, size[1].def},
        {"model.num_hidden_layers", L, size[3].def},
        {"train_micro_batch_size_per_gpu", cfg->micro_batch, dm},
        {"data.max_tokens_per_batch", T, dm * ds},
    };
    const factor_t *k = state >= act ? culprit(size, 5) : culprit(batch, 5);
    cj_invalid(c, k->key,
               "a size the run can hold: the config needs at least %.3g GB per rank (%.3g GB of parameters, "
               "gradients and Adam state over %d rank(s), %.3g GB of activations for %.0f tokens a micro-batch), "
               "more than %.3g GB (the larger of 1 TiB and 8 x this node's %.3g GB)",
               (state + act) / 1e9, state / 1e9, world_size, act / 1e9, T, limit / 1e9, mem / 1e9);
}
