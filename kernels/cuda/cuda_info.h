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

#ifdef __cplusplus
}
#endif

#endif
