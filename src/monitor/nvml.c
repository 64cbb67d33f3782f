/* The few NVML entry points fabula reads, declared here from NVML's
 * documented C API (nvml.h is not needed at build time): every function
 * returns an int status, 0 = NVML_SUCCESS; a device is an opaque pointer. */
#include "monitor/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void *nvml_device_t;
typedef struct { unsigned int gpu, memory; } nvml_utilization_t;
typedef struct { unsigned long long total, free, used; } nvml_memory_t;

enum { NVML_TEMPERATURE_GPU = 0, NVML_CLOCK_SM = 1 };

static struct {
    void *lib;
    nvml_device_t dev;
    int (*init)(void);
    int (*shutdown)(void);
    int (*by_pci)(const char *, nvml_device_t *);
    int (*util)(nvml_device_t, nvml_utilization_t *);
    int (*mem)(nvml_device_t, nvml_memory_t *);
    int (*temp)(nvml_device_t, int, unsigned int *);
    int (*power)(nvml_device_t, unsigned int *);
    int (*clock)(nvml_device_t, int, unsigned int *);
    int open;
} nv;

/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
#define NVML_SYM(field, name)                                                                                  \
    do {                                                                                                       \
        *(void **)(&nv.field) = dlsym(nv.lib, name);                                                           \
        if (!nv.field) {                                                                                       \
            why = "symbol " name " missing";                                                                  \
            goto fail;                                                                                         \
        }                                                                                                      \
    } while (0)

int nvml_open(const char *pci_bus_id, int verbose)
{
    const char *why = NULL;
    char detail[160];
    if (nv.open)
        return 1;
    nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        why = "libnvidia-ml.so.1 not found (no NVIDIA driver here)";
        goto fail;
    }
    NVML_SYM(init, "nvmlInit_v2");
    NVML_SYM(shutdown, "nvmlShutdown");
    NVML_SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    NVML_SYM(util, "nvmlDeviceGetUtilizationRates");
    NVML_SYM(mem, "nvmlDeviceGetMemoryInfo");
    NVML_SYM(temp, "nvmlDeviceGetTemperature");
    NVML_SYM(power, "nvmlDeviceGetPowerUsage");
    NVML_SYM(clock, "nvmlDeviceGetClockInfo");
    int rc = nv.init();
    if (rc != 0) {
        snprintf(detail, sizeof detail, "nvmlInit_v2 failed (NVML status %d)", rc);
        why = detail;
        goto fail;
    }
    rc = nv.by_pci(pci_bus_id ? pci_bus_id : "", &nv.dev);
    if (rc != 0) {
        nv.shutdown();
        snprintf(detail, sizeof detail, "no NVML device at PCI bus id %.40s (NVML status %d)",
                 pci_bus_id ? pci_bus_id : "(none)", rc);
        why = detail;
        goto fail;
    }
    nv.open = 1;
    return 1;
fail:
    if (verbose)
        printf("fabula: NVML: %s; no GPU counters\n", why);
    if (nv.lib)
        dlclose(nv.lib);
    memset(&nv, 0, sizeof nv);
    return 0;
}

int nvml_available(void) { return nv.open; }

int nvml_read(nvml_sample_t *s)
{
    s->util = s->mem_used = s->mem_total = s->temp_c = s->power_w = s->sm_mhz = -1.0;
    if (!nv.open)
        return 0;
    nvml_utilization_t u;
    nvml_memory_t m;
    unsigned int v;
    if (nv.util(nv.dev, &u) == 0)
        s->util = u.gpu;
    if (nv.mem(nv.dev, &m) == 0) {
        s->mem_used = (double)m.used;
        s->mem_total = (double)m.total;
    }
    if (nv.temp(nv.dev, NVML_TEMPERATURE_GPU, &v) == 0)
        s->temp_c = v;
    if (nv.power(nv.dev, &v) == 0)
        s->power_w = v / 1000.0; /* NVML reports milliwatts */
    if (nv.clock(nv.dev, NVML_CLOCK_SM, &v) == 0)
        s->sm_mhz = v;
    return 1;
}

void nvml_close(void)
{
    if (!nv.open)
        return;
    nv.shutdown();
    dlclose(nv.lib);
    memset(&nv, 0, sizeof nv);
}
