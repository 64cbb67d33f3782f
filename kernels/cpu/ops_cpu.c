/* The CPU backend's op table: host memory plus the fp32 kernels. */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "util/error.h"

/* 64 bytes: a cache line, and the widest SIMD load (AVX-512). */
#define CPU_ALIGN 64

static void *cpu_alloc(size_t bytes)
{
    size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (n < bytes) /* rounding wrapped around */
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "posix_memalign", "allocation size overflow");
    void *p = NULL;
    int rc = posix_memalign(&p, CPU_ALIGN, n ? n : CPU_ALIGN);
    if (rc != 0)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "posix_memalign", strerror(rc));
    memset(p, 0, n);
    return p;
}

static void cpu_release(void *p) { free(p); }

static void cpu_zero(void *p, size_t bytes)
{
    if (bytes)
        memset(p, 0, bytes);
}

/* Backend and host memory are the same on the CPU: every transfer is a copy. */
static void cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
}

/* Every CPU op has finished (its OpenMP regions joined, BLAS returned) by the
 * time it returns, so there is never outstanding work to wait for. */
static void cpu_synchronize(void) {}

static const ops_t cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .to_backend = cpu_copy,
    .to_host = cpu_copy,
    .synchronize = cpu_synchronize,
    .matmul = cpu_matmul_f32,
    .axpy = cpu_axpy_f32,
    .scale = cpu_scale_f32,
    .sumsq = cpu_sumsq_f32,
    .embedding_fwd = cpu_embedding_fwd_f32,
    .embedding_bwd = cpu_embedding_bwd_f32,
    .rmsnorm_fwd = cpu_rmsnorm_fwd_f32,
    .rmsnorm_bwd = cpu_rmsnorm_bwd_f32,
    .rope_fwd = cpu_rope_fwd_f32,
    .rope_bwd = cpu_rope_bwd_f32,
    .attention_fwd = cpu_attention_fwd_f32,
    .attention_bwd = cpu_attention_bwd_f32,
    .swiglu_fwd = cpu_swiglu_fwd_f32,
    .swiglu_bwd = cpu_swiglu_bwd_f32,
    .cross_entropy = cpu_cross_entropy_f32,
    .router_fwd = cpu_router_fwd_f32,
    .router_bwd = cpu_router_bwd_f32,
    .permute_fwd = cpu_permute_fwd_f32,
    .permute_bwd = cpu_permute_bwd_f32,
    .combine_fwd = cpu_combine_fwd_f32,
    .combine_bwd = cpu_combine_bwd_f32,
    .gmm_fwd = cpu_gmm_fwd_f32,
    .gmm_bwd_data = cpu_gmm_bwd_data_f32,
    .gmm_bwd_weight = cpu_gmm_bwd_weight_f32,
    .dropout_fwd = cpu_dropout_fwd_f32,
    .dropout_bwd = cpu_dropout_bwd_f32,
    .adamw = cpu_adamw_f32,
};

const ops_t *ops_cpu(void) { return &cpu_ops; }
