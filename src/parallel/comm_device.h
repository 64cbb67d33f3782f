/* Private to the device backends of the comm API: comm_device.c (creation
 * and NCCL) and comm_device_stage.c (MPI through pinned host staging). With
 * those two files, the only part of src/parallel that includes CUDA and
 * NCCL headers; built only with CUDA. */
#ifndef FABULA_PARALLEL_COMM_DEVICE_H
#define FABULA_PARALLEL_COMM_DEVICE_H

#include "build_config.h"

#include <cuda_runtime.h>
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "parallel/comm_internal.h"
#include "util/error.h"

/* CHECK_NCCL: on failure, file, line, the call's text and NCCL's message,
 * then the job ends with FB_EXIT_INTERNAL (as CHECK_CUDA does). */
#ifdef HAVE_NCCL
#define CHECK_NCCL(call)                                                                          \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess)                                                                    \
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, #call, ncclGetErrorString(r_));    \
    } while (0)
#endif

/* A pinned host buffer of a staging comm; busy while a request uses it. */
typedef struct stage_slot {
    char *p;
    size_t cap;
    int busy;
} stage_slot_t;

/* A host-to-device copy a staged request owes at completion. */
typedef struct stage_copy {
    void *dst;
    const char *src;
    size_t bytes;
} stage_copy_t;

struct comm_device {
#ifdef HAVE_NCCL
    ncclComm_t nccl; /* NCCL path */
#endif
    /* Staging path: a host comm sharing the device comm's MPI communicator
     * (which it does not own), and the pool of pinned buffers. */
    comm_t *host;
    stage_slot_t *slots;
    int nslots;
};

struct comm_device_request {
    cudaEvent_t done; /* NCCL: recorded on the comm stream after the operation */
    /* Staging: the host collective on slot `slot`, and what it owes back. */
    comm_request_t *inner;
    int slot;
    stage_copy_t *copies;
    int ncopies, copied;
};

static inline cudaStream_t comm_device_compute_stream(void) { return (cudaStream_t)cuda_compute_stream(); }
static inline cudaStream_t comm_device_comm_stream(void) { return (cudaStream_t)cuda_comm_stream(); }

/* Makes c (a fresh device comm, c->device allocated) a staging comm. */
void comm_stage_init(comm_t *c);

#endif
