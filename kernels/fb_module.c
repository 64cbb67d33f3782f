/* Finding and opening the runtime modules (fb_module.h). */
#include "fb_module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FB_PKGLIBDIR
#define FB_PKGLIBDIR "/usr/local/lib/fabula"
#endif

/* The folder of /proc/self/exe: a build tree keeps the modules next to
 * the binary, and so finds its own ones before any installed copy. */
static int exe_dir(char *dir, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", dir, len - 1);
    if (n <= 0)
        return -1;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

/* dir/file into path[len]; 0, or -1 when it does not fit. */
static int join(char *path, size_t len, const char *dir, const char *file)
{
    int n = snprintf(path, len, "%s/%s", dir, file);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int fb_module_path(const char *file, char *path, size_t len)
{
    const char *env = getenv("FABULA_MODULE_DIR");
    if (env && *env)
        return join(path, len, env, file);
    char dir[4096];
    if (exe_dir(dir, sizeof dir) == 0 && join(path, len, dir, file) == 0 && access(path, F_OK) == 0)
        return 0;
    return join(path, len, FB_PKGLIBDIR, file);
}

void *fb_module_symbol(const char *file, const char *sym, char *err, size_t errlen)
{
    char path[4200];
    if (fb_module_path(file, path, sizeof path) != 0) {
        snprintf(err, errlen, "cannot load module %s: its path (FABULA_MODULE_DIR or the binary's folder) is longer "
                 "than %zu bytes", file, sizeof path - 1);
        return NULL;
    }
    /* RTLD_LOCAL: a module's symbols are for the binary only, through its
     * table (the device comm module reaches the CUDA one through the
     * binary's forwarding functions). */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load module %s: %s", path, why ? why : "unknown dlopen error");
        return NULL;
    }
    dlerror();
    void *p = dlsym(h, sym);
    if (!p) {
        const char *why = dlerror();
        snprintf(err, errlen, "module %s has no %s: %s", path, sym, why ? why : "NULL symbol");
        dlclose(h);
        return NULL;
    }
    return p;
}

int fb_module_load_once(fb_module_once_t *m, const char *file, const char *sym, fb_module_call_fn call, int version,
                        char *err, size_t errlen)
{
    if (!m->tried) {
        m->tried = 1;
        char why[4400];
        void *entry = fb_module_symbol(file, sym, why, sizeof why);
        if (!entry) {
            snprintf(m->err, sizeof m->err, "%s", why);
        } else {
            const void *table = call(entry);
            /* a table's first member is its int version: a pointer to a
             * struct is a pointer to its first member */
            const int have = table ? *(const int *)table : -1;
            if (have != version) {
                /* The path fitted: fb_module_symbol just opened it. */
                char path[4200] = "";
                (void)fb_module_path(file, path, sizeof path);
                snprintf(m->err, sizeof m->err,
                         "module %s has table version %d, this fabula needs %d (a module of another build?)", path, have,
                         version);
            } else {
                m->table = table;
            }
        }
    }
    if (!m->table && err && errlen)
        snprintf(err, errlen, "%s", m->err);
    return m->table ? 0 : -1;
}
