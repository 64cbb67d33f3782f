/* "checkpoint" and run.resume: when checkpoints are written, how many are
 * kept, where, and where a run starts from (docs/checkpoint.md). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"
#include "util/error.h"

void config_read_checkpoint(cj_ctx_t *c, config_t *cfg)
{
    checkpoint_config_t *k = &cfg->checkpoint;
    cj_section(c, "checkpoint");
    long long interval = cj_integer(c, "checkpoint.save_interval", 0);
    if (interval < -1)
        cj_invalid(c, "checkpoint.save_interval",
                   "an integer >= -1 (steps between saves; 0 = only at the end; -1 = only on preemption)");
    k->save_interval = (long)interval;
    k->keep_last = cj_int(c, "checkpoint.keep_last", 3);
    if (k->keep_last < 0)
        cj_invalid(c, "checkpoint.keep_last", "an integer >= 0 (checkpoints kept; 0 = all)");
    const char *io = cj_string(c, "checkpoint.collective", "shared");
    if (strcmp(io, "shared") != 0 && strcmp(io, "all") != 0)
        cj_invalid(c, "checkpoint.collective", "\"shared\" (collective transfers for the tensors several ranks "
                                               "share, independent ones for the rest) or \"all\"");
    k->collective_io = !strcmp(io, "all");
    config_read_mpi_info(c, "checkpoint.mpi_info", &k->mpi_info);
    cj_section(c, "prep");
    config_read_mpi_info(c, "prep.mpi_info", &cfg->prep.mpi_info);
    const char *dir = cj_string(c, "checkpoint.dir", "");
    if (*dir) {
        k->dir = fb_strdup(dir);
    } else {
        /* kept as "" in the effective config, so that the config reused
         * with another run_dir still follows it */
        size_t n = strlen(cfg->run.run_dir) + sizeof "/checkpoints";
        k->dir = fb_malloc(n);
        snprintf(k->dir, n, "%s/checkpoints", cfg->run.run_dir);
    }
    /* DeepSpeed's own "checkpoint" keys (tag names, universal and
     * node-local checkpoints) have no meaning for fabula's files */
    static const cj_inert_t deepspeed[] = {
        {"tag_validation", CJ_STRING},
        {"load_universal", CJ_BOOL},
        {"use_node_local_storage", CJ_BOOL},
        {"parallel_write", CJ_OBJECT},
    };
    cj_accept_inert(c, "checkpoint", deepspeed, sizeof deepspeed / sizeof *deepspeed);

    /* "auto" is a value here, not the placeholder cj_string resolves */
    const char *path = "run.resume";
    cj_strs_push(&c->known, path);
    json_t *v = cj_lookup(c, c->root, path);
    if (v && !json_is_null(v) && (!json_is_string(v) || !*json_string_value(v)))
        cj_invalid(c, path, "\"auto\" (the latest checkpoint of checkpoint.dir, if any), \"none\" or the path of "
                            "a checkpoint file");
    cfg->run.resume = fb_strdup(v && json_is_string(v) ? json_string_value(v) : "auto");
}
