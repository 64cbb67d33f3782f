#include "build_config.h"

#include "kernels_info.h"

#include <cblas.h>
#include <omp.h>

#ifdef HAVE_CUDA
#include "cuda/cuda_info.h"
#endif

void kernels_print_backends(FILE *f)
{
#ifdef OPENBLAS_VERSION
    const char *blas = openblas_get_config();
#else
    const char *blas = "cblas";
#endif
    fprintf(f, "  backend cpu: fp32 reference, OpenMP max threads %d, BLAS %s\n", omp_get_max_threads(), blas);
#ifdef HAVE_CUDA
    cuda_print_devices(f);
#endif
}

void kernels_cpu_set_threads(int n)
{
    if (n < 1)
        n = 1;
    omp_set_num_threads(n);
#ifdef OPENBLAS_VERSION
    /* The CPU kernels run BLAS on one thread inside their own OpenMP team
     * (docs/cpu-threads.md): a pthreads OpenBLAS (parallel mode 1) gets one
     * thread, not a pool of n spinning beside OpenMP's. An OpenMP OpenBLAS
     * gets n: there the call also sets OpenMP's count, which must stay n. */
    openblas_set_num_threads(openblas_get_parallel() == 1 ? 1 : n);
#endif
}

int kernels_cpu_threads(void) { return omp_get_max_threads(); }
int kernels_cpu_available(void) { return omp_get_num_procs(); }
