/* What the CUDA runtime sees: used by `fabula --version` so a job script can
 * log which GPUs a rank found. Plain C interface; no CUDA types. */
#ifndef FABULA_KERNELS_CUDA_INFO_H
#define FABULA_KERNELS_CUDA_INFO_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints one line per visible device, or why there is none. */
void cuda_print_devices(FILE *f);

/* Name and PCI bus id ("0000:3b:00.0", as NVML takes it) of device `dev`,
 * and its compute capability. 0, or -1 when the runtime cannot say. */
int cuda_device_identity(int dev, char *name, size_t name_len, char *pci, size_t pci_len, int *major, int *minor);

#ifdef __cplusplus
}
#endif

#endif
