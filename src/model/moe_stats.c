/* Per-layer MoE statistics of one forward: aux and z loss per layer, and
 * which experts the tokens of each sample tag (genre) choose. The trainer
 * sums them over a step's micro-batches and ranks (docs/run-dir.md). */
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/error.h"

void model_moe_stats_begin(model_t *m, const model_input_t *in, model_stats_t *stats)
{
    const size_t L = (size_t)m->mc.num_hidden_layers;
    const size_t E = (size_t)config_model_experts(&m->mc);
    memset(m->aux_per_layer, 0, L * sizeof *m->aux_per_layer);
    memset(m->z_per_layer, 0, L * sizeof *m->z_per_layer);
    stats->aux_per_layer = m->aux_per_layer;
    stats->z_per_layer = m->z_per_layer;
    stats->tag_expert_tokens = NULL;
    m->ntags = 0;
    m->in_tag = NULL;
    m->in_cu = NULL;
    if (!in->seq_tag || in->ntags <= 0)
        return;
    const size_t n = (size_t)in->ntags * L * E;
    if (n > (size_t)m->tag_cap) {
        free(m->tag_expert_tokens);
        m->tag_expert_tokens = fb_malloc(n * sizeof *m->tag_expert_tokens);
        m->tag_cap = (int)n;
    }
    memset(m->tag_expert_tokens, 0, n * sizeof *m->tag_expert_tokens);
    m->ntags = in->ntags;
    m->in_tag = in->seq_tag;
    m->in_cu = in->cu_seqlens;
    stats->tag_expert_tokens = m->tag_expert_tokens;
}

/* Counts the router's choices (before capacity dropping: what the router
 * prefers, not what capacity let through) from m->host_topk. */
void model_moe_count_tags(model_t *m, int l)
{
    if (m->ntags == 0)
        return;
    const int L = m->mc.num_hidden_layers, E = m->mc.num_local_experts, K = m->mc.num_experts_per_tok;
    for (int s = 0; s < m->nseq; s++) {
        const int tag = m->in_tag[s];
        if (tag >= m->ntags)
            fb_fatal(FB_EXIT_INTERNAL, "sample %d of the micro-batch has tag %d, expected < %d", s, tag,
                     m->ntags);
        long *row = m->tag_expert_tokens + ((size_t)tag * L + l) * E;
        for (int t = m->in_cu[s]; t < m->in_cu[s + 1]; t++)
            for (int k = 0; k < K; k++)
                row[m->host_topk[(size_t)t * K + k]]++;
    }
}
