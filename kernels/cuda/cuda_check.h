/* CHECK_CUDA and its family: the one check of every CUDA runtime and
 * cuBLASLt call, for the kernels (kernels/cuda) and the device comm backend
 * (src/parallel/comm_device*.c). Plain C and C++. */
#ifndef FABULA_KERNELS_CUDA_CHECK_H
#define FABULA_KERNELS_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "util/error.h"

/* On failure: file, line, the call's text and the library's message, then
 * the job ends with FB_EXIT_INTERNAL. */
#define CHECK_CUDA(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, #call, cudaGetErrorString(e_));    \
    } while (0)

/* After a kernel launch: launch-configuration errors surface here. */
#define CHECK_CUDA_LAUNCH() CHECK_CUDA(cudaGetLastError())

/* Expands only where <cublasLt.h> is included (matmul.cu). */
#define CHECK_CUBLASLT(call)                                                                      \
    do {                                                                                          \
        cublasStatus_t s_ = (call);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, #call, cublasLtGetStatusString(s_)); \
    } while (0)

#endif
