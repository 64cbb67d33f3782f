/* Device comms in a build without CUDA (comm_device.c replaces this file
 * when configure finds CUDA): there is no device memory to communicate, so
 * asking for a device comm is a bug of the caller's build choice. */
#include "parallel/comm.h"

#include <stdio.h>

#include "util/error.h"

comm_t *comm_device_create(comm_t *host)
{
    (void)host;
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_device_create",
                 "this fabula was built without CUDA, so it has no device buffers to communicate (configure "
                 "--with-cuda to build the CUDA backend)");
}

/* No comm of this build is a device comm, let alone one on NCCL. */
int comm_device_uses_nccl(const comm_t *c)
{
    (void)c;
    return 0;
}

/* Nothing to force: every comm of this build is a host comm. */
void comm_device_set_force_staging(int on) { (void)on; }

int comm_device_module_load(char *err, size_t errlen)
{
    snprintf(err, errlen, "this fabula was built without CUDA (configure --with-cuda)");
    return -1;
}
