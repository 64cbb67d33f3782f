#include <cuda_runtime.h>
#include <string.h>

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

extern "C" int cuda_device_identity(int dev, char *name, size_t name_len, char *pci, size_t pci_len, int *major,
                                    int *minor)
{
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return -1;
    snprintf(name, name_len, "%s", p.name);
    *major = p.major;
    *minor = p.minor;
    if (cudaDeviceGetPCIBusId(pci, (int)pci_len, dev) != cudaSuccess)
        pci[0] = '\0';
    return 0;
}
