/* The table the device comm module (fabula-comm.so: comm_device.c,
 * comm_device_stage.c and comm_device_module.c) hands the binary; the
 * binary calls the device comms only through it (comm_device_load.c), so
 * it links neither NCCL nor cudart. Private to src/parallel. */
#ifndef FABULA_PARALLEL_COMM_DEVICE_API_H
#define FABULA_PARALLEL_COMM_DEVICE_API_H

#include "parallel/comm.h"

/* The module file, its exported function returning the table, and the
 * table's layout version. */
#define COMM_DEVICE_MODULE_FILE "fabula-comm.so"
#define COMM_DEVICE_API_SYMBOL "fabula_comm_device_api"
#define COMM_DEVICE_API_VERSION 1

typedef struct comm_device_api {
    int version;
    comm_t *(*create)(comm_t *host);
    int (*uses_nccl)(const comm_t *c);
    void (*set_force_staging)(int on);
} comm_device_api_t;

typedef const comm_device_api_t *(*comm_device_api_fn)(void);

#endif
