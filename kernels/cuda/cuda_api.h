/* The table the CUDA module (fabula-cuda.so, kernels/cuda/cuda_module.cu)
 * hands the binary: every entry point of cuda_backend.h, cuda_info.h and
 * ops_cuda. The binary calls them only through it (cuda_loader.c), so it
 * links no CUDA library. Plain C; no CUDA types. */
#ifndef FABULA_KERNELS_CUDA_API_H
#define FABULA_KERNELS_CUDA_API_H

#include <stddef.h>
#include <stdio.h>

#include "ops.h"

/* The module file, the exported function returning the table, and the
 * table's layout version: a module of another layout is refused. */
#define CUDA_MODULE_FILE "fabula-cuda.so"
#define CUDA_API_SYMBOL "fabula_cuda_api"
#define CUDA_API_VERSION 1

typedef struct cuda_api {
    int version;
    int (*device_count)(void);
    int (*backend_init)(int device, char *err, size_t errlen);
    void (*backend_shutdown)(void);
    int (*backend_device)(void);
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    void *(*compute_stream)(void);
    void *(*comm_stream)(void);
    void (*comm_wait_compute)(void);
    void (*compute_wait_comm)(void);
    size_t (*bytes_in_use)(void);
    size_t (*bytes_peak)(void);
    void (*event_mark)(int slot);
    double (*event_seconds)(int from, int to);
    void (*events_release)(void);
    const ops_t *(*ops)(fb_dtype_t act_dtype);
    void (*print_devices)(FILE *f);
    int (*device_identity)(int dev, char *name, size_t name_len, char *pci, size_t pci_len, int *major,
                           int *minor);
} cuda_api_t;

typedef const cuda_api_t *(*cuda_api_fn)(void);

#endif
