/* Everything in a checkpoint besides the tensors: progress, layout,
 * scheduler, loss scaler, RNG, data position and the config. All of it is
 * rank-independent except /rng/rank_state, one row per rank; in a parallel
 * file every rank makes the same calls with the same values, which is what
 * HDF5 needs for collective metadata writes. */
#include "build_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "model/params.h"
#include "parallel/comm.h"
#include "zero/schedule.h"
#include "util/error.h"

static const char *sched_name(sched_type_t t)
{
    switch (t) {
    case SCHED_WARMUP_LR:
        return "WarmupLR";
    case SCHED_WARMUP_DECAY_LR:
        return "WarmupDecayLR";
    case SCHED_WARMUP_COSINE_LR:
        return "WarmupCosineLR";
    default:
        return "constant";
    }
}

static hid_t group_create(hid_t file, const char *path)
{
    hid_t g = H5Gcreate2(file, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_H5(g);
    return g;
}

/* A 1-D or 2-D int64 dataset; rank `writer` writes rows [row0, row0 + rows)
 * of data (every rank calls this, collectively, with its own rows). */
static void i64_dataset(hid_t loc, const char *name, int ndim, const hsize_t *dims, hsize_t row0, hsize_t rows,
                        const long long *data, hid_t dxpl)
{
    hid_t fspace = H5Screate_simple(ndim, dims, NULL);
    CHECK_H5(fspace);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_H5(dcpl);
    CHECK_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    hid_t d = H5Dcreate2(loc, name, H5T_STD_I64LE, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK_H5(d);
    hsize_t width = ndim == 2 ? dims[1] : 1;
    hsize_t mdims[1] = {rows * width > 0 ? rows * width : 1};
    hid_t mspace = H5Screate_simple(1, mdims, NULL);
    CHECK_H5(mspace);
    if (rows > 0) {
        hsize_t start[2] = {row0, 0}, count[2] = {rows, width};
        CHECK_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    } else {
        CHECK_H5(H5Sselect_none(fspace));
        CHECK_H5(H5Sselect_none(mspace));
    }
    static const long long dummy[1];
    if (dims[0] > 0)
        CHECK_H5(H5Dwrite(d, H5T_NATIVE_LLONG, mspace, fspace, dxpl, rows > 0 ? data : dummy));
    CHECK_H5(H5Sclose(mspace));
    CHECK_H5(H5Sclose(fspace));
    CHECK_H5(H5Pclose(dcpl));
    CHECK_H5(H5Dclose(d));
}

void ckpt_meta_write(hid_t file, const ckpt_target_t *t, const ckpt_progress_t *p, hid_t dxpl)
{
    const config_t *cfg = t->cfg;
    const groups_t *gr = t->groups;
    h5_write_attr_string(file, "format", CKPT_FORMAT_NAME);
    h5_write_attr_i64(file, "format_version", CKPT_FORMAT_VERSION);
    h5_write_attr_string(file, "fabula_version", PACKAGE_VERSION);
    h5_write_attr_i64(file, "step", p->step);
    h5_write_attr_i64(file, "optimizer_step", zero_step_count(t->zero));
    h5_write_attr_i64(file, "tokens_seen", p->tokens_seen);
    h5_write_attr_string(file, "checksum", CKPT_CHECKSUM_NAME);
    h5_write_attr_string(file, "config", cfg->effective_json);
    /* every rank must write the same value: rank 0's clock */
    long long now = (long long)time(NULL);
    comm_bcast(comm_world(), &now, sizeof now, 0);
    h5_write_attr_i64(file, "created_unix", now);
    param_table_t table;
    param_table_build(&table, &cfg->model);
    h5_write_attr_i64(file, "num_tensors", table.n);
    h5_write_attr_i64(file, "num_parameters", (long long)param_table_total(&table));
    param_table_free(&table);

    hid_t g = group_create(file, "/layout");
    h5_write_attr_i64(g, "world_size", gr->world_size);
    h5_write_attr_i64(g, "dp_size", gr->dp_size);
    h5_write_attr_i64(g, "ep_size", gr->ep_size);
    h5_write_attr_i64(g, "edp_size", gr->edp_size);
    h5_write_attr_i64(g, "zero_stage", cfg->zero.stage);
    h5_write_attr_i64(g, "tp_size", gr->tp_size);
    h5_write_attr_i64(g, "pp_size", gr->pp_size);
    CHECK_H5(H5Gclose(g));

    /* the schedule is a pure function of the applied updates */
    g = group_create(file, "/scheduler");
    h5_write_attr_string(g, "type", sched_name(cfg->sched.type));
    h5_write_attr_i64(g, "step", zero_step_count(t->zero));
    h5_write_attr_f64(g, "next_lr", schedule_lr(&cfg->sched, &cfg->optim, zero_step_count(t->zero)));
    CHECK_H5(H5Gclose(g));

    /* The settings and, with a scaler, its live state (DeepSpeed's
     * attribute names), so that a resumed fp16 run continues its trajectory. */
    g = group_create(file, "/loss_scaler");
    const fp16_config_t *h = &cfg->fp16;
    h5_write_attr_i64(g, "fp16_enabled", h->enabled);
    h5_write_attr_i64(g, "bf16_enabled", cfg->bf16_enabled);
    h5_write_attr_i64(g, "dynamic", h->loss_scale == 0.0);
    double scale = 1.0;
    if (h->enabled)
        scale = h->loss_scale > 0.0 ? h->loss_scale : ldexp(1.0, h->initial_scale_power);
    if (t->scaler) {
        scale = t->scaler->st.cur_scale;
        h5_write_attr_i64(g, "cur_iter", t->scaler->st.cur_iter);
        h5_write_attr_i64(g, "last_overflow_iter", t->scaler->st.last_overflow_iter);
        h5_write_attr_i64(g, "cur_hysteresis", t->scaler->st.cur_hysteresis);
    }
    h5_write_attr_f64(g, "scale", scale);
    h5_write_attr_i64(g, "loss_scale_window", h->loss_scale_window);
    h5_write_attr_i64(g, "hysteresis", h->hysteresis);
    h5_write_attr_f64(g, "min_loss_scale", h->min_loss_scale);
    CHECK_H5(H5Gclose(g));

    /* Counter-based: every random number is fb_hash2(seed-derived key,
     * counter built from the step, micro-batch and rank), so (seed, step)
     * is each rank's whole RNG state. */
    g = group_create(file, "/rng");
    h5_write_attr_string(g, "algorithm", "counter-based splitmix64 (kernels/rng.h): state = (seed, next step)");
    h5_write_attr_i64(g, "seed", (long long)cfg->run.seed);
    h5_write_attr_i64(g, "next_step", p->step);
    hsize_t dims[2] = {(hsize_t)gr->world_size, 3};
    long long row[3] = {gr->world_rank, (long long)cfg->run.seed, p->step};
    i64_dataset(g, "rank_state", 2, dims, (hsize_t)gr->world_rank, 1, row, dxpl);
    CHECK_H5(H5Gclose(g));

    step_plan_state_t s;
    step_plan_state_get(t->plan, &s);
    g = group_create(file, "/data");
    h5_write_attr_i64(g, "num_samples", s.nsamples);
    h5_write_attr_i64(g, "seed", (long long)cfg->run.seed);
    h5_write_attr_i64(g, "sampler_epoch", s.sampler_epoch);
    h5_write_attr_i64(g, "sampler_position", s.sampler_position);
    h5_write_attr_i64(g, "curriculum", s.curriculum);
    h5_write_attr_i64(g, "curriculum_epoch", s.curriculum_epoch);
    long long pos[LOADER_NCLASSES];
    for (int k = 0; k < LOADER_NCLASSES; k++)
        pos[k] = s.curriculum_pos[k];
    h5_write_attr_i64s(g, "curriculum_pos", pos, LOADER_NCLASSES);
    /* the same on every rank: rank 0 writes it */
    long long *def = fb_calloc((size_t)s.ndeferred + 1, sizeof *def);
    for (int64_t i = 0; i < s.ndeferred; i++)
        def[i] = s.deferred[i];
    hsize_t ddims[1] = {(hsize_t)s.ndeferred};
    i64_dataset(g, "deferred", 1, ddims, 0, gr->world_rank == 0 ? (hsize_t)s.ndeferred : 0, def, dxpl);
    free(def);
    CHECK_H5(H5Gclose(g));
}

/* ------------------------------------------------------------ reading */

static int need_i64(hid_t obj, const char *where, const char *name, long long *v, char *why, size_t n)
{
    if (ckpt_attr_read_i64(obj, name, v) == 0)
        return 0;
    snprintf(why, n, "attribute %s%s is missing or unreadable", where, name);
    return -1;
}

static hid_t open_group(hid_t file, const char *path, char *why, size_t n)
{
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    hid_t g = h5_lookup(file, path) > 0 ? H5Gopen2(file, path, H5P_DEFAULT) : -1;
    ckpt_h5_quiet_end(&q);
    if (g < 0)
        snprintf(why, n, "group %s is missing or unreadable", path);
    return g;
}

static int read_deferred(hid_t g, ckpt_meta_t *m, char *why, size_t n)
{
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    int rc = -1;
    hid_t d = H5Dopen2(g, "deferred", H5P_DEFAULT);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    hssize_t np = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (np >= 0) {
        m->deferred = fb_calloc((size_t)np + 1, sizeof *m->deferred);
        if (np == 0 || H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->deferred) >= 0) {
            m->data.ndeferred = np;
            rc = 0;
        }
    }
    if (space >= 0)
        H5Sclose(space);
    if (d >= 0)
        H5Dclose(d);
    ckpt_h5_quiet_end(&q);
    if (rc < 0)
        snprintf(why, n, "dataset /data/deferred is missing or unreadable");
    return rc;
}

int ckpt_meta_read(hid_t file, ckpt_meta_t *m, char *why, size_t n)
{
    memset(m, 0, sizeof *m);
    m->format = ckpt_attr_read_string(file, "format");
    if (!m->format) {
        snprintf(why, n, "no 'format' attribute: not a fabula checkpoint");
        return -1;
    }
    if (need_i64(file, "/", "format_version", &m->version, why, n) < 0)
        return -1;
    m->fabula_version = ckpt_attr_read_string(file, "fabula_version");
    if (strcmp(m->format, CKPT_FORMAT_NAME) != 0 || m->version > CKPT_FORMAT_VERSION)
        return 0; /* the caller refuses it with its own message */
    m->checksum_name = ckpt_attr_read_string(file, "checksum");
    m->config = ckpt_attr_read_string(file, "config");
    if (!m->fabula_version || !m->checksum_name || !m->config) {
        snprintf(why, n, "attribute fabula_version, checksum or config is missing or unreadable");
        return -1;
    }
    if (need_i64(file, "/", "step", &m->step, why, n) ||
        need_i64(file, "/", "optimizer_step", &m->optimizer_step, why, n) ||
        need_i64(file, "/", "tokens_seen", &m->tokens_seen, why, n) ||
        need_i64(file, "/", "num_tensors", &m->ntensors, why, n) ||
        need_i64(file, "/", "num_parameters", &m->parameters, why, n))
        return -1;

    hid_t g = open_group(file, "/layout", why, n);
    if (g < 0)
        return -1;
    int rc = need_i64(g, "/layout:", "world_size", &m->world_size, why, n) ||
             need_i64(g, "/layout:", "dp_size", &m->dp_size, why, n) ||
             need_i64(g, "/layout:", "ep_size", &m->ep_size, why, n) ||
             need_i64(g, "/layout:", "edp_size", &m->edp_size, why, n) ||
             need_i64(g, "/layout:", "zero_stage", &m->zero_stage, why, n);
    /* information only, absent in the files of a fabula without tp and pp */
    if (ckpt_attr_read_i64(g, "tp_size", &m->tp_size) < 0)
        m->tp_size = 1;
    if (ckpt_attr_read_i64(g, "pp_size", &m->pp_size) < 0)
        m->pp_size = 1;
    H5Gclose(g);
    if (rc)
        return -1;

    if ((g = open_group(file, "/scheduler", why, n)) < 0)
        return -1;
    m->sched_type = ckpt_attr_read_string(g, "type");
    rc = !m->sched_type || ckpt_attr_read_f64(g, "next_lr", &m->next_lr) < 0;
    H5Gclose(g);
    if (rc) {
        snprintf(why, n, "attribute /scheduler:type or next_lr is missing or unreadable");
        return -1;
    }

    if ((g = open_group(file, "/loss_scaler", why, n)) < 0)
        return -1;
    rc = need_i64(g, "/loss_scaler:", "fp16_enabled", &m->fp16_enabled, why, n) ||
         need_i64(g, "/loss_scaler:", "bf16_enabled", &m->bf16_enabled, why, n) ||
         need_i64(g, "/loss_scaler:", "dynamic", &m->fp16_dynamic, why, n);
    if (!rc && ckpt_attr_read_f64(g, "scale", &m->loss_scale) < 0) {
        snprintf(why, n, "attribute /loss_scaler:scale is missing or unreadable");
        rc = 1;
    }
    /* the live state is optional: checkpoints of runs without a scaler lack it */
    m->has_scaler_state = !rc && H5Aexists(g, "cur_iter") > 0;
    if (m->has_scaler_state)
        rc = need_i64(g, "/loss_scaler:", "cur_iter", &m->scaler_cur_iter, why, n) ||
             need_i64(g, "/loss_scaler:", "last_overflow_iter", &m->scaler_last_overflow_iter, why, n) ||
             need_i64(g, "/loss_scaler:", "cur_hysteresis", &m->scaler_cur_hysteresis, why, n);
    H5Gclose(g);
    if (rc)
        return -1;

    if ((g = open_group(file, "/rng", why, n)) < 0)
        return -1;
    m->rng_algorithm = ckpt_attr_read_string(g, "algorithm");
    rc = need_i64(g, "/rng:", "seed", &m->rng_seed, why, n) ||
         need_i64(g, "/rng:", "next_step", &m->rng_next_step, why, n);
    H5Gclose(g);
    if (rc)
        return -1;

    if ((g = open_group(file, "/data", why, n)) < 0)
        return -1;
    long long v[6], pos[LOADER_NCLASSES];
    rc = need_i64(g, "/data:", "num_samples", &v[0], why, n) || need_i64(g, "/data:", "seed", &v[1], why, n) ||
         need_i64(g, "/data:", "sampler_epoch", &v[2], why, n) ||
         need_i64(g, "/data:", "sampler_position", &v[3], why, n) ||
         need_i64(g, "/data:", "curriculum", &v[4], why, n) ||
         need_i64(g, "/data:", "curriculum_epoch", &v[5], why, n);
    if (!rc && ckpt_attr_read_i64s(g, "curriculum_pos", pos, LOADER_NCLASSES) < 0) {
        snprintf(why, n, "attribute /data:curriculum_pos is missing or unreadable");
        rc = 1;
    }
    if (!rc)
        rc = read_deferred(g, m, why, n);
    H5Gclose(g);
    if (rc)
        return -1;
    m->data.nsamples = v[0];
    m->data_seed = v[1];
    m->data.sampler_epoch = v[2];
    m->data.sampler_position = v[3];
    m->data.curriculum = (int)v[4];
    m->data.curriculum_epoch = v[5];
    for (int k = 0; k < LOADER_NCLASSES; k++)
        m->data.curriculum_pos[k] = pos[k];
    m->data.deferred = m->deferred;
    return 0;
}

void ckpt_meta_free(ckpt_meta_t *m)
{
    free(m->format);
    free(m->fabula_version);
    free(m->checksum_name);
    free(m->config);
    free(m->sched_type);
    free(m->rng_algorithm);
    free(m->deferred);
    memset(m, 0, sizeof *m);
}
