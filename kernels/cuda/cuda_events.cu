// Timing events on the compute stream, for the monitor's device phases
// (docs/monitoring.md): created on first use, released at shutdown.
#include <cuda_runtime.h>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "cuda_common.cuh"

static cudaEvent_t g_events[CUDA_EVENT_SLOTS];
static int g_made[CUDA_EVENT_SLOTS];

extern "C" void cuda_event_mark(int slot)
{
    if (slot < 0 || slot >= CUDA_EVENT_SLOTS)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cuda_event_mark", "slot out of range");
    if (!g_made[slot]) {
        CHECK_CUDA(cudaEventCreate(&g_events[slot]));
        g_made[slot] = 1;
    }
    CHECK_CUDA(cudaEventRecord(g_events[slot], cuda_stream()));
}

extern "C" double cuda_event_seconds(int from, int to)
{
    if (from < 0 || to < 0 || from >= CUDA_EVENT_SLOTS || to >= CUDA_EVENT_SLOTS || !g_made[from] || !g_made[to])
        return -1.0;
    CHECK_CUDA(cudaEventSynchronize(g_events[to]));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, g_events[from], g_events[to]));
    return ms * 1e-3;
}

extern "C" void cuda_events_release(void)
{
    for (int i = 0; i < CUDA_EVENT_SLOTS; i++)
        if (g_made[i]) {
            CHECK_CUDA(cudaEventDestroy(g_events[i]));
            g_made[i] = 0;
        }
}
