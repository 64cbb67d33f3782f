#include "train/train_tboard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "model/model.h"
#include "ops.h"
#include "parallel/comm.h"
#include "tboard/tb_hist.h"
#include "tboard/tb_leaves.h"
#include "util/error.h"

void train_tboard_open(train_tboard_t *t, const config_t *cfg, int active)
{
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->active = active;
}

void train_tboard_make_dirs(const config_t *cfg)
{
    if (cfg->tensorboard.enabled)
        fs_mkdirs(cfg->tensorboard.dir);
    if (cfg->csv_monitor.enabled)
        fs_mkdirs(cfg->csv_monitor.dir);
}

static void open_files(train_tboard_t *t, long first_step)
{
    const config_t *cfg = t->cfg;
    if (cfg->tensorboard.enabled && !t->events) {
        fs_mkdirs(cfg->tensorboard.dir);
        t->events = tb_events_open(cfg->tensorboard.dir);
        tb_events_session_start(t->events, first_step);
        printf("fabula: tensorboard: %s\n", tb_events_path(t->events));
    }
    if (cfg->csv_monitor.enabled && !t->csv) {
        fs_mkdirs(cfg->csv_monitor.dir);
        t->csv = tb_csv_open(cfg->csv_monitor.dir, first_step);
        printf("fabula: csv_monitor: %s/*.csv\n", cfg->csv_monitor.dir);
    }
}

static void leaf(void *ctx, const char *tag, const json_t *v, double value)
{
    train_tboard_t *t = ctx;
    if (t->events)
        tb_events_scalar(t->events, tag, value);
    if (t->csv)
        tb_csv_scalar(t->csv, tag, t->step, v, value);
}

void train_tboard_scalars(train_tboard_t *t, const json_t *record, long step)
{
    if (!t->active || !(t->cfg->tensorboard.enabled || t->cfg->csv_monitor.enabled))
        return;
    open_files(t, step);
    t->step = step;
    if (t->events)
        tb_events_scalars_begin(t->events, step);
    tb_leaves(record, leaf, t);
    if (t->events)
        tb_events_scalars_end(t->events);
}

/* This rank's elements of global tensor `gv` inside its write range: the
 * tensor's elements [*a, *b), at *off in the buffers of shard *s (from lo).
 * Under tensor parallelism the elements of this rank's slice (a histogram
 * needs no positions). */
static int piece(const param_table_t *local, const param_view_t *gv, const zero_shard_t *sh, size_t *a,
                 size_t *b, size_t *off, const zero_shard_t **sp)
{
    const param_view_t *lv = param_table_find(local, gv->name);
    if (!lv)
        return 0; /* an expert held by another expert-parallel rank */
    if (lv->tp_copy != 0)
        return 0; /* replicated over tp (or a shared kv head): counted by its first copy alone */
    const zero_shard_t *s = &sh[lv->group];
    *sp = s;
    size_t lo = lv->offset > s->write_lo ? lv->offset : s->write_lo;
    size_t hi = lv->offset + lv->numel < s->write_hi ? lv->offset + lv->numel : s->write_hi;
    if (hi <= lo)
        return 0;
    *a = lo - lv->offset;
    *b = hi - lv->offset;
    *off = lo - s->lo;
    return 1;
}

void train_tboard_histograms(train_tboard_t *t, zero_t *z, long step, int grads_valid)
{
    const long every = t->cfg->tensorboard.histogram_interval;
    if (!t->cfg->tensorboard.enabled || every <= 0 || step % every != 0)
        return;
    if (!t->have_global) {
        param_table_build(&t->global, &t->cfg->model);
        t->have_global = 1;
    }
    const model_t *model = zero_model(z);
    const param_table_t *local = model_params_table(model);
    const ops_t *ops = model_ops(model);
    zero_shard_t sh[PARAM_NGROUPS];
    for (int g = 0; g < PARAM_NGROUPS; g++)
        sh[g] = zero_shard(z, g);
    const int n = t->global.n, kinds = grads_valid ? 2 : 1;
    const size_t K = tb_hist_sums_len();
    double *sums = fb_malloc((size_t)n * kinds * K * sizeof *sums);
    double *exts = fb_malloc((size_t)n * kinds * TB_HIST_EXTS * sizeof *exts);
    float *stage = NULL;
    size_t stage_cap = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < kinds; k++) {
            const size_t j = (size_t)i * kinds + k;
            tb_hist_reset(sums + j * K, exts + j * TB_HIST_EXTS);
            size_t a, b, off;
            const zero_shard_t *s;
            if (!piece(local, &t->global.views[i], sh, &a, &b, &off, &s))
                continue;
            const float *src = (k == 0 ? s->params : s->grads) + off;
            const int host = ops == ops_cpu() || (k == 0 && s->params_host) || (k == 1 && s->grads_host);
            if (!host) {
                if (b - a > stage_cap) {
                    free(stage);
                    stage_cap = b - a;
                    stage = fb_malloc(stage_cap * sizeof *stage);
                }
                ops->to_host(stage, src, (b - a) * sizeof *stage);
                src = stage;
            }
            tb_hist_add(sums + j * K, exts + j * TB_HIST_EXTS, src, b - a);
        }
    free(stage);
    /* exact counts: integers below 2^53 in doubles add exactly */
    comm_allreduce(comm_world(), sums, (size_t)n * kinds * K, COMM_F64, COMM_SUM);
    comm_allreduce(comm_world(), exts, (size_t)n * kinds * TB_HIST_EXTS, COMM_F64, COMM_MAX);
    if (t->active) {
        open_files(t, step);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < kinds; k++) {
                const size_t j = (size_t)i * kinds + k;
                char tag[128];
                snprintf(tag, sizeof tag, "%s/%s", k == 0 ? "params" : "grads", t->global.views[i].name);
                tb_events_histogram(t->events, step, tag, sums + j * K, exts + j * TB_HIST_EXTS);
            }
    }
    free(sums);
    free(exts);
}

void train_tboard_close(train_tboard_t *t)
{
    tb_events_close(t->events);
    tb_csv_close(t->csv);
    if (t->have_global)
        param_table_free(&t->global);
    memset(t, 0, sizeof *t);
}
