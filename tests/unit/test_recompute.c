/* model.recompute (docs/model.md, "Recomputation"): "selective" and "full"
 * must give the gradients, losses and MoE statistics of "none" bit for bit
 * (the same ops in the same order on the same inputs, the same expert
 * dropout seeds), with statistics counted once, and a smaller arena.
 *
 * One forward and backward per (case, mode, backend) on the packed
 * micro-batch of tests/model_compare.c (five uneven samples, each tagged),
 * from the same initial weights; the reference is the "none" run of the
 * same case and backend. Cases: the dense GQA model and the two MoE models
 * of model_compare.c (top-2 of 4 dropless; tied embeddings with expert
 * dropout), and a mixed model (three layers, MoE every second one, one kv
 * head, capacity factor 1: assignments dropped, tied embeddings, expert
 * dropout), so a dense layer and an MoE layer share full recomputation's
 * one-layer buffers. Backends: ops_cpu (fp32) and ops_cpu16 (bf16, fp16:
 * the 16-bit activation storage). The statistics are read after the
 * backward, where a second counting would show. The arena must shrink
 * none > selective > full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model_compare.h"
#include "model/model.h"
#include "ops.h"
#include "util/error.h"

static int fails;

typedef struct run {
    size_t act_bytes;
    double lm_sum, aux, z;
    long ntargets, dropped;
    size_t nexp, ntag;
    long *tokens_per_expert, *routed_per_expert, *dropped_per_layer, *tag_expert_tokens;
    double *aux_per_layer, *z_per_layer;
    int nviews;
    float **grads;
    size_t *numel;
} run_t;

static void *dup(const void *p, size_t bytes)
{
    if (!p)
        return NULL;
    void *q = fb_malloc(bytes ? bytes : 1);
    memcpy(q, p, bytes);
    return q;
}

static void run_model(const model_config_t *mc, const ops_t *ops, const model_input_t *in, run_t *r)
{
    model_t *m = model_create(mc, ops, in->T);
    model_init_weights(m, 1234);
    model_zero_grads(m);
    long ntargets = 0;
    for (int i = 0; i < in->T; i++)
        ntargets += in->targets[i] >= 0;
    model_scales_t sc = {.lm_denominator = (double)ntargets, .mb_weight = 1.0, .training = 1, .dropout_seed = 9,
                         .loss_scale = ops->act_dtype == FB_DTYPE_F16 ? 65536.0 : 0.0};
    model_stats_t st;
    model_forward(m, in, &sc, &st);
    model_backward(m);
    ops->synchronize();
    const size_t L = (size_t)mc->num_hidden_layers, E = mc->num_local_experts > 1 ? (size_t)mc->num_local_experts : 1;
    r->act_bytes = model_activation_bytes(m);
    r->lm_sum = st.lm_sum;
    r->ntargets = st.ntargets;
    r->aux = st.aux;
    r->z = st.z;
    r->dropped = st.dropped;
    r->nexp = L * E;
    r->tokens_per_expert = dup(st.tokens_per_expert, r->nexp * sizeof(long));
    r->routed_per_expert = dup(st.routed_per_expert, r->nexp * sizeof(long));
    r->dropped_per_layer = dup(st.dropped_per_layer, L * sizeof(long));
    r->aux_per_layer = dup(st.aux_per_layer, L * sizeof(double));
    r->z_per_layer = dup(st.z_per_layer, L * sizeof(double));
    r->ntag = st.tag_expert_tokens ? (size_t)in->ntags * L * E : 0;
    r->tag_expert_tokens = dup(st.tag_expert_tokens, r->ntag * sizeof(long));
    const param_table_t *t = model_params_table(m);
    r->nviews = t->n;
    r->grads = fb_malloc((size_t)t->n * sizeof *r->grads);
    r->numel = fb_malloc((size_t)t->n * sizeof *r->numel);
    for (int i = 0; i < t->n; i++) {
        r->numel[i] = t->views[i].numel;
        r->grads[i] = fb_malloc(t->views[i].numel * sizeof(float));
        model_get_grad(m, &t->views[i], r->grads[i]);
    }
    model_free(m);
}

static void run_free(run_t *r)
{
    for (int i = 0; i < r->nviews; i++)
        free(r->grads[i]);
    free(r->grads);
    free(r->numel);
    free(r->tokens_per_expert);
    free(r->routed_per_expert);
    free(r->dropped_per_layer);
    free(r->aux_per_layer);
    free(r->z_per_layer);
    free(r->tag_expert_tokens);
}

static int same(const void *a, const void *b, size_t bytes) { return bytes == 0 || (a && b && !memcmp(a, b, bytes)); }

/* Every figure of r bitwise that of the reference ref; prints what differs. */
static int compare(const char *what, const run_t *r, const run_t *ref, size_t L)
{
    int bad = 0;
#define CHECK(cond, name)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("  %s: %s differs\n", what, name);                          \
            bad++;                                                             \
        }                                                                      \
    } while (0)
    CHECK(same(&r->lm_sum, &ref->lm_sum, sizeof(double)), "lm_sum");
    CHECK(r->ntargets == ref->ntargets, "ntargets");
    CHECK(same(&r->aux, &ref->aux, sizeof(double)), "aux");
    CHECK(same(&r->z, &ref->z, sizeof(double)), "z");
    CHECK(r->dropped == ref->dropped, "dropped");
    CHECK(same(r->tokens_per_expert, ref->tokens_per_expert, r->nexp * sizeof(long)), "tokens_per_expert");
    CHECK(same(r->routed_per_expert, ref->routed_per_expert, r->nexp * sizeof(long)), "routed_per_expert");
    CHECK(same(r->dropped_per_layer, ref->dropped_per_layer, L * sizeof(long)), "dropped_per_layer");
    CHECK(same(r->aux_per_layer, ref->aux_per_layer, L * sizeof(double)), "aux_per_layer");
    CHECK(same(r->z_per_layer, ref->z_per_layer, L * sizeof(double)), "z_per_layer");
    CHECK(r->ntag == ref->ntag && same(r->tag_expert_tokens, ref->tag_expert_tokens, r->ntag * sizeof(long)),
          "tag_expert_tokens");
    CHECK(r->nviews == ref->nviews, "parameter views");
    for (int i = 0; bad == 0 && i < r->nviews; i++)
        if (memcmp(r->grads[i], ref->grads[i], r->numel[i] * sizeof(float))) {
            printf("  %s: gradient of view %d differs\n", what, i);
            bad++;
        }
#undef CHECK
    return bad;
}

static void test_case(const char *name, const model_config_t *base, const ops_t *ops, const model_input_t *in)
{
    static const char *const mode[3] = {"none", "selective", "full"};
    run_t r[3];
    for (int k = 0; k < 3; k++) {
        model_config_t mc = *base;
        mc.recompute = k;
        run_model(&mc, ops, in, &r[k]);
    }
    /* the reference must route and drop: else the statistics compare nothing */
    if (base->num_local_experts > 1 && (r[0].ntag == 0 || r[0].aux == 0.0)) {
        printf("  %s %s: no routing statistics FAIL\n", ops->name, name);
        fails++;
    }
    if (base->num_local_experts > 1 && base->capacity_factor > 0 && r[0].dropped == 0) {
        printf("  %s %s: nothing dropped FAIL\n", ops->name, name);
        fails++;
    }
    for (int k = 1; k < 3; k++) {
        char what[128];
        snprintf(what, sizeof what, "%s %s %s", ops->name, name, mode[k]);
        const int bad = compare(what, &r[k], &r[0], (size_t)base->num_hidden_layers);
        const int shrinks = r[k].act_bytes < r[k - 1].act_bytes;
        printf("  %-40s activations %zu (none %zu) %s\n", what, r[k].act_bytes, r[0].act_bytes,
               bad || !shrinks ? "FAIL" : "PASS");
        if (!shrinks)
            printf("  %s: the arena does not shrink\n", what);
        fails += bad || !shrinks;
    }
    for (int k = 0; k < 3; k++)
        run_free(&r[k]);
}

int main(void)
{
    const model_input_t *in = model_compare_input();
    const model_compare_case_t *cases;
    const int ncases = model_compare_cases(&cases);
    model_config_t mixed = cases[2].mc; /* MoE, tied, expert dropout */
    mixed.num_hidden_layers = 3;
    mixed.moe_layer_freq = 2;
    mixed.num_key_value_heads = 1;
    mixed.capacity_factor = 1.0;
    const ops_t *backends[3] = {ops_cpu(), ops_cpu16(FB_DTYPE_BF16), ops_cpu16(FB_DTYPE_F16)};
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < ncases; i++)
            test_case(cases[i].name, &cases[i].mc, backends[b], in);
        test_case("mixed-dropping", &mixed, backends[b], in);
    }
    printf("test_recompute: %s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}
