/* The CUDA backend's plain-C entry points (no CUDA types): device choice,
 * lifetime, pinned host memory and the stream handles the NCCL comm backend
 * orders its work against. The op table itself is ops_cuda() in ops.h.
 *
 * The backend is a module, fabula-cuda.so (docs/cuda.md, "Modules"): in the
 * binary these functions forward to the module's table (cuda_loader.c),
 * loading it on first use; in the module they are the implementation. */
#ifndef FABULA_KERNELS_CUDA_BACKEND_H
#define FABULA_KERNELS_CUDA_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Loads the module (once; later calls return its first outcome): 0, or -1
 * with "cannot load module PATH: dlerror()" (or why the module is not
 * usable) in err. Every other function here loads it on first use and
 * ends the job (exit 2) with that message when it cannot. */
int cuda_module_load(char *err, size_t errlen);

/* 1 when the NVIDIA kernel driver shows a GPU (/proc/driver/nvidia/gpus/
 * or a /dev/nvidiaN node): a cheap test that maps no CUDA library, so that
 * run.backend "auto" loads the module only where a device may be. */
int cuda_driver_present(void);

/* Visible CUDA devices; 0 when there is none, no usable driver, or the
 * module cannot be loaded. */
int cuda_device_count(void);

/* Binds the calling process to `device`, creates the compute and
 * communication streams, the cuBLASLt handle and its workspace. Returns 0,
 * or -1 with a message in err. Idempotent for the same device. */
int cuda_backend_init(int device, char *err, size_t errlen);
/* Releases what init created (the op tables stay valid until then). */
void cuda_backend_shutdown(void);
/* The device init bound, or -1. */
int cuda_backend_device(void);

/* Page-locked host memory (for staging and optimizer offload); zero-filled,
 * never NULL (fails the job). */
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);

/* Opaque cudaStream_t handles. */
void *cuda_compute_stream(void);
void *cuda_comm_stream(void);

/* Orders the two streams: the comm stream waits for all work issued so far
 * on the compute stream, or the other way round. */
void cuda_comm_wait_compute(void);
void cuda_compute_wait_comm(void);

/* Bytes of device memory allocated through the op table now, and at most
 * so far. */
size_t cuda_bytes_in_use(void);
size_t cuda_bytes_peak(void);

/* Timing events on the compute stream (the monitor's device phases,
 * kernels/cuda/cuda_events.cu): cuda_event_mark records event `slot`
 * (0 <= slot < CUDA_EVENT_SLOTS) in stream order; cuda_event_seconds waits
 * for event `to` and returns the device time from `from` to `to` in
 * seconds, or -1 when either was never recorded. cuda_backend_shutdown
 * releases them. */
#define CUDA_EVENT_SLOTS 512
void cuda_event_mark(int slot);
double cuda_event_seconds(int from, int to);
void cuda_events_release(void);

#ifdef __cplusplus
}
#endif

#endif
