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
static int g_tried;
static char g_err[4400];
static int g_force_staging;

int comm_device_module_load(char *err, size_t errlen)
{
    if (!g_tried) {
        g_tried = 1;
        char why[4400];
        void *sym = fb_module_symbol(COMM_DEVICE_MODULE_FILE, COMM_DEVICE_API_SYMBOL, why, sizeof why);
        if (!sym) {
            snprintf(g_err, sizeof g_err, "%s", why);
        } else {
            /* POSIX: dlsym's object pointer converts to the function it names. */
            comm_device_api_fn get;
            memcpy(&get, &sym, sizeof get);
            const comm_device_api_t *api = get();
            if (!api || api->version != COMM_DEVICE_API_VERSION) {
                /* The path fitted: fb_module_symbol just opened it. */
                char path[4200] = "";
                (void)fb_module_path(COMM_DEVICE_MODULE_FILE, path, sizeof path);
                snprintf(g_err, sizeof g_err, "module %s has table version %d, this fabula needs %d (a module of another build?)",
                         path, api ? api->version : -1, COMM_DEVICE_API_VERSION);
            } else {
                g_api = api;
            }
        }
    }
    if (!g_api && err && errlen)
        snprintf(err, errlen, "%s", g_err);
    return g_api ? 0 : -1;
}

comm_t *comm_device_create(comm_t *host)
{
    if (comm_device_module_load(NULL, 0) != 0)
        fb_fatal(FB_EXIT_USAGE, "device comm: %s", g_err);
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
