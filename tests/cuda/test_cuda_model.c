/* The whole model on the CUDA backend, ops_cuda(bf16) and ops_cuda(fp16),
 * against fp32 on the CPU: tests/model_compare.c's comparison, which
 * tests/unit/test_model16.c runs on ops_cpu16 without a GPU.
 *
 * Per dtype and model (dense GQA; MoE top-2 of 4 dropless; MoE with tied
 * embeddings and expert dropout), one forward and backward on the same
 * packed micro-batch, on the GPU and on ops_cpu(). The fp32 run gets the
 * master weights rounded to the dtype, what the GPU's 16-bit compute copy
 * of them holds: otherwise the comparison would measure the gradients'
 * sensitivity to the weights, not the backend's arithmetic. The MoE models
 * route on a token class built into the embeddings and routers, with a
 * margin far above rounding: on the random initial router rounding sends a
 * few tokens to other experts than fp32 does, a discrete change (an
 * expert's gradient moves by O(1/sqrt(rows)), expert dropout re-draws its
 * masks) that no tolerance separates from a bug. The per-sample routing
 * choices must then be equal.
 *
 * Bounds, from rounding (derivation in model_compare.c): the loss parts,
 * the kept logits and all gradients together within 1e-2 relative at bf16
 * and 1e-2 / 8 at fp16 (3 more mantissa bits), each gradient tensor
 * within 8 eps of the dtype (the unit roundoff 2^-8 or 2^-11: 3.1e-2 and
 * 3.9e-3), since the worst conditioned tensors (q/k projections, some norm
 * weights) measure 4-5 eps on ops_cpu16, where every op rounds its 16-bit
 * outputs once and accumulates in fp32. The fp16 runs
 * use a loss scale of 2^16, as fp16 training starts with, so the output
 * gradients stay in fp16's normal range.
 *
 * Exit 77 without a CUDA device. */
#include <stdio.h>

#include "../model_compare.h"
#include "cuda/cuda_backend.h"
#include "ops.h"

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
    int fails = model_compare_vs_fp32(ops_cuda(FB_DTYPE_BF16), FB_DTYPE_BF16);
    fails += model_compare_vs_fp32(ops_cuda(FB_DTYPE_F16), FB_DTYPE_F16);
    cuda_backend_shutdown();
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
