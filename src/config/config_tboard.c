/* DeepSpeed's "tensorboard" and "csv_monitor" blocks (docs/monitoring.md,
 * "TensorBoard and CSV"): {enabled, output_path, job_name}, files in
 * output_path/job_name; plus fabula's tensorboard.histogram_interval. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"
#include "util/error.h"

/* output_path "" (DeepSpeed's default, where it means a folder under
 * $HOME): RUN_DIR/<section>, so that a run's outputs stay together. */
static void read_block(cj_ctx_t *c, const config_t *cfg, const char *section, tboard_config_t *out)
{
    char path[64];
    cj_section(c, section);
    snprintf(path, sizeof path, "%s.enabled", section);
    out->enabled = cj_bool(c, path, 0);
    snprintf(path, sizeof path, "%s.output_path", section);
    const char *base = cj_string(c, path, "");
    snprintf(path, sizeof path, "%s.job_name", section);
    const char *job = cj_string(c, path, "fabula");
    if (strchr(job, '/'))
        cj_invalid(c, path, "a folder name without '/' (files go to output_path/job_name)");
    const size_t n = strlen(cfg->run.run_dir) + strlen(section) + strlen(base) + strlen(job) + 4;
    out->dir = fb_malloc(n);
    /* "tb_logs/" as users write it: one separator, not "tb_logs//job" */
    size_t blen = strlen(base);
    while (blen > 1 && base[blen - 1] == '/')
        blen--;
    if (*base)
        snprintf(out->dir, n, "%.*s%s%s", (int)blen, base, *job && base[blen - 1] != '/' ? "/" : "", job);
    else
        snprintf(out->dir, n, "%s/%s%s%s", cfg->run.run_dir, section, *job ? "/" : "", job);
}

void config_read_tboard(cj_ctx_t *c, config_t *cfg)
{
    read_block(c, cfg, "tensorboard", &cfg->tensorboard);
    read_block(c, cfg, "csv_monitor", &cfg->csv_monitor);
    long long every = cj_integer(c, "tensorboard.histogram_interval", 0);
    if (every < 0)
        cj_invalid(c, "tensorboard.histogram_interval",
                   "an integer >= 0 (steps between histograms of every parameter and gradient; 0 = none)");
    cfg->tensorboard.histogram_interval = every > 0 ? (long)every : 0;
}
