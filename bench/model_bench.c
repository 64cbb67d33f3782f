/* fabula-model-bench: training-step throughput of one model on one device,
 * the fabula side of bench/gpu.sh (bench/torch_model.py is the PyTorch side;
 * both take the same flags and print the same JSON line).
 *
 * One process, no data pipeline: a fixed batch of `batch` sequences of
 * `seq` random tokens, packed back to back (cu_seqlens every seq tokens), so
 * attention is causal within each sequence exactly like the PyTorch side's
 * [B, S] batch. A step is the trainer's: forward and backward through a
 * one-rank ZeRO-0 engine, then zero_step (global-norm clipping at 1.0 and
 * AdamW over the fp32 master weights), timed after `warmup` steps with the
 * backend synchronised at both ends.
 *
 * FLOPs per token: model_flops_per_token with the full S and the RMSNorm
 * weights counted, 6 * N_active + 12 * L * d * S (N_active: every parameter
 * but the embedding, the LM head and the RMSNorm weights included, only the
 * router and the top-k experts of each MoE layer), the convention of
 * bench/README.md and bench/torch_model.py. MFU divides by a bf16 matmul ceiling
 * measured in the same process: 8192^3 matmuls through the backend's own
 * matmul op (on the CPU, 1024^3 in fp32). */
#include "build_config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/timer.h"
#include "ops.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "rng.h"
#include "zero/zero.h"
#include "util/error.h"

#ifdef HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

typedef struct opts {
    const char *model, *backend;
    int layers, hidden, heads, kv_heads, vocab, ffn_hidden, experts, topk, expert_hidden, batch, seq, steps,
        warmup;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fabula-model-bench [options]\n"
            "Training-step throughput of one model on one device (bench/gpu.sh).\n"
            "  --backend cpu|cuda   op table (default cuda when built with CUDA, else cpu)\n"
            "  --model dense|moe    FFN kind (default dense)\n"
            "  --layers N --hidden D --heads H --kv-heads KV --vocab V\n"
            "  --ffn-hidden I       dense FFN width (default 4*hidden)\n"
            "  --experts E --topk K --expert-hidden I   MoE (default 8, 2, 4*hidden)\n"
            "  --batch B --seq S    B sequences of S tokens per step (default 32 x 1024)\n"
            "  --steps N --warmup W timed steps after W untimed ones (default 20, 5)\n"
            "Prints one JSON line: impl, model, tokens_per_s, step_ms, mfu, ceiling_tflops,\n"
            "flops_per_token, params_active, device.\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){"dense", NULL, 12, 768, 12, 12, 50304, 0, 8, 2, 0, 32, 1024, 20, 5};
#ifdef HAVE_CUDA
    o->backend = "cuda";
#else
    o->backend = "cpu";
#endif
    static const struct option lo[] = {
        {"backend", 1, 0, 'b'}, {"model", 1, 0, 'm'},      {"layers", 1, 0, 'L'},   {"hidden", 1, 0, 'd'},
        {"heads", 1, 0, 'H'},   {"kv-heads", 1, 0, 'k'},   {"vocab", 1, 0, 'V'},    {"ffn-hidden", 1, 0, 'f'},
        {"experts", 1, 0, 'E'}, {"topk", 1, 0, 'K'},       {"expert-hidden", 1, 0, 'x'},
        {"batch", 1, 0, 'B'},   {"seq", 1, 0, 'S'},        {"steps", 1, 0, 'n'},    {"warmup", 1, 0, 'w'},
        {"help", 0, 0, 'h'},    {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'b': o->backend = optarg; break;
        case 'm': o->model = optarg; break;
        case 'L': o->layers = atoi(optarg); break;
        case 'd': o->hidden = atoi(optarg); break;
        case 'H': o->heads = atoi(optarg); break;
        case 'k': o->kv_heads = atoi(optarg); break;
        case 'V': o->vocab = atoi(optarg); break;
        case 'f': o->ffn_hidden = atoi(optarg); break;
        case 'E': o->experts = atoi(optarg); break;
        case 'K': o->topk = atoi(optarg); break;
        case 'x': o->expert_hidden = atoi(optarg); break;
        case 'B': o->batch = atoi(optarg); break;
        case 'S': o->seq = atoi(optarg); break;
        case 'n': o->steps = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc || o->layers < 1 || o->hidden < 1 || o->heads < 1 || o->kv_heads < 1 ||
        o->heads % o->kv_heads || o->hidden % o->heads || o->vocab < 2 || o->batch < 1 || o->seq < 2 ||
        o->steps < 1 || o->warmup < 0 || (strcmp(o->model, "dense") && strcmp(o->model, "moe")) ||
        (!strcmp(o->model, "moe") && (o->experts < 2 || o->topk < 1 || o->topk > o->experts))) {
        usage(stderr);
        return -1;
    }
    if (!o->ffn_hidden)
        o->ffn_hidden = 4 * o->hidden;
    if (!o->expert_hidden)
        o->expert_hidden = 4 * o->hidden;
    return 0;
}

/* TFLOP/s of n^3 matmuls through the op table (the MFU denominator). */
static double matmul_ceiling(const ops_t *ops, int n, int reps)
{
    const size_t nn = (size_t)n * n;
    float *host = malloc(nn * sizeof *host);
    for (size_t i = 0; i < nn; i++)
        host[i] = fb_uniform_hash(3, i) - 0.5f;
    float *f32 = ops->alloc(nn * sizeof(float));
    ops->to_backend(f32, host, nn * sizeof(float));
    fb_act *a = ops->alloc(nn * ops->act_bytes), *b = ops->alloc(nn * ops->act_bytes);
    fb_act *c = ops->alloc(nn * ops->act_bytes);
    ops->to_act(a, f32, nn);
    ops->to_act(b, f32, nn);
    ops->matmul(c, a, b, n, n, n, 0, 1, 0.0f); /* warm-up: plans, clocks */
    ops->synchronize();
    double t0 = timer_now();
    for (int r = 0; r < reps; r++)
        ops->matmul(c, a, b, n, n, n, 0, 1, 0.0f);
    ops->synchronize();
    double dt = timer_now() - t0;
    ops->release(a);
    ops->release(b);
    ops->release(c);
    ops->release(f32);
    free(host);
    return 2.0 * n * (double)n * n * reps / dt / 1e12;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse(argc, argv, &o) != 0)
        return FB_EXIT_USAGE;
    parallel_init(&argc, &argv);
    const ops_t *ops = ops_cpu();
    char device[128] = "cpu";
    if (!strcmp(o.backend, "cuda")) {
#ifdef HAVE_CUDA
        char err[256];
        if (cuda_backend_init(0, err, sizeof err) != 0)
            fb_fatal(FB_EXIT_USAGE, "--backend cuda: %s", err);
        ops = ops_cuda(FB_DTYPE_BF16);
        snprintf(device, sizeof device, "cuda:0");
#else
        fb_fatal(FB_EXIT_USAGE, "--backend cuda: this build has no CUDA (configure --with-cuda)");
#endif
    } else if (strcmp(o.backend, "cpu")) {
        fb_fatal(FB_EXIT_USAGE, "--backend: \"cpu\" or \"cuda\", not \"%s\"", o.backend);
    }
    const int moe = !strcmp(o.model, "moe");
    model_config_t mc = {
        .vocab_size = o.vocab, .hidden_size = o.hidden,
        .intermediate_size = moe ? o.expert_hidden : o.ffn_hidden, .num_hidden_layers = o.layers,
        .num_attention_heads = o.heads, .num_key_value_heads = o.kv_heads,
        .num_local_experts = moe ? o.experts : 0, .num_experts_per_tok = moe ? o.topk : 0, .moe_layer_freq = 1,
        .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = 0, .router_aux_loss_coef = 0.01,
        .router_z_loss_coef = 0.001, .capacity_factor = 0.0, .expert_dropout = 0.0, .initializer_range = 0.02,
        .max_position_embeddings = o.seq,
    };
    const int T = o.batch * o.seq;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *pos = malloc((size_t)T * sizeof *pos);
    int32_t *tgt = malloc((size_t)T * sizeof *tgt), *cu = malloc(((size_t)o.batch + 1) * sizeof *cu);
    if (!tok || !pos || !tgt || !cu)
        fb_fatal(FB_EXIT_INTERNAL, "out of host memory for a batch of %d tokens", T);
    for (int t = 0; t < T; t++) {
        tok[t] = (int32_t)(fb_hash2(11, (uint64_t)t) % (uint64_t)o.vocab);
        pos[t] = t % o.seq;
    }
    for (int t = 0; t < T; t++)
        tgt[t] = pos[t] + 1 < o.seq ? tok[t + 1] : (int32_t)(fb_hash2(12, (uint64_t)t) % (uint64_t)o.vocab);
    for (int s = 0; s <= o.batch; s++)
        cu[s] = s * o.seq;
    model_input_t in = {tok, pos, tgt, cu, T, o.batch, NULL, 0};

    /* the defaults of a run, with this model and optimizer on one rank at
     * ZeRO stage 0 */
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    cfg.model = mc;
    cfg.optim = (optim_config_t){.adam_w_mode = 1, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                 .weight_decay = 0.1};
    cfg.gradient_clipping = 1.0;
    cfg.zero.stage = 0;
    cfg.zero.offload_optimizer = cfg.zero.offload_param = 0;
    cfg.fp16.enabled = 0;
    cfg.parallel.expert_parallel_size = 1;
    cfg.parallel.moe_a2a_chunks = 1;
    groups_t groups;
    groups_create(&groups, 1, mc.num_local_experts);
    if (ops->device_memory)
        groups_attach_device(&groups);
    zero_t *z = zero_create(&cfg, &groups, ops, T, 1234);
    model_t *m = zero_model(z);
    model_scales_t sc = {.lm_denominator = (double)T, .mb_weight = 1.0, .training = 1};
    double t0 = 0.0, loss = 0.0;
    for (int step = 0; step < o.warmup + o.steps; step++) {
        if (step == o.warmup) {
            ops->synchronize();
            t0 = timer_now();
        }
        model_stats_t st;
        zero_begin_step(z);
        zero_begin_micro(z, 0, 1);
        sc.dropout_seed = (uint64_t)step;
        model_forward(m, &in, &sc, &st);
        model_backward(m);
        zero_end_backward(z);
        loss = model_loss_total(&mc, st.lm_sum / T, st.aux, st.z);
        if (zero_step(z, cfg.optim.lr, loss).status != ZERO_STEP_APPLIED)
            fb_fatal(FB_EXIT_DIVERGED, "step %d: loss %g: training diverged", step, loss);
    }
    ops->synchronize();
    const double dt = (timer_now() - t0) / o.steps;
    const double ceiling = !strcmp(o.backend, "cuda") ? matmul_ceiling(ops, 8192, 20) : matmul_ceiling(ops, 1024, 3);
    /* model_active_params counts matmul weights; the norms are the rest */
    const double n_active = (double)model_active_params(&mc) + (double)model_norm_params(&mc);
    const double fpt = model_flops_per_token(&mc, o.seq, 1);
    const double tps = T / dt;
    printf("{\"impl\": \"fabula\", \"model\": \"%s\", \"tokens_per_s\": %.1f, \"step_ms\": %.3f, \"mfu\": %.4f, "
           "\"ceiling_tflops\": %.1f, \"flops_per_token\": %.0f, \"params_active\": %.0f, \"device\": \"%s\", "
           "\"final_loss\": %.4f}\n",
           o.model, tps, dt * 1e3, tps * fpt / (ceiling * 1e12), ceiling, fpt, n_active, device, loss);
    zero_free(z);
    groups_free(&groups);
    config_free(&cfg);
    free(tok);
    free(pos);
    free(tgt);
    free(cu);
#ifdef HAVE_CUDA
    if (!strcmp(o.backend, "cuda"))
        cuda_backend_shutdown();
#endif
    parallel_finalize();
    return 0;
}
