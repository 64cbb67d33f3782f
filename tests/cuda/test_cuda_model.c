/* The whole model on the CUDA backend against the CPU reference: the same
 * config, the same initial weights (init is a function of the seed and the
 * tensor name) and the same packed micro-batch; one forward and backward on
 * each. The loss parts must agree within 1e-2 relative, and every
 * parameter's gradient within 1e-2 relative in norm (||g_gpu - g_cpu|| /
 * ||g_cpu||): the bf16 activations carry 8 bits of mantissa, and the
 * accumulations are fp32 on both sides.
 *
 * Models: dense GQA, and MoE (top-2 of 4, dropless, so a routing flip
 * caused by rounding moves a token between experts but drops nothing).
 * Exit 77 without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "model/model.h"
#include "ops.h"
#include "rng.h"

#define TOL 1e-2

static int fails;

typedef struct run {
    model_stats_t st;
    double lm, aux, z;
    float **grads;      /* per view */
} run_t;

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

static void run_model(const model_config_t *mc, const ops_t *ops, const model_input_t *in, run_t *r)
{
    model_t *m = model_create(mc, ops, in->T);
    model_init_weights(m, 1234);
    model_zero_grads(m);
    long ntargets = 0;
    for (int t = 0; t < in->T; t++)
        ntargets += in->targets[t] >= 0;
    model_scales_t sc = {.lm_denominator = (double)ntargets, .mb_weight = 1.0, .training = 1, .dropout_seed = 9};
    model_forward(m, in, &sc, &r->st);
    model_backward(m);
    ops->synchronize();
    r->lm = r->st.lm_sum / (double)ntargets;
    r->aux = r->st.aux;
    r->z = r->st.z;
    const param_table_t *t = model_params_table(m);
    r->grads = calloc((size_t)t->n, sizeof *r->grads);
    for (int i = 0; i < t->n; i++) {
        r->grads[i] = malloc(t->views[i].numel * sizeof(float));
        model_get_grad(m, &t->views[i], r->grads[i]);
    }
    model_free(m);
}

static void compare(const char *what, const model_config_t *mc, const model_input_t *in)
{
    run_t c, g;
    memset(&c, 0, sizeof c);
    memset(&g, 0, sizeof g);
    run_model(mc, ops_cpu(), in, &c);
    run_model(mc, ops_cuda(FB_DTYPE_BF16), in, &g);
    const double parts[3][2] = {{c.lm, g.lm}, {c.aux, g.aux}, {c.z, g.z}};
    const char *names[3] = {"lm loss", "aux loss", "z loss"};
    for (int i = 0; i < 3; i++) {
        double rel = fabs(parts[i][1] - parts[i][0]) / (fabs(parts[i][0]) + 1e-12);
        int ok = rel <= TOL || (parts[i][0] == 0.0 && parts[i][1] == 0.0);
        printf("  %-6s %-9s cpu %.6f gpu %.6f rel %.2e %s\n", what, names[i], parts[i][0], parts[i][1], rel,
               ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    param_table_t t;
    param_table_build(&t, mc);
    for (int i = 0; i < t.n; i++) {
        double num = 0.0, den = 0.0;
        for (size_t j = 0; j < t.views[i].numel; j++) {
            double d = (double)g.grads[i][j] - c.grads[i][j];
            num += d * d;
            den += (double)c.grads[i][j] * c.grads[i][j];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        int ok = rel <= TOL; /* NaN fails */
        if (!ok || i < 3)
            printf("  %-6s grad %-52s rel %.2e %s\n", what, t.views[i].name, rel, ok ? "PASS" : "FAIL");
        fails += !ok;
        free(c.grads[i]);
        free(g.grads[i]);
    }
    printf("  %-6s %d gradients compared\n", what, t.n);
    param_table_free(&t);
    free(c.grads);
    free(g.grads);
}

int main(void)
{
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    char err[256];
    if (cuda_backend_init(0, err, sizeof err) != 0) {
        fprintf(stderr, "cuda_backend_init: %s\n", err);
        return 1;
    }
    enum { T = 384, NSEQ = 5, V = 1000 };
    static int32_t tok[T], pos[T], tgt[T], cu[NSEQ + 1];
    build_batch(T, NSEQ, V, tok, pos, tgt, cu);
    model_input_t in = {tok, pos, tgt, cu, T, NSEQ, NULL, 0};

    model_config_t mc = {
        .vocab_size = V, .hidden_size = 256, .intermediate_size = 512, .num_hidden_layers = 2,
        .num_attention_heads = 4, .num_key_value_heads = 2, .num_local_experts = 0, .num_experts_per_tok = 0,
        .moe_layer_freq = 1, .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = 0,
        .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001, .capacity_factor = 0.0,
        .expert_dropout = 0.0, .initializer_range = 0.02, .max_position_embeddings = 4096,
    };
    compare("dense", &mc, &in);
    mc.num_local_experts = 4;
    mc.num_experts_per_tok = 2;
    mc.tie_word_embeddings = 1;
    compare("moe", &mc, &in);
    cuda_backend_shutdown();
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
