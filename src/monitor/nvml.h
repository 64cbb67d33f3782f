/* NVIDIA's management library, loaded at run time with
 * dlopen("libnvidia-ml.so.1"): the binary has no link dependency on it and
 * runs where no driver is installed (one line says so, and the GPU fields
 * are left out). Readings of this rank's GPU, for the gather at each
 * print step (docs/monitoring.md, "NVML"). */
#ifndef FABULA_MONITOR_NVML_H
#define FABULA_MONITOR_NVML_H

typedef struct nvml_sample {
    double util;        /* % of the last sample period with a kernel running */
    double mem_used;    /* bytes in use on the device (every process) */
    double mem_total;   /* bytes */
    double temp_c;      /* GPU core, degrees Celsius */
    double power_w;     /* board power draw, W */
    double sm_mhz;      /* SM clock now, MHz */
} nvml_sample_t;

/* Loads the library and finds the device with PCI bus id `pci_bus_id`
 * (as cudaDeviceGetPCIBusId writes it). Returns 1, or 0 with one line
 * "fabula: NVML: ...; no GPU counters" printed when `verbose`. */
int nvml_open(const char *pci_bus_id, int verbose);
/* 1 while nvml_open succeeded. */
int nvml_available(void);
/* Reads the device; a field NVML cannot give is -1. Returns 0 when NVML is
 * not open. */
int nvml_read(nvml_sample_t *s);
void nvml_close(void);

#endif
