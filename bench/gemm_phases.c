/* fabula-gemm-phases: the rate of a model's GEMM phases against the sgemm
 * peak, the CPU-speed issue's "GEMM phases >= 80% of the measured sgemm
 * peak" measured rather than bounded by the whole step's MFU.
 *
 * One process, the CPU op table with its GEMM entries (matmul, matmul_f32:
 * the attention projections, the dense FFN, the router and the LM head;
 * gmm_fwd, gmm_bwd_data, gmm_bwd_weight: the experts) wrapped by a timer
 * that adds each call's seconds and FLOPs (2 M N K; the experts' rows are
 * the offsets' span). The config's model runs forward + backward over one
 * micro-batch (train_micro_batch_size_per_gpu samples of data.seq_len
 * random tokens, packed), `--steps` times after one untimed pass. The
 * attention core (kernels/cpu/attention.c) calls its BLAS itself and is
 * not a GEMM phase here. The peak is peak_flops_cpu, the figure train's
 * MFU divides by (monitor.peak_flops; bench/README.md), the best of one
 * measurement after each timed pass.
 *
 *   OMP_NUM_THREADS=T bench/fabula-gemm-phases CONFIG.json [--set K=V]... [--steps N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/model.h"
#include "util/timer.h"
#include "ops.h"
#include "parallel/world.h"
#include "rng.h"
#include "train/step_monitor.h"
#include "util/error.h"

enum { K_MATMUL, K_MATMUL_F32, K_GMM_FWD, K_GMM_BWD_DATA, K_GMM_BWD_WEIGHT, K_N };
static const char *const kind_name[K_N] = {"matmul", "matmul_f32", "gmm_fwd", "gmm_bwd_data", "gmm_bwd_weight"};

static const ops_t *base;
static struct {
    long calls;
    double seconds, flops;
} stat[K_N];
static int counting;

static void add(int k, double t0, double flops)
{
    if (!counting)
        return;
    stat[k].calls++;
    stat[k].seconds += timer_now() - t0;
    stat[k].flops += flops;
}

static void w_matmul(fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb, float beta)
{
    const double t0 = timer_now();
    base->matmul(C, A, B, M, N, K, ta, tb, beta);
    add(K_MATMUL, t0, 2.0 * M * N * (double)K);
}

static void w_matmul_f32(float *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb,
                         float beta)
{
    const double t0 = timer_now();
    base->matmul_f32(C, A, B, M, N, K, ta, tb, beta);
    add(K_MATMUL_F32, t0, 2.0 * M * N * (double)K);
}

static double gmm_flops(const int32_t *off, int E, int N, int K)
{
    return 2.0 * (double)(off[E] - off[0]) * N * (double)K;
}

static void w_gmm_fwd(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *off, int E, int N, int K)
{
    const double t0 = timer_now();
    base->gmm_fwd(Y, X, W, off, E, N, K);
    add(K_GMM_FWD, t0, gmm_flops(off, E, N, K));
}

static void w_gmm_bwd_data(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *off, int E, int N, int K)
{
    const double t0 = timer_now();
    base->gmm_bwd_data(dX, dY, W, off, E, N, K);
    add(K_GMM_BWD_DATA, t0, gmm_flops(off, E, N, K));
}

static void w_gmm_bwd_weight(float *dW, const fb_act *dY, const fb_act *X, const int32_t *off, int E, int N, int K)
{
    const double t0 = timer_now();
    base->gmm_bwd_weight(dW, dY, X, off, E, N, K);
    add(K_GMM_BWD_WEIGHT, t0, gmm_flops(off, E, N, K));
}

static void usage(FILE *f)
{
    fprintf(f, "usage: OMP_NUM_THREADS=T fabula-gemm-phases CONFIG.json [--set KEY=VALUE]... [--steps N]\n"
               "The GEMM phases' GFLOP/s (the model's matmul and expert grouped-matmul calls, forward\n"
               "and backward of one micro-batch of random tokens) against the sgemm peak train's MFU\n"
               "uses; --steps timed passes after one untimed (default 5).\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"set", required_argument, 0, 's'}, {"steps", required_argument, 0, 'n'},
                                       {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int nsets = 0, steps = 5, c;
    if (!sets)
        return FB_EXIT_INTERNAL;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 's': sets[nsets++] = optarg; break;
        case 'n': steps = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return FB_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || steps < 1) {
        usage(stderr);
        return FB_EXIT_USAGE;
    }
    parallel_init(&argc, &argv);
    const char *path = argv[optind];
    config_t cfg;
    config_load(&cfg, &path, 1, sets, nsets, 1, 0);
    const model_config_t *mc = &cfg.model;

    base = ops_cpu();
    ops_t timed = *base;
    timed.matmul = w_matmul;
    timed.matmul_f32 = w_matmul_f32;
    timed.gmm_fwd = w_gmm_fwd;
    timed.gmm_bwd_data = w_gmm_bwd_data;
    timed.gmm_bwd_weight = w_gmm_bwd_weight;

    const int S = cfg.data.seq_len, B = cfg.micro_batch, T = S * B;
    int32_t *tok = fb_malloc((size_t)T * sizeof *tok), *pos = fb_malloc((size_t)T * sizeof *pos);
    int32_t *tgt = fb_malloc((size_t)T * sizeof *tgt), *cu = fb_malloc(((size_t)B + 1) * sizeof *cu);
    for (int t = 0; t < T; t++) {
        tok[t] = (int32_t)(fb_hash2(21, (uint64_t)t) % (uint64_t)mc->vocab_size);
        pos[t] = t % S;
    }
    for (int t = 0; t < T; t++)
        tgt[t] = pos[t] + 1 < S ? tok[t + 1] : -1;
    for (int s = 0; s <= B; s++)
        cu[s] = s * S;
    model_input_t in = {tok, pos, tgt, cu, T, B, NULL, 0};
    model_t *m = model_create(mc, &timed, T);
    model_init_weights(m, cfg.run.seed);
    model_scales_t sc = {.lm_denominator = (double)T, .mb_weight = 1.0, .training = 1};
    model_stats_t st;
    /* the peak measured between the passes, the best of them: a VM whose
     * speed drifts by 10-20% over a minute moves both alike */
    double pass_s = 0, peak = 0;
    for (int i = -1; i < steps; i++) {
        counting = i >= 0;
        model_zero_grads(m);
        const double t0 = timer_now();
        model_forward(m, &in, &sc, &st);
        model_backward(m);
        if (!counting)
            continue;
        pass_s += timer_now() - t0;
        counting = 0;
        const double p = peak_flops_cpu(0.3);
        peak = p > peak ? p : peak;
    }

    double gs = 0, gf = 0;
    printf("fabula-gemm-phases: %s, %d x %d tokens, %d layers x %d hidden, %d experts top-%d, %d steps, "
           "OMP_NUM_THREADS=%s\n", path, B, S, mc->num_hidden_layers, mc->hidden_size, mc->num_local_experts,
           mc->num_experts_per_tok, steps, getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "unset");
    printf("%-16s %8s %10s %10s %9s %8s\n", "op", "calls", "GFLOP", "seconds", "GFLOP/s", "of peak");
    for (int k = 0; k < K_N; k++) {
        if (!stat[k].calls)
            continue;
        gs += stat[k].seconds;
        gf += stat[k].flops;
        printf("%-16s %8ld %10.3f %10.4f %9.1f %7.1f%%\n", kind_name[k], stat[k].calls, stat[k].flops / 1e9,
               stat[k].seconds, stat[k].flops / stat[k].seconds / 1e9, 100 * stat[k].flops / stat[k].seconds / peak);
    }
    printf("%-16s %8s %10.3f %10.4f %9.1f %7.1f%%\n", "GEMM phases", "", gf / 1e9, gs, gf / gs / 1e9,
           100 * gf / gs / peak);
    printf("sgemm peak %.1f GFLOP/s (peak_flops_cpu, best after each pass); GEMM phases %.1f%% of forward + backward time (%.4f s a pass)\n",
           peak / 1e9, 100 * gs / pass_s, pass_s / steps);
    model_free(m);
    free(tok);
    free(pos);
    free(tgt);
    free(cu);
    free(sets);
    config_free(&cfg);
    parallel_finalize();
    return 0;
}
