/* The binary's side of the CUDA module: loads fabula-cuda.so on first use
 * and forwards every entry point of cuda_backend.h and cuda_info.h (and
 * ops_cuda) to its table. Plain C: the binary links no CUDA library, so a
 * CPU run never maps cudart, cuBLAS or cuBLASLt. */
#include "cuda_backend.h"
#include "cuda_info.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cuda_api.h"
#include "fb_module.h"
#include "util/error.h"

static const cuda_api_t *g_api;
static fb_module_once_t g_module;

/* dlsym hands back an object pointer; POSIX guarantees that it converts
 * to the function pointer it names. */
static const void *call_entry(void *entry)
{
    cuda_api_fn get;
    memcpy(&get, &entry, sizeof get);
    return get();
}

int cuda_module_load(char *err, size_t errlen)
{
    const int rc = fb_module_load_once(&g_module, CUDA_MODULE_FILE, CUDA_API_SYMBOL, call_entry, CUDA_API_VERSION,
                                       err, errlen);
    g_api = g_module.table;
    return rc;
}

/* The table, loading it first; without it the job cannot go on. */
static const cuda_api_t *api(void)
{
    if (!g_api && cuda_module_load(NULL, 0) != 0)
        fb_fatal(FB_EXIT_USAGE, "CUDA backend: %s", g_module.err);
    return g_api;
}

/* "nvidia" followed by digits only: the per-GPU nodes, not nvidiactl or
 * nvidia-uvm. */
static int is_gpu_node(const char *name)
{
    if (strncmp(name, "nvidia", 6) != 0 || name[6] == '\0')
        return 0;
    for (const char *p = name + 6; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static int dir_has(const char *path, int (*match)(const char *))
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        found = e->d_name[0] != '.' && (!match || match(e->d_name));
    closedir(d);
    return found;
}

int cuda_driver_present(void) { return dir_has("/proc/driver/nvidia/gpus", NULL) || dir_has("/dev", is_gpu_node); }

int cuda_device_count(void)
{
    if (cuda_module_load(NULL, 0) != 0)
        return 0;
    return g_api->device_count();
}

int cuda_backend_init(int device, char *err, size_t errlen)
{
    if (cuda_module_load(err, errlen) != 0)
        return -1;
    return g_api->backend_init(device, err, errlen);
}

/* Nothing was bound without the module: nothing to release. */
void cuda_backend_shutdown(void)
{
    if (g_api)
        g_api->backend_shutdown();
}

int cuda_backend_device(void) { return g_api ? g_api->backend_device() : -1; }
void *cuda_host_alloc(size_t bytes) { return api()->host_alloc(bytes); }
void cuda_host_free(void *p)
{
    if (p)
        api()->host_free(p);
}
void *cuda_compute_stream(void) { return api()->compute_stream(); }
void *cuda_comm_stream(void) { return api()->comm_stream(); }
void cuda_comm_wait_compute(void) { api()->comm_wait_compute(); }
void cuda_compute_wait_comm(void) { api()->compute_wait_comm(); }
size_t cuda_bytes_in_use(void) { return g_api ? g_api->bytes_in_use() : 0; }
size_t cuda_bytes_peak(void) { return g_api ? g_api->bytes_peak() : 0; }
void cuda_event_mark(int slot) { api()->event_mark(slot); }
double cuda_event_seconds(int from, int to) { return g_api ? g_api->event_seconds(from, to) : -1.0; }
void cuda_events_release(void)
{
    if (g_api)
        g_api->events_release();
}
const ops_t *ops_cuda(fb_dtype_t act_dtype) { return api()->ops(act_dtype); }

/* `fabula --version` says why there is no CUDA line rather than failing. */
void cuda_print_devices(FILE *f)
{
    char err[4400];
    if (cuda_module_load(err, sizeof err) != 0) {
        fprintf(f, "  backend cuda: not available: %s\n", err);
        return;
    }
    g_api->print_devices(f);
}

int cuda_device_identity(int dev, char *name, size_t name_len, char *pci, size_t pci_len, int *major, int *minor)
{
    if (cuda_module_load(NULL, 0) != 0)
        return -1;
    return g_api->device_identity(dev, name, name_len, pci, pci_len, major, minor);
}
