/* A checkpoint's saved config (or a written one) made loadable for another
 * job than the training's: `fabula eval` and `fabula generate`. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_ckpt_config.h"
#include "util/error.h"

/* The checkpoint's config for this job: the batch triple re-derived for
 * this world (the training's may not divide it) and the expert-parallel
 * size kept only where it divides the world. Written to a temporary file
 * for config_load, which reads files; the file is unlinked at once and read
 * through /dev/fd, so that no exit leaves it behind. *fd: close it after. */
char *cli_checkpoint_config_file(const char *json_text, const char *ckpt, int world, int *fd_out, int from_ckpt)
{
    json_error_t err;
    json_t *root = json_loads(json_text, 0, &err);
    if (!root || !json_is_object(root))
        fb_fatal_all(FB_EXIT_DATA, "checkpoint %s: its config is not a JSON object: %s", ckpt, err.text);
    json_object_del(root, "train_batch_size");
    /* the checkpoint holds the weights, and its model section is complete
     * (the imported config.json's keys, a grown vocabulary): the run's
     * model.init_from has done its part (docs/init-from.md) */
    json_t *model = json_object_get(root, "model");
    if (from_ckpt && json_is_object(model))
        json_object_del(model, "init_from");
    json_object_set_new(root, "gradient_accumulation_steps", json_integer(1));
    json_t *par = json_object_get(root, "parallel");
    json_t *ep = par ? json_object_get(par, "expert_parallel_size") : NULL;
    if (ep && json_is_integer(ep) && (json_integer_value(ep) < 1 || world % json_integer_value(ep) != 0))
        json_object_set_new(par, "expert_parallel_size", json_integer(1));
    const char *tmp = getenv("TMPDIR");
    size_t n = strlen(tmp && tmp[0] ? tmp : "/tmp") + 40;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/fabula-config-XXXXXX.json", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemps(path, 5);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "cannot create a temporary file %s: %s", path, strerror(errno));
    if (unlink(path) != 0 || json_dumpfd(root, fd, JSON_INDENT(1)) != 0)
        fb_fatal(FB_EXIT_IO, "cannot write the temporary file %s: %s", path, strerror(errno));
    json_decref(root);
    snprintf(path, n, "/dev/fd/%d", fd);
    *fd_out = fd;
    return path;
}
