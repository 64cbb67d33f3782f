#include <cuda_runtime.h>

#include "cuda_info.h"

extern "C" void cuda_print_devices(FILE *f)
{
    int runtime = 0, driver = 0, count = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cudaError_t err = cudaGetDeviceCount(&count);
    fprintf(f, "  backend cuda: runtime %d.%d, driver %d.%d\n", runtime / 1000, (runtime % 1000) / 10,
            driver / 1000, (driver % 1000) / 10);
    if (err != cudaSuccess) {
        fprintf(f, "    no usable GPU: %s\n", cudaGetErrorString(err));
        return;
    }
    for (int i = 0; i < count; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
            fprintf(f, "    device %d: properties unavailable\n", i);
            continue;
        }
        fprintf(f, "    device %d: %s, sm_%d%d, %.1f GiB, %d SMs\n", i, p.name, p.major, p.minor,
                (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount);
    }
}
