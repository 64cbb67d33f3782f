/* The one visible symbol of fabula-cuda.so (everything else is compiled
 * with hidden visibility): the table of the backend's entry points. */
#include "cuda_backend.h"
#include "cuda_info.h"

extern "C" {
#include "cuda_api.h"
}

static const cuda_api_t g_api = {
    CUDA_API_VERSION,
    cuda_device_count,
    cuda_backend_init,
    cuda_backend_shutdown,
    cuda_backend_device,
    cuda_host_alloc,
    cuda_host_free,
    cuda_compute_stream,
    cuda_comm_stream,
    cuda_comm_wait_compute,
    cuda_compute_wait_comm,
    cuda_bytes_in_use,
    cuda_bytes_peak,
    cuda_event_mark,
    cuda_event_seconds,
    cuda_events_release,
    ops_cuda,
    cuda_print_devices,
    cuda_device_identity,
};

extern "C" __attribute__((visibility("default"))) const cuda_api_t *fabula_cuda_api(void) { return &g_api; }
