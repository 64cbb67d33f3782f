/* The binary's side of the device comm module: loads fabula-comm.so when a
 * device comm is first asked for and forwards to its table. A CPU run never
 * gets here, so it maps neither NCCL nor cudart. */
#include "parallel/comm_device_api.h"

#include <stdio.h>
#include <string.h>

#include "fb_module.h"
#include "parallel/comm_internal.h"
#include "util/error.h"

static const comm_device_api_t *g_api;
static fb_module_once_t g_module;
static int g_force_staging;

/* POSIX: dlsym's object pointer converts to the function it names. */
static const void *call_entry(void *entry)
{
    comm_device_api_fn get;
    memcpy(&get, &entry, sizeof get);
    return get();
}

int comm_device_module_load(char *err, size_t errlen)
{
    const int rc = fb_module_load_once(&g_module, COMM_DEVICE_MODULE_FILE, COMM_DEVICE_API_SYMBOL, call_entry,
                                       COMM_DEVICE_API_VERSION, err, errlen);
    g_api = g_module.table;
    return rc;
}

comm_t *comm_device_create(comm_t *host)
{
    if (comm_device_module_load(NULL, 0) != 0)
        fb_fatal(FB_EXIT_USAGE, "device comm: %s", g_module.err);
    g_api->set_force_staging(g_force_staging);
    return g_api->create(host);
}

/* A host comm has no backend; only a device comm can be on NCCL, and one
 * exists only once the module is loaded. */
int comm_device_uses_nccl(const comm_t *c)
{
    if (!c || !c->backend || !g_api)
        return 0;
    return g_api->uses_nccl(c);
}

/* Kept here and handed over at creation: setting it must not load the module. */
void comm_device_set_force_staging(int on) { g_force_staging = on != 0; }
