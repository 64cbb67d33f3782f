/* One thread pool: every BLAS call of the CPU kernels runs on the thread
 * that makes it, and all the parallelism is fabula's own OpenMP (matmul.c
 * splits a GEMM into blocks of C, the grouped matmuls share experts out).
 *
 * Why not let OpenBLAS thread: a pthreads OpenBLAS keeps its own pool, whose
 * threads spin after each call while libgomp's spin after each parallel
 * region, so the two fight for the same cores; and on Debian's build a GEMM
 * split by OpenBLAS's threads does not give the bits of the same GEMM on one
 * thread (measured: 500x128x96 sgemm, 1 vs 2 threads), so results would
 * follow the thread count. A GEMM cut into blocks of C rows (or columns)
 * at multiples of 64, each block on one thread, gives the one-thread bits
 * (tests/unit/test_ops_cpu checks it at 1/2/3 threads).
 *
 * A pthreads OpenBLAS is told one thread once; an OpenMP OpenBLAS needs no
 * telling (inside an active parallel region it stays on the caller; and
 * openblas_set_num_threads() there would also set OpenMP's thread count),
 * so matmul.c only ever calls it from inside one. Any other CBLAS is
 * assumed single-threaded. */
#ifndef FABULA_KERNELS_CPU_BLAS_THREADS_H
#define FABULA_KERNELS_CPU_BLAS_THREADS_H

#include "build_config.h"

#include <cblas.h>

/* Call outside parallel regions. */
static inline void cpu_blas_pin_serial(void)
{
#if defined(HAVE_OPENBLAS_GET_PARALLEL) && defined(HAVE_OPENBLAS_SET_NUM_THREADS)
    if (openblas_get_parallel() == 1 && openblas_get_num_threads() > 1) /* 1: the pthreads build */
        openblas_set_num_threads(1);
#endif
}

static inline int cpu_blas_is_openmp(void)
{
#ifdef HAVE_OPENBLAS_GET_PARALLEL
    return openblas_get_parallel() == 2;
#else
    return 0;
#endif
}

#endif
