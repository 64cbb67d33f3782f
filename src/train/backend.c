/* Backend choice and GPU binding (docs/cuda.md, "Devices"). */
#include "build_config.h"

#include "train/backend.h"

#include <string.h>

#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

#ifdef HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

/* The smallest device count any rank sees: "auto" must pick the same
 * backend everywhere, or the collectives of ZeRO would not line up. */
static int min_devices_over_ranks(int mine)
{
    int n = mine;
    comm_allreduce(comm_world(), &n, 1, COMM_I32, COMM_MIN);
    return n;
}

void backend_open(backend_t *b, const config_t *cfg)
{
    memset(b, 0, sizeof *b);
    b->device = -1;
    b->ops = ops_cpu();
    int want = cfg->run.backend;
#ifdef HAVE_CUDA
    /* The CUDA module (cudart, cuBLASLt) is loaded only for a run that may
     * use it: "auto" on a node without an NVIDIA driver stays CPU-only
     * without mapping a CUDA library. */
    int ndev = 0;
    char err[4400];
    if (want == RUN_BACKEND_CUDA || (want == RUN_BACKEND_AUTO && cuda_driver_present())) {
        if (cuda_module_load(err, sizeof err) == 0)
            ndev = cuda_device_count();
        else if (want == RUN_BACKEND_CUDA)
            fb_fatal_all(FB_EXIT_USAGE, "run.backend is \"cuda\" but the CUDA backend is not usable: %s", err);
        else
            fb_warn("run.backend \"auto\": a GPU is present but the CUDA backend is not usable (%s); "
                    "computing on the CPU",
                    err);
    }
#else
    const int ndev = 0;
#endif
    const int everywhere = min_devices_over_ranks(ndev);
    if (want == RUN_BACKEND_AUTO)
        want = everywhere > 0 ? RUN_BACKEND_CUDA : RUN_BACKEND_CPU;
    if (want == RUN_BACKEND_CPU)
        return;
    if (want == RUN_BACKEND_CPU16) {
        b->ops = ops_cpu16(cfg->fp16.enabled ? FB_DTYPE_F16 : FB_DTYPE_BF16);
        return;
    }
#ifndef HAVE_CUDA
    fb_fatal_all(FB_EXIT_USAGE, "run.backend is \"cuda\" but this fabula was built without CUDA "
                                "(configure --with-cuda)");
#else
    if (everywhere == 0)
        fb_fatal_all(FB_EXIT_USAGE, "run.backend is \"cuda\" but %s sees no CUDA device",
                     ndev == 0 ? "this rank" : "some rank");
    /* The device comms' module (NCCL) too, before any GPU work: a broken
     * install fails here with the module's path. */
    if (comm_device_module_load(err, sizeof err) != 0)
        fb_fatal_all(FB_EXIT_USAGE, "run.backend is \"cuda\" but the device comms are not usable: %s", err);
    b->device = parallel_local_rank() % ndev;
    b->shared_device = parallel_local_size() > ndev;
    if (cuda_backend_init(b->device, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "CUDA backend: %s", err);
    b->cuda = 1;
    b->ops = ops_cuda(cfg->fp16.enabled ? FB_DTYPE_F16 : FB_DTYPE_BF16);
#endif
}

void backend_close(backend_t *b)
{
#ifdef HAVE_CUDA
    if (b->cuda)
        cuda_backend_shutdown();
#endif
    memset(b, 0, sizeof *b);
    b->device = -1;
}
