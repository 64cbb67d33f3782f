/* config_load over a JSON object instead of files (config/config.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_internal.h"
#include "util/error.h"

void config_load_object(config_t *cfg, json_t *root, const char *const *sets, int nsets, int world_size,
                        int verbose)
{
    /* config_load reads files (and names them in its messages): the object
     * goes through a temporary file, unlinked at once and read as
     * /dev/fd/N, so that no exit leaves it behind */
    const char *tmp = getenv("TMPDIR");
    const char *dir = tmp && tmp[0] ? tmp : "/tmp";
    size_t n = strlen(dir) + 40;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/fabula-config-XXXXXX.json", dir);
    int fd = mkstemps(path, 5);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "cannot create a temporary file %s: %s", path, strerror(errno));
    if (unlink(path) != 0 || json_dumpfd(root, fd, JSON_INDENT(1)) != 0)
        fb_fatal(FB_EXIT_IO, "cannot write the temporary file %s: %s", path, strerror(errno));
    snprintf(path, n, "/dev/fd/%d", fd);
    config_load_made(cfg, path, sets, nsets, world_size, verbose);
    if (close(fd) != 0)
        fb_fatal(FB_EXIT_IO, "cannot close the temporary config file: %s", strerror(errno));
    free(path);
}
