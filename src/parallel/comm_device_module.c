/* The one visible symbol of fabula-comm.so (everything else is compiled
 * with hidden visibility): the device comm's entry points. The module
 * resolves the rest of src/parallel (comm_wrap, the host collectives the
 * staging path uses) and the CUDA backend's functions in the binary, which
 * exports them (-Wl,--export-dynamic), so both share one state. */
#include "parallel/comm_device_api.h"

static const comm_device_api_t api = {
    .version = COMM_DEVICE_API_VERSION,
    .create = comm_device_create,
    .uses_nccl = comm_device_uses_nccl,
    .set_force_staging = comm_device_set_force_staging,
};

__attribute__((visibility("default"))) const comm_device_api_t *fabula_comm_device_api(void) { return &api; }
