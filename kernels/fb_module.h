/* fabula's runtime modules (docs/cuda.md, "Modules"): the CUDA backend and
 * the device comm are shared objects opened with dlopen only when a run
 * uses a GPU, so that a CPU rank never maps cudart, cuBLAS(Lt) or NCCL. */
#ifndef FABULA_KERNELS_FB_MODULE_H
#define FABULA_KERNELS_FB_MODULE_H

#include <stddef.h>

/* Where module `file` is looked for: $FABULA_MODULE_DIR/file when that
 * variable is set and not empty (and nowhere else); else the folder of the
 * running binary when file is there (the build tree); else the installed
 * $(pkglibdir)/file. Writes the path into path[len]: 0, or -1 when it
 * does not fit. */
int fb_module_path(const char *file, char *path, size_t len);

/* Opens module `file` (a second call finds it open; RTLD_NOW, so a missing symbol
 * fails here and not in the middle of a run) and returns its symbol `sym`.
 * NULL on failure, with "PATH: dlerror()" in err[errlen]. */
void *fb_module_symbol(const char *file, const char *sym, char *err, size_t errlen);

/* One module loaded once and kept: its table (NULL until loaded) and, after
 * a failed try, why. {0} is "not tried yet". */
typedef struct fb_module_once {
    int tried;
    const void *table;
    char err[4400];
} fb_module_once_t;

/* Calls a module's entry point (fb_module_symbol's pointer, converted to
 * the module's own function type by its caller) and returns its table.
 * Every module table starts with `int version`. */
typedef const void *(*fb_module_call_fn)(void *entry);

/* The first call opens `file`, calls its `sym` through `call` and keeps the
 * table when its version is `version`; later calls give the same outcome.
 * 0 with m->table set, or -1 with why in err[errlen] (when err) and in
 * m->err. */
int fb_module_load_once(fb_module_once_t *m, const char *file, const char *sym, fb_module_call_fn call, int version,
                        char *err, size_t errlen);

#endif
