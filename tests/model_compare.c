/* The model on a 16-bit backend against fp32 (model_compare.h).
 *
 * Runs. Per case and dtype, one forward and backward on the packed
 * micro-batch of model_compare_input (uneven samples), each sample tagged
 * so the MoE layers count its routing choices:
 *   16-bit  the backend under test, master weights as initialised (the
 *           model rounds its 16-bit compute copy of them per block);
 *   fp32    ops_cpu() with the master weights rounded to the dtype: what
 *           the 16-bit compute copy holds. Full-precision weights would add
 *           the gradient's sensitivity to the weights themselves (6e-3 for
 *           the dense layer-1 q_proj at bf16) to the comparison.
 * Models: dense GQA (cross_entropy in place on the logits), MoE top-2 of 4
 * dropless, and MoE with tied embeddings and expert dropout (both MoE with
 * logits kept, so model_get_logits is compared too).
 *
 * Routing. A token whose second and third router logits lie within rounding
 * of each other goes to other experts at 16 bits than at fp32 (with the
 * random initial router, bf16 changes ~3 of 768 choices per layer here).
 * That moves an expert's gradient by O(1/sqrt(rows)) (7e-2 here), and with
 * expert dropout re-draws the masks of the later rows of the experts
 * involved (the mask is keyed by permuted row): a discrete change, not a
 * precision effect. So the MoE models route on a feature with a margin far
 * above rounding: every embedding row holds a token class, +-1 in column 0
 * or 1; the routers read only those two columns; the final norm's weight is
 * 0 on both, so the feature stays out of the logits. The runs' per-sample
 * routing counts (model_stats_t.tag_expert_tokens) must be equal.
 *
 * Bounds. Every op rounds its fb_act outputs once (relative error at most
 * eps, the unit roundoff: 2^-8 for bf16, 2^-11 for fp16) and accumulates
 * in fp32. A gradient here passes through some 50-100 such roundings,
 * which add up (in quadrature) to 2-3 eps, more for the worst conditioned
 * tensors (the q/k projections, whose gradients are differences across the
 * near-uniform attention of an initial model, and some norm weights): per
 * tensor ops_cpu16 measures 2.0-4.4 eps at bf16 and 2.3-5.1 eps at fp16,
 * bf16's error 8x fp16's (median over the tensors), as rounding predicts
 * and a bug would not. So the loss parts, the logits and all gradients
 * together (one norm) must agree within 1e-2 at bf16 (1e-2 / 8 at fp16),
 * and each gradient tensor within 8 eps (3.1e-2 and 3.9e-3): 1e-2 per
 * tensor is 2.6 eps at bf16, which the dense model's layer-1 q_proj
 * gradient reaches (1.08e-2 against unrounded weights). The CUDA backend's
 * tensor-core attention also rounds the probabilities and dS to 16 bits
 * for its tile products: roundings inside one op, averaged over the keys,
 * that the per-tensor margin has to absorb. The fp16 runs use a loss scale
 * of 2^16, fp16 training's initial one: without it the output gradients
 * (~1/(tokens*vocab)) would fall below fp16's normal range. A power-of-two
 * scale is exact in fp32. */
#include "model_compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/half_conv.h"
#include "rng.h"
#include "util/error.h"

#define BF16_EPS 0x1p-8
#define F16_EPS 0x1p-11
/* TOL_OUT: the loss parts, the logits and all gradients taken together;
 * TOL_GRAD: each gradient tensor (see Bounds). */
#define TOL_OUT(dt) ((dt) == FB_DTYPE_BF16 ? 1e-2 : 1e-2 / 8)
#define TOL_GRAD(dt) (8.0 * ((dt) == FB_DTYPE_BF16 ? BF16_EPS : F16_EPS))
#define F16_LOSS_SCALE 65536.0

/* ============================================================ inputs */

enum { BATCH_T = 384, BATCH_NSEQ = 5, BATCH_V = 1000 };

static void build_batch(int T, int nseq, int V, int32_t *tok, int32_t *pos, int32_t *tgt, int32_t *cu)
{
    /* uneven samples: lengths from the counter-based hash */
    int left = T;
    cu[0] = 0;
    for (int s = 0; s < nseq; s++) {
        int len = s == nseq - 1 ? left : 1 + (int)(fb_uniform_hash(77, (uint64_t)s) * (2.0f * T / nseq - 1));
        if (len > left - (nseq - 1 - s))
            len = left - (nseq - 1 - s);
        cu[s + 1] = cu[s] + len;
        left -= len;
    }
    for (int s = 0; s < nseq; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            tok[t] = (int32_t)(fb_hash2(5, (uint64_t)t) % (uint64_t)V);
            pos[t] = t - cu[s];
            tgt[t] = t + 1 < cu[s + 1] ? (int32_t)(fb_hash2(5, (uint64_t)t + 1) % (uint64_t)V) : -1;
        }
}

const model_input_t *model_compare_input(void)
{
    static int32_t tok[BATCH_T], pos[BATCH_T], tgt[BATCH_T], cu[BATCH_NSEQ + 1];
    static const uint8_t tags[BATCH_NSEQ] = {0, 1, 2, 3, 4};
    static model_input_t in;
    if (in.T == 0) {
        build_batch(BATCH_T, BATCH_NSEQ, BATCH_V, tok, pos, tgt, cu);
        in = (model_input_t){tok, pos, tgt, cu, BATCH_T, BATCH_NSEQ, tags, BATCH_NSEQ};
    }
    return &in;
}

int model_compare_cases(const model_compare_case_t **cases)
{
    static model_compare_case_t c[3];
    static int built;
    if (!built) {
        const model_config_t dense = {
            .vocab_size = BATCH_V, .hidden_size = 256, .intermediate_size = 512, .num_hidden_layers = 2,
            .num_attention_heads = 4, .num_key_value_heads = 2, .num_local_experts = 0, .num_experts_per_tok = 0,
            .moe_layer_freq = 1, .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = 0,
            .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001, .capacity_factor = 0.0,
            .expert_dropout = 0.0, .initializer_range = 0.02, .max_position_embeddings = 4096,
        };
        c[0] = (model_compare_case_t){"dense", dense, 0, 0};
        c[1] = (model_compare_case_t){"moe", dense, 1, 1};
        c[2] = (model_compare_case_t){"moe-tied", dense, 1, 1};
        for (int i = 1; i < 3; i++) {
            c[i].mc.num_local_experts = 4;
            c[i].mc.num_experts_per_tok = 2;
        }
        c[2].mc.tie_word_embeddings = 1;
        c[2].mc.expert_dropout = 0.1;
        built = 1;
    }
    *cases = c;
    return 3;
}

double model_compare_loss_scale(fb_dtype_t dt) { return dt == FB_DTYPE_BF16 ? 0.0 : F16_LOSS_SCALE; }

/* ======================================================== weight edits */

/* Rewrites parameter `name` on the host with f(values, its view, arg). */
static void edit_param(model_t *m, const char *name, void (*f)(float *, const param_view_t *, int), int arg)
{
    const param_view_t *v = param_table_find(model_params_table(m), name);
    if (!v) {
        printf("FAIL: no parameter %s\n", name);
        exit(1);
    }
    float *h = fb_malloc(v->numel * sizeof *h);
    model_get_param(m, v, h);
    f(h, v, arg);
    model_set_param(m, v, h);
    free(h);
}

/* Four token classes (by hash): +1 or -1 in column 0 or in column 1, 0 in
 * the other. Over the vocabulary each column averages ~0: with tied
 * embeddings the head gradient of a column is a sum over the vocabulary of
 * the softmax gradient times that column, which a constant (or one-signed)
 * column turns into a cancellation that rounding dominates. */
static void feature_embed(float *h, const param_view_t *v, int arg)
{
    (void)arg;
    const int64_t D = v->shape[1];
    for (int64_t t = 0; t < v->shape[0]; t++) {
        const unsigned c = (unsigned)(fb_hash2(7, (uint64_t)t) % 4);
        h[t * D] = c == 0 ? 1.0f : c == 1 ? -1.0f : 0.0f;
        h[t * D + 1] = c == 2 ? 1.0f : c == 3 ? -1.0f : 0.0f;
    }
}

static void feature_norm(float *h, const param_view_t *v, int arg)
{
    (void)v, (void)arg;
    h[0] = h[1] = 0.0f;
}

/* logit_e = 0.05 * (a_e h2[0] + b_e h2[1]). A token's class column of h2
 * is ~+-15 (the rest of the row is ~0.02 before the norm), the other one
 * below 1, so the four classes pick the experts of roles {0, 1}, {3, 2},
 * {2, 0} and {1, 3}, the second logit ~1.5 above the third. The router's
 * other columns are 0. Layer l gives role e to expert (e + l) mod E. */
static void feature_router(float *h, const param_view_t *v, int layer)
{
    static const float a[4] = {2.0f, 1.0f, -1.0f, -2.0f}, b[4] = {1.0f, -2.0f, 2.0f, -1.0f};
    const int64_t E = v->shape[0], D = v->shape[1];
    memset(h, 0, v->numel * sizeof *h);
    for (int64_t e = 0; e < E; e++) {
        const int64_t r = (e + layer) % E;
        h[r * D] = 0.05f * a[e % 4];
        h[r * D + 1] = 0.05f * b[e % 4];
    }
}

static void round_all(float *h, const param_view_t *v, int dt)
{
    for (size_t j = 0; j < v->numel; j++)
        h[j] = dt == FB_DTYPE_BF16 ? fb_bf16_to_f32(fb_bf16_from_f32(h[j])) : fb_f16_to_f32(fb_f16_from_f32(h[j]));
}

/* ============================================================ the runs */

void model_compare_run(const model_compare_case_t *c, const ops_t *ops, const model_input_t *in,
                       double loss_scale, fb_dtype_t round_dt, model_compare_run_t *r)
{
    const model_config_t *mc = &c->mc;
    model_t *m = model_create(mc, ops, in->T);
    model_set_keep_logits(m, c->keep_logits);
    model_init_weights(m, 1234);
    if (c->routing_feature) {
        edit_param(m, "model.embed_tokens.weight", feature_embed, 0);
        edit_param(m, "model.norm.weight", feature_norm, 0);
        for (int l = 0; l < mc->num_hidden_layers; l++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", l);
            edit_param(m, name, feature_router, l);
        }
    }
    const param_table_t *t = model_params_table(m);
    if (round_dt != FB_DTYPE_F32)
        for (int i = 0; i < t->n; i++)
            edit_param(m, t->views[i].name, round_all, (int)round_dt);
    model_zero_grads(m);
    long ntargets = 0;
    for (int i = 0; i < in->T; i++)
        ntargets += in->targets[i] >= 0;
    model_scales_t sc = {.lm_denominator = (double)ntargets, .mb_weight = 1.0, .training = 1, .dropout_seed = 9,
                         .loss_scale = loss_scale};
    model_stats_t st;
    model_forward(m, in, &sc, &st);
    r->ntag_counts = 0;
    r->tag_counts = NULL;
    if (mc->num_local_experts > 1) {
        r->ntag_counts = (size_t)in->ntags * (size_t)mc->num_hidden_layers * (size_t)mc->num_local_experts;
        r->tag_counts = fb_malloc(r->ntag_counts * sizeof *r->tag_counts);
        memcpy(r->tag_counts, st.tag_expert_tokens, r->ntag_counts * sizeof *r->tag_counts);
    }
    model_backward(m);
    ops->synchronize();
    r->lm = st.lm_sum / (double)ntargets;
    r->aux = st.aux;
    r->z = st.z;
    r->nviews = t->n;
    r->grads = fb_malloc((size_t)t->n * sizeof *r->grads);
    for (int i = 0; i < t->n; i++) {
        r->grads[i] = fb_malloc(t->views[i].numel * sizeof(float));
        model_get_grad(m, &t->views[i], r->grads[i]);
    }
    r->logits = NULL;
    if (c->keep_logits) {
        r->logits = fb_malloc((size_t)in->T * (size_t)mc->vocab_size * sizeof(float));
        model_get_logits(m, r->logits);
    }
    model_free(m);
}

void model_compare_run_free(model_compare_run_t *r)
{
    for (int i = 0; i < r->nviews; i++)
        free(r->grads[i]);
    free(r->grads);
    free(r->logits);
    free(r->tag_counts);
}

/* ====================================================== the comparisons */

double model_compare_rel_norm(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < n; j++) {
        const double d = (double)a[j] - b[j];
        num += d * d;
        den += (double)b[j] * b[j];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double model_compare_rel_scalar(double a, double b) { return a == b ? 0.0 : fabs(a - b) / (fabs(b) + 1e-12); }

long model_compare_routing_diff(const model_compare_run_t *a, const model_compare_run_t *b)
{
    long d = 0;
    for (size_t i = 0; i < a->ntag_counts; i++)
        d += labs(a->tag_counts[i] - b->tag_counts[i]);
    return d;
}

/* h against fp32: a line per loss part, the routing, the logits, each
 * gradient and all gradients together. Returns the failures. */
static int compare_fp32(const char *nm, const model_compare_case_t *c, const model_input_t *in,
                        const model_compare_run_t *h, const model_compare_run_t *f, fb_dtype_t dt)
{
    const double tol_out = TOL_OUT(dt), tol_grad = TOL_GRAD(dt);
    const double parts[3][2] = {{f->lm, h->lm}, {f->aux, h->aux}, {f->z, h->z}};
    const char *names[3] = {"lm loss", "aux loss", "z loss"};
    int fails = 0;
    for (int i = 0; i < 3; i++) {
        const double rel = model_compare_rel_scalar(parts[i][1], parts[i][0]);
        const int ok = rel <= tol_out;
        printf("  %-8s %-9s %-9s fp32 %.6f 16-bit %.6f rel %.2e %s\n", nm, c->name, names[i], parts[i][0],
               parts[i][1], rel, ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    if (f->tag_counts) {
        const long rd = model_compare_routing_diff(h, f);
        printf("  %-8s %-9s routing   choices differing from fp32 %ld %s\n", nm, c->name, rd, rd ? "FAIL" : "PASS");
        fails += rd != 0;
    }
    if (c->keep_logits) {
        const double rel = model_compare_rel_norm(h->logits, f->logits, (size_t)in->T * (size_t)c->mc.vocab_size);
        const int ok = rel <= tol_out; /* NaN fails */
        printf("  %-8s %-9s logits    rel %.2e %s\n", nm, c->name, rel, ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    param_table_t t;
    param_table_build(&t, &c->mc);
    double worst = 0.0, num = 0.0, den = 0.0;
    for (int i = 0; i < t.n; i++) {
        const double rel = model_compare_rel_norm(h->grads[i], f->grads[i], t.views[i].numel);
        const int ok = rel <= tol_grad; /* NaN fails */
        printf("  %-8s %-9s grad %-50s rel %.2e %s\n", nm, c->name, t.views[i].name, rel, ok ? "PASS" : "FAIL");
        fails += !ok;
        worst = isnan(rel) || rel > worst ? rel : worst;
        for (size_t j = 0; j < t.views[i].numel; j++) {
            const double d = (double)h->grads[i][j] - f->grads[i][j];
            num += d * d;
            den += (double)f->grads[i][j] * f->grads[i][j];
        }
    }
    const double all = sqrt(num / den);
    const int ok = all <= tol_out; /* NaN fails */
    printf("  %-8s %-9s %d gradients: worst rel %.2e = %.1f eps (bound %.1e); all together rel %.2e (bound %.1e) %s\n",
           nm, c->name, t.n, worst, worst / (dt == FB_DTYPE_BF16 ? BF16_EPS : F16_EPS), tol_grad, all, tol_out,
           ok ? "PASS" : "FAIL");
    fails += !ok;
    param_table_free(&t);
    return fails;
}

int model_compare_vs_fp32_each(const ops_t *ops16, fb_dtype_t dt, model_compare_each_fn each, void *arg)
{
    const model_input_t *in = model_compare_input();
    const model_compare_case_t *cases;
    const int ncases = model_compare_cases(&cases);
    const double scale = model_compare_loss_scale(dt);
    int fails = 0;
    for (int i = 0; i < ncases; i++) {
        model_compare_run_t h, f;
        model_compare_run(&cases[i], ops16, in, scale, FB_DTYPE_F32, &h);
        if (each)
            fails += each(&cases[i], &h, dt, arg);
        model_compare_run(&cases[i], ops_cpu(), in, scale, dt, &f);
        fails += compare_fp32(ops16->name, &cases[i], in, &h, &f, dt);
        model_compare_run_free(&f);
        model_compare_run_free(&h);
    }
    return fails;
}

int model_compare_vs_fp32(const ops_t *ops16, fb_dtype_t dt)
{
    return model_compare_vs_fp32_each(ops16, dt, NULL, NULL);
}
