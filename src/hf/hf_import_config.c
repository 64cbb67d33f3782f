/* hf_import_config (hf/hf_import.h): DIR/config.json through config_load,
 * as a config {"model": {"init_from": DIR}} reads it, so that the mapping
 * and its refusals are the training's own. config_load reads files, so the
 * config goes through an unlinked temporary file read as /dev/fd/N. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf/hf_import.h"
#include "util/error.h"

void hf_import_config(const char *dir, model_config_t *mc)
{
    /* data keys that let a model of any vocabulary through (the byte
     * tokenizer's minimum does not apply: no data is read) */
    json_t *root = json_pack("{s:{s:s}, s:{s:s, s:i, s:i, s:i}}", "model", "init_from", dir, "data", "tokenizer",
                             "(hf import)", "seq_len", 2, "overlap", 0, "min_seq_len", 2);
    FB_ASSERT(root);
    const char *tmp = getenv("TMPDIR");
    size_t n = strlen(tmp && tmp[0] ? tmp : "/tmp") + 40;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/fabula-hf-XXXXXX.json", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemps(path, 5);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "cannot create a temporary file %s: %s", path, strerror(errno));
    if (unlink(path) != 0 || json_dumpfd(root, fd, 0) != 0)
        fb_fatal(FB_EXIT_IO, "cannot write the temporary file %s: %s", path, strerror(errno));
    json_decref(root);
    snprintf(path, n, "/dev/fd/%d", fd);
    config_t cfg;
    const char *paths[1] = {path};
    config_load(&cfg, paths, 1, NULL, 0, 1, 1);
    close(fd);
    free(path);
    *mc = cfg.model;
    config_free(&cfg);
}
