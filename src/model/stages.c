/* The pipeline's layer split: explicit, or balanced by cost with a dynamic
 * programme over the contiguous splits (pp x L^2 steps: at most 64 stages
 * of a few hundred layers). */
#include "model/stages.h"

#include <float.h>
#include <stdlib.h>

#include "model/params.h"
#include "util/error.h"

double model_stage_layer_cost(const model_config_t *mc, int l)
{
    const double D = mc->hidden_size, I = mc->intermediate_size;
    const double hd = D / mc->num_attention_heads;
    double c = D * hd * (2.0 * mc->num_attention_heads + 2.0 * mc->num_key_value_heads);
    if (model_layer_is_moe(mc, l))
        c += (double)mc->num_local_experts * D + (double)mc->num_experts_per_tok * 3.0 * D * I;
    else
        c += 3.0 * D * I;
    return c;
}

void model_stage_split(const model_config_t *mc, int pp, const int *layers, int *first)
{
    const int L = mc->num_hidden_layers;
    FB_ASSERT(pp >= 1 && pp <= L);
    first[0] = 0;
    if (layers && layers[0] > 0) {
        for (int s = 0; s < pp; s++)
            first[s + 1] = first[s] + layers[s];
        FB_ASSERT(first[pp] == L);
        return;
    }
    const double VD = (double)mc->vocab_size * mc->hidden_size;
    /* prefix[i]: the cost of layers [0, i) */
    double *prefix = fb_calloc((size_t)L + 1, sizeof *prefix);
    for (int l = 0; l < L; l++)
        prefix[l + 1] = prefix[l] + model_stage_layer_cost(mc, l);
    /* best[s][i]: the smallest largest cost of stages 0..s holding layers
     * [0, i); cut[s][i] where stage s then starts */
    double *best = fb_calloc((size_t)pp * (L + 1), sizeof *best);
    int *cut = fb_calloc((size_t)pp * (L + 1), sizeof *cut);
#define BEST(s, i) best[(size_t)(s) * (L + 1) + (i)]
#define CUT(s, i) cut[(size_t)(s) * (L + 1) + (i)]
    for (int s = 0; s < pp; s++)
        for (int i = 0; i <= L; i++) {
            BEST(s, i) = DBL_MAX;
            const int last = s == pp - 1;
            if (s == 0) {
                if (i >= 1)
                    BEST(0, i) = prefix[i] + VD + (last ? VD : 0.0);
                continue;
            }
            for (int j = s; j < i; j++) { /* stage s holds [j, i) */
                const double own = prefix[i] - prefix[j] + (last ? VD : 0.0);
                const double worst = BEST(s - 1, j) > own ? BEST(s - 1, j) : own;
                if (worst < BEST(s, i)) {
                    BEST(s, i) = worst;
                    CUT(s, i) = j;
                }
            }
        }
    first[pp] = L;
    for (int s = pp - 1; s >= 1; s--)
        first[s] = CUT(s, first[s + 1]);
#undef BEST
#undef CUT
    free(prefix);
    free(best);
    free(cut);
}

int model_stage_chunks(const model_config_t *mc, const parallel_config_t *pc, int stage, int *lo, int *hi)
{
    const int pp = pc->pipeline_parallel_size > 1 ? pc->pipeline_parallel_size : 1;
    const int v = pc->virtual_pipeline_stages > 1 ? pc->virtual_pipeline_stages : 1;
    FB_ASSERT(stage >= 0 && stage < pp && pp * v <= PARALLEL_MAX_STAGES);
    int first[PARALLEL_MAX_STAGES + 1];
    model_stage_split(mc, pp * v, v == 1 ? pc->pipeline_layers : NULL, first);
    for (int c = 0; c < v; c++) {
        lo[c] = first[c * pp + stage];
        hi[c] = first[c * pp + stage + 1];
    }
    return v;
}

void model_stage_order(int pp, int v, int k, int backward, int *mb, int *chunk)
{
    *mb = k / (pp * v) * pp + k % pp;
    const int c = k % (pp * v) / pp;
    *chunk = backward ? v - 1 - c : c;
}

int model_stage_warmup(int pp, int v, int stage, int nmicro)
{
    const int w = v == 1 ? pp - stage - 1 : 2 * (pp - stage - 1) + (v - 1) * pp;
    return w < nmicro * v ? w : nmicro * v;
}

int model_stage_inflight(int pp, int v, int stage, int nmicro)
{
    if (v == 1)
        return pp - stage < nmicro ? pp - stage : (nmicro > 0 ? nmicro : 1);
    const int total = nmicro * v, w = model_stage_warmup(pp, v, stage, nmicro);
    int started = 0, done = 0, most = 0;
    for (int i = 0; i < total + w; i++) {
        int mb, chunk;
        /* step i: the forward i (if any), then the backward i - w (if any) */
        if (i < total) {
            model_stage_order(pp, v, i, 0, &mb, &chunk);
            if (chunk == 0)
                started = mb + 1;
        }
        if (started - done > most)
            most = started - done;
        if (i >= w && i - w < total) {
            model_stage_order(pp, v, i - w, 1, &mb, &chunk);
            if (chunk == 0)
                done = mb + 1;
        }
    }
    return most > 0 ? most : 1;
}
