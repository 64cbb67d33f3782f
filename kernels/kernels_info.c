#include "config.h"

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
