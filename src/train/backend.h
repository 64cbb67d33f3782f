/* The op table a run computes with (run.backend, docs/config.md) and, on
 * CUDA, the GPU this rank binds: local rank modulo the visible devices. */
#ifndef FABULA_TRAIN_BACKEND_H
#define FABULA_TRAIN_BACKEND_H

#include "config/config.h"
#include "ops.h"

typedef struct backend {
    const ops_t *ops;
    int cuda;           /* 1: the CUDA backend is bound */
    int device;         /* the GPU of this rank, or -1 */
    int shared_device;  /* several ranks of this node share a GPU (device comms stage through the host) */
} backend_t;

/* Collective over all processes: every rank chooses the same kind of
 * backend. "cuda" without a build with CUDA or without a visible device is
 * a config error (exit 2); "auto" takes CUDA when every rank sees a device.
 * The compute dtype is fp16 with fp16.enabled, bf16 otherwise. */
void backend_open(backend_t *b, const config_t *cfg);
void backend_close(backend_t *b);

#endif
