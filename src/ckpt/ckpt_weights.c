/* ckpt_read_weights (ckpt/ckpt_weights.h): the /params tensors, read whole
 * one at a time through ckpt_tensors (as `fabula export` reads them), into
 * the model's own parameter buffers. */
#include "ckpt/ckpt_weights.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_tensors.h"
#include "model/params.h"
#include "util/error.h"

static void shape_text(char *buf, size_t n, int ndim, const uint64_t *d)
{
    if (ndim == 1)
        snprintf(buf, n, "[%llu]", (unsigned long long)d[0]);
    else
        snprintf(buf, n, "[%llu, %llu]", (unsigned long long)d[0], (unsigned long long)d[1]);
}

/* The file holds exactly the whole model's tensors at their shapes (the
 * messages of ckpt_read): checked against the whole model, not this rank's
 * share, so every rank of a job refuses the same file alike. */
static void check_model(const char *path, const ckpt_tensors_t *c, const model_config_t *mc)
{
    param_table_t whole;
    param_table_build(&whole, mc);
    for (int i = 0; i < whole.n; i++) {
        const param_view_t *v = &whole.views[i];
        long at = ckpt_tensors_find(c, v->name);
        if (at < 0)
            fb_fatal(FB_EXIT_DATA,
                     "checkpoint %s has no tensor /params/%s: it was made for another model (compare model.* of "
                     "this run with `fabula ckpt info --config %s`)", path, v->name, path);
        uint64_t have[2], want[2] = {(uint64_t)v->shape[0], (uint64_t)(v->ndim == 2 ? v->shape[1] : 1)};
        int nd = ckpt_tensors_shape(c, (size_t)at, have);
        if (nd != v->ndim || have[0] != want[0] || have[1] != want[1]) {
            char hs[64], ws[64];
            shape_text(hs, sizeof hs, nd, have);
            shape_text(ws, sizeof ws, v->ndim, want);
            fb_fatal(FB_EXIT_DATA,
                     "checkpoint %s: tensor /params/%s has shape %s, this model's is %s: the checkpoint was made "
                     "for another model config", path, v->name, hs, ws);
        }
    }
    for (size_t j = 0; j < ckpt_tensors_count(c); j++)
        if (!param_table_find(&whole, ckpt_tensors_name(c, j)))
            fb_fatal(FB_EXIT_DATA,
                     "checkpoint %s: tensor /params/%s is not part of this model: it was made for another model "
                     "config", path, ckpt_tensors_name(c, j));
    param_table_free(&whole);
}

/* This rank's slice of a whole tensor (param_view_full_pos), row runs at a
 * time: a tensor-parallel view holds rows or columns of the stored one. */
static void take_slice(const param_view_t *v, const float *whole, float *slice)
{
    for (size_t e = 0; e < v->numel;) {
        size_t run = param_view_run(v, e);
        memcpy(slice + e, whole + param_view_full_pos(v, e), run * sizeof *slice);
        e += run;
    }
}

void ckpt_read_weights(const char *path, model_t *m)
{
    FB_ASSERT(model_params(m, PARAM_GROUP_DENSE)); /* a model with its own parameter buffers */
    ckpt_tensors_t *c = ckpt_tensors_open(path);
    check_model(path, c, model_config(m));
    const param_table_t *t = model_params_table(m);
    /* host parameters of whole tensors are read in place; the rest (device
     * memory, tensor-parallel slices) through one staging buffer, sized
     * for the largest stored tensor they need */
    const int on_host = !model_ops(m)->device_memory;
    size_t most = 0, most_slice = 0;
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        const size_t stored = ckpt_tensors_numel(c, (size_t)ckpt_tensors_find(c, v->name));
        if (stored != v->numel && v->numel > most_slice)
            most_slice = v->numel;
        if ((stored != v->numel || !on_host) && stored > most)
            most = stored;
    }
    float *stage = most ? fb_malloc(most * sizeof *stage) : NULL;
    float *slice = most_slice ? fb_malloc(most_slice * sizeof *slice) : NULL;
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        const size_t at = (size_t)ckpt_tensors_find(c, v->name);
        if (ckpt_tensors_numel(c, at) == v->numel && on_host) {
            ckpt_tensors_read(c, at, model_params(m, v->group) + v->offset);
            continue;
        }
        ckpt_tensors_read(c, at, stage);
        if (ckpt_tensors_numel(c, at) != v->numel) {
            take_slice(v, stage, slice);
            model_set_param(m, v, slice);
        } else {
            model_set_param(m, v, stage);
        }
    }
    free(slice);
    free(stage);
    ckpt_tensors_close(c);
}
