/* Reading a checkpoint at any layout: each rank reads, by hyperslab, the
 * part of every tensor that falls in its ZeRO range [lo, hi) of each group,
 * checksums the part inside its write range (a partition of the group, so
 * the ranks' sums add up to the whole tensor's), and only when every
 * checksum matches is the rest of the state restored and the replicated
 * copies rebuilt. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "model/params.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

static int any_rank(int bad)
{
    long long v = bad ? 1 : 0;
    comm_allreduce(comm_world(), &v, 1, COMM_I64, COMM_MAX);
    return v != 0;
}

static void shape_text(char *buf, size_t n, int ndim, const long long *d)
{
    if (ndim == 1)
        snprintf(buf, n, "[%lld]", d[0]);
    else
        snprintf(buf, n, "[%lld, %lld]", d[0], d[1]);
}

static void close_all(hid_t *d, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (d[j] >= 0)
            H5Dclose(d[j]);
    free(d);
}

/* Every tensor the model has, at the shape it has; nothing else. Returns
 * the open datasets (3 x n), or NULL when the file is damaged (why[] says
 * where). `counts_match`: the file's num_tensors and num_parameters are this
 * model's, so a tensor missing or of another shape is damage (a flipped
 * link name or dataspace), not a checkpoint of another model. The groups'
 * link tables are only searched by the model's names, never walked: HDF5
 * itself can crash iterating a damaged one. */
static hid_t *open_tensors(hid_t file, const char *path, const param_table_t *g, int counts_match, char *why,
                           size_t why_len)
{
    const size_t n = (size_t)g->n * CKPT_NKINDS;
    hid_t *d = fb_malloc(n * sizeof *d);
    for (size_t j = 0; j < n; j++)
        d[j] = -1;
    for (int k = 0; k < CKPT_NKINDS; k++) {
        for (int i = 0; i < g->n; i++) {
            const param_view_t *v = &g->views[i];
            char ds[160];
            ckpt_dataset_path(ds, sizeof ds, k, v->name);
            int found = h5_lookup(file, ds);
            if (found < 0 || (found == 0 && counts_match)) {
                snprintf(why, why_len, "tensor %s %s (damaged metadata)", ds,
                         found < 0 ? "cannot be looked up" : "is missing");
                close_all(d, n);
                return NULL;
            }
            if (!found)
                fb_fatal_all(FB_EXIT_DATA,
                             "checkpoint %s has no tensor %s: it was made for another model (compare model.* of "
                             "this run with `fabula ckpt info --config %s`)", path, ds, path);
            ckpt_h5_quiet_t q;
            ckpt_h5_quiet_begin(&q);
            hid_t dset = H5Dopen2(file, ds, H5P_DEFAULT);
            hid_t space = dset >= 0 ? H5Dget_space(dset) : -1;
            hsize_t dims[H5_MAX_RANK];
            int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
            if (nd > 0 && nd <= H5_MAX_RANK && H5Sget_simple_extent_dims(space, dims, NULL) < 0)
                nd = -1;
            if (space >= 0)
                H5Sclose(space);
            ckpt_h5_quiet_end(&q);
            d[(size_t)k * (size_t)g->n + (size_t)i] = dset;
            if (nd < 0) {
                snprintf(why, why_len, "tensor %s cannot be read (damaged metadata)", ds);
                close_all(d, n);
                return NULL;
            }
            long long have[2] = {0, 0}, want[2] = {v->shape[0], v->shape[1]};
            for (int a = 0; a < nd && a < 2; a++)
                have[a] = (long long)dims[a];
            if (nd != v->ndim || have[0] != want[0] || (nd == 2 && have[1] != want[1])) {
                char hs[64], ws[64];
                if (nd > 2)
                    snprintf(hs, sizeof hs, "rank %d", nd);
                else
                    shape_text(hs, sizeof hs, nd, have);
                shape_text(ws, sizeof ws, v->ndim, want);
                if (counts_match) {
                    snprintf(why, why_len, "tensor %s has shape %s, the model's is %s (damaged metadata)", ds, hs,
                             ws);
                    close_all(d, n);
                    return NULL;
                }
                fb_fatal_all(FB_EXIT_DATA,
                             "checkpoint %s: tensor %s has shape %s, this model's is %s: the checkpoint was made "
                             "for another model config", path, ds, hs, ws);
            }
        }
        /* a tensor this model does not have: another architecture (only
         * then is the table walked, to name it) */
        if (!counts_match) {
            ckpt_h5_quiet_t q;
            ckpt_h5_quiet_begin(&q);
            H5G_info_t info;
            herr_t rc = H5Gget_info_by_name(file, ckpt_kind_group(k), &info, H5P_DEFAULT);
            ckpt_h5_quiet_end(&q);
            if (rc < 0) {
                snprintf(why, why_len, "group %s cannot be read (damaged metadata)", ckpt_kind_group(k));
                close_all(d, n);
                return NULL;
            }
            for (hsize_t l = 0; info.nlinks != (hsize_t)g->n && l < info.nlinks; l++) {
                char name[256];
                ckpt_h5_quiet_begin(&q);
                ssize_t len = H5Lget_name_by_idx(file, ckpt_kind_group(k), H5_INDEX_NAME, H5_ITER_INC, l, name,
                                                 sizeof name, H5P_DEFAULT);
                ckpt_h5_quiet_end(&q);
                if (len >= 0 && !param_table_find(g, name))
                    fb_fatal_all(FB_EXIT_DATA,
                                 "checkpoint %s: tensor %s/%s is not part of this model: it was made for another "
                                 "model config", path, ckpt_kind_group(k), name);
            }
            if (info.nlinks != (hsize_t)g->n)
                fb_fatal_all(FB_EXIT_DATA,
                             "checkpoint %s holds %lld tensors in %s, this model has %d: it was made for another "
                             "model config", path, (long long)info.nlinks, ckpt_kind_group(k), g->n);
        }
    }
    return d;
}

typedef struct reader {
    const ckpt_target_t *t;
    zero_shard_t shard[PARAM_NGROUPS];
    ckpt_xfer_t xfer;
    float *stage;
    size_t stage_cap;
    int fd;          /* the file, for direct reads (-1: none) */
    off_t file_size;
    int read_errno;  /* the first failed direct read (0: none) and its tensor */
    int err_kind;
    const char *err_name;
} reader_t;

/* Elements of one independent read: 1 MiB, still in cache when it is
 * checksummed, by the thread that read it (direct reads) or by another one
 * while the master reads on (H5Dread). */
#define READ_CHUNK ((size_t)1 << 18)

/* Adds the checksum of local elements [a, b) of view lv, held in
 * x[0, b - a), to *out (ckpt_view_checksum), in a task another thread of
 * the team may run while the master reads on. A sum modulo 2^64, so the
 * order the tasks finish in does not matter. */
static void sum_later(const param_view_t *lv, const float *x, size_t a, size_t b, uint64_t *out)
{
    if (b <= a)
        return;
#pragma omp task firstprivate(lv, x, a, b, out) default(none)
    {
        uint64_t s = ckpt_view_checksum_serial(lv, x, a, b);
#pragma omp atomic
        *out += s;
    }
}

/* Checksum tasks for the part of [ca, cb) inside the write range [wa, wb)
 * of a piece read into host[0..) from its element a, in READ_CHUNK blocks. */
static void sum_range(const float *host, const ckpt_piece_t *pc, size_t ca, size_t cb, uint64_t *out)
{
    size_t from = ca > pc->wa ? ca : pc->wa, to = cb < pc->wb ? cb : pc->wb;
    for (size_t x = from; x < to; x += READ_CHUNK) {
        size_t len = to - x < READ_CHUNK ? to - x : READ_CHUNK;
        sum_later(pc->lv, host + (x - pc->a), x, x + len, out);
    }
}

/* Where the elements of a dataset start in the file, when they can be read
 * there directly: stored contiguously as little-endian float32 on a host
 * whose float is that, every element allocated, and the whole range inside
 * the file. -1 otherwise (another writer's layout, or damaged metadata):
 * the tensor then goes through H5Dread, which handles or reports it. */
static off_t direct_offset(const reader_t *r, hid_t dset, size_t numel)
{
    if (r->fd < 0)
        return -1;
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    off_t at = -1;
    hid_t dcpl = H5Dget_create_plist(dset), ft = H5Dget_type(dset);
    if (dcpl >= 0 && ft >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Tequal(ft, H5T_IEEE_F32LE) > 0 &&
        H5Tequal(H5T_NATIVE_FLOAT, H5T_IEEE_F32LE) > 0 && H5Dget_storage_size(dset) == (hsize_t)numel * 4) {
        haddr_t addr = H5Dget_offset(dset);
        if (addr != HADDR_UNDEF && addr <= (haddr_t)r->file_size && (haddr_t)r->file_size - addr >= (haddr_t)numel * 4)
            at = (off_t)addr;
    }
    if (ft >= 0)
        H5Tclose(ft);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    ckpt_h5_quiet_end(&q);
    return at;
}

/* pread until n bytes are in or it fails; 0 or an errno (EIO for an end of
 * file the size checked above said was not there: the file shrank). */
static int pread_all(int fd, void *buf, size_t n, off_t at)
{
    char *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno ? errno : EIO;
        if (got == 0)
            return EIO;
        p += got;
        n -= (size_t)got;
        at += got;
    }
    return 0;
}

/* One task per READ_CHUNK: read it from the file and checksum its part in
 * the write range while it is in this thread's cache. Any thread may run
 * it: no MPI, no HDF5, just pread on the file's own descriptor. A failure
 * is kept for the master, which ends the job after the taskwait. */
static void direct_read(reader_t *r, const ckpt_piece_t *pc, float *host, off_t at, int kind, const char *name,
                        uint64_t *out)
{
    for (size_t ca = pc->a; ca < pc->b; ca += READ_CHUNK) {
        size_t cb = pc->b - ca < READ_CHUNK ? pc->b : ca + READ_CHUNK;
#pragma omp task firstprivate(r, pc, host, at, kind, name, out, ca, cb) default(none)
        {
            int e = pread_all(r->fd, host + (ca - pc->a), (cb - ca) * sizeof *host,
                              at + (off_t)(param_view_full_pos(pc->lv, ca) * sizeof *host));
            if (e) {
#pragma omp critical(ckpt_read_error)
                if (!r->read_errno) {
                    r->read_errno = e;
                    r->err_kind = kind;
                    r->err_name = name;
                }
            } else {
                size_t from = ca > pc->wa ? ca : pc->wa, to = cb < pc->wb ? cb : pc->wb;
                if (to > from) {
                    uint64_t s = ckpt_view_checksum_serial(pc->lv, host + (from - pc->a), from, to);
#pragma omp atomic
                    *out += s;
                }
            }
        }
    }
}

/* Reads this rank's piece of one tensor into the ZeRO buffers and queues
 * the checksum of the part inside the write range into *sum (complete after
 * the caller's taskwait). Runs on the master thread of a parallel region:
 * MPI, and so HDF5 over MPI-IO, is only called from there
 * (MPI_THREAD_FUNNELED). */
static void read_tensor(reader_t *r, hid_t dset, const param_view_t *gv, const ckpt_piece_t *pc, long long sharers,
                        int kind, const char *path, uint64_t *sum)
{
    float *dst = NULL, *host = NULL;
    const zero_shard_t *sh = pc->lv ? &r->shard[pc->lv->group] : NULL;
    if (pc->b > pc->a) {
        dst = ckpt_shard_base(sh, kind) + (pc->lv->offset + pc->a - sh->lo);
        host = dst;
        if (!ckpt_shard_on_host(r->t, sh, kind)) {
            /* the staging buffer is reused: the last tensor's sums first */
#pragma omp taskwait
            if (pc->b - pc->a > r->stage_cap) {
                free(r->stage);
                r->stage_cap = pc->b - pc->a;
                r->stage = fb_malloc(r->stage_cap * sizeof *r->stage);
            }
            host = r->stage;
        }
    }
    hsize_t dims[2] = {(hsize_t)gv->shape[0], (hsize_t)gv->shape[1]};
    /* a failed read cannot be skipped consistently by all ranks: end the
     * job (the file opened and its metadata read, so this is the file
     * system failing, not the file; a damaged file reads, and fails its
     * checksum) */
    const int collective = r->xfer.all_collective || sharers > 1;
    int rc = 0;
    off_t at;
    if (collective) {
        /* every rank joins the same calls: the whole piece at once */
        rc = ckpt_xfer_run(&r->xfer, dset, gv->ndim, dims, gv->numel, pc->lv, pc->a, pc->b, host, 0, sharers);
        if (rc == 0 && pc->b > pc->a)
            sum_range(host, pc, pc->a, pc->b, sum);
    } else if (pc->b > pc->a && pc->lv->tp_dim != 1 && (at = direct_offset(r, dset, gv->numel)) >= 0) {
        /* (a column slice of tensor parallelism is one run per row: it
         * goes through H5Dread below) */
        /* the bytes HDF5 would move, read by every thread of the team at
         * once: the copy out of the page cache is the cost here, and one
         * thread alone reads slower than dd */
        direct_read(r, pc, host, at, kind, gv->name, sum);
        if (host != dst) {
#pragma omp taskwait
        }
        r->xfer.independent++;
    } else if (pc->b > pc->a) {
        /* in chunks, each checksummed while the next is read; counted as
         * one transfer of the tensor, as the writer counts it */
        const long long before = r->xfer.independent;
        for (size_t ca = pc->a; ca < pc->b && rc == 0; ca += READ_CHUNK) {
            size_t cb = pc->b - ca < READ_CHUNK ? pc->b : ca + READ_CHUNK;
            rc = ckpt_xfer_run(&r->xfer, dset, gv->ndim, dims, gv->numel, pc->lv, ca, cb, host + (ca - pc->a), 0,
                               1);
            if (rc == 0)
                sum_range(host, pc, ca, cb, sum);
        }
        r->xfer.independent = before + 1;
    }
    if (rc < 0)
        fb_fatal(FB_EXIT_IO, "checkpoint %s: reading tensor %s/%s failed (see the HDF5 messages above)", path,
                 ckpt_kind_group(kind), gv->name);
    if (host != dst)
        r->t->ops->to_backend(dst, host, (pc->b - pc->a) * sizeof *host);
}

/* The metadata that decides whether this file is for this run at all. */
static void check_format(const char *path, const ckpt_meta_t *m)
{
    if (strcmp(m->format, CKPT_FORMAT_NAME) != 0)
        fb_fatal_all(FB_EXIT_DATA, "%s: not a fabula checkpoint (format '%s', expected '%s')", path, m->format,
                     CKPT_FORMAT_NAME);
    if (m->version > CKPT_FORMAT_VERSION)
        fb_fatal_all(FB_EXIT_DATA,
                     "%s: checkpoint format version %lld is newer than this fabula reads (version %d); resume it "
                     "with the fabula that wrote it (%s) or a newer one", path, m->version, CKPT_FORMAT_VERSION,
                     m->fabula_version ? m->fabula_version : "unknown");
    if (m->version < 1)
        fb_fatal_all(FB_EXIT_DATA, "%s: checkpoint format version %lld is not valid", path, m->version);
    if (strcmp(m->checksum_name, CKPT_CHECKSUM_NAME) != 0)
        fb_fatal_all(FB_EXIT_DATA, "%s: unknown checksum '%s' (this fabula computes '%s')", path, m->checksum_name,
                     CKPT_CHECKSUM_NAME);
}

int ckpt_read(const ckpt_target_t *t, const char *path, ckpt_progress_t *p, char *why, size_t why_len,
              ckpt_io_stats_t *st)
{
    const double t0 = parallel_wtime();
    const int rank = t->groups->world_rank;
    char msg[1024];
    int code = regular_file_check(path, msg, sizeof msg);
    int err = code == FB_EXIT_IO ? errno : !code && access(path, R_OK) != 0 ? errno : 0;
    if (any_rank(code || err)) {
        if (code == FB_EXIT_DATA) /* its reason, without the path the caller names */
            snprintf(why, why_len, "%s", msg + strlen(path) + 2);
        else
            snprintf(why, why_len, "cannot open: %s", strerror(err ? err : ENOENT));
        return -1;
    }
    hid_t file = ckpt_open_read(path, 1, &t->cfg->checkpoint.mpi_info);
    if (any_rank(file < 0)) {
        if (file >= 0)
            H5Fclose(file);
        snprintf(why, why_len, "HDF5 cannot open it (truncated, or not an HDF5 file)");
        return -1;
    }
    ckpt_meta_t m;
    int bad = ckpt_meta_read(file, &m, why, why_len) < 0;
    if (any_rank(bad)) {
        ckpt_meta_free(&m);
        H5Fclose(file);
        return -1;
    }
    check_format(path, &m);
    char data_why[256];
    if (t->plan && step_plan_state_check(t->plan, &m.data, data_why, sizeof data_why) < 0)
        fb_fatal_all(FB_EXIT_DATA, "checkpoint %s does not fit this run's data: %s", path, data_why);

    param_table_t global;
    param_table_build(&global, &t->cfg->model);
    const int counts_match = m.ntensors == global.n && m.parameters == (long long)param_table_total(&global);
    hid_t *dsets = open_tensors(file, path, &global, counts_match, why, why_len);
    if (any_rank(dsets == NULL)) {
        free(dsets);
        param_table_free(&global);
        ckpt_meta_free(&m);
        H5Fclose(file);
        return -1;
    }

    reader_t r;
    memset(&r, 0, sizeof r);
    r.t = t;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        r.shard[g] = zero_shard(t->zero, g);
    ckpt_xfer_init(&r.xfer, t->cfg->checkpoint.collective_io);
    /* a descriptor of its own for direct reads; without one (or its size)
     * every tensor goes through H5Dread */
    struct stat fst;
    if (regular_file_open(path, &r.fd, msg, sizeof msg) != 0)
        r.fd = -1;
    if (r.fd >= 0 && fstat(r.fd, &fst) != 0) {
        close(r.fd);
        r.fd = -1;
    }
    r.file_size = r.fd >= 0 ? fst.st_size : 0;
    const param_table_t *local = model_params_table(zero_model(t->zero));
    const size_t n = (size_t)global.n * CKPT_NKINDS;
    long long *sharers;
    ckpt_piece_t *pieces = ckpt_pieces_build(r.shard, &global, local, t->groups, CKPT_MOVE_ZERO_RANGE,
                                             &sharers);
    uint64_t *sums = fb_calloc(n, sizeof *sums);
    /* one team for the whole load (not one per tensor, whose barriers cost
     * a time slice each where the cores are shared): the master reads, the
     * others checksum what it has read */
#pragma omp parallel default(shared)
#pragma omp master
    {
        for (int k = 0; k < CKPT_NKINDS; k++)
            for (int i = 0; i < global.n; i++) {
                size_t j = (size_t)k * (size_t)global.n + (size_t)i;
                read_tensor(&r, dsets[j], &global.views[i], &pieces[i], sharers[i], k, path, &sums[j]);
            }
#pragma omp taskwait
    }
    if (r.read_errno)
        fb_fatal(FB_EXIT_IO, "checkpoint %s: reading tensor %s/%s failed: %s", path, ckpt_kind_group(r.err_kind),
                 r.err_name, strerror(r.read_errno));
    if (r.fd >= 0 && close(r.fd) != 0)
        fb_warn("checkpoint %s: closing it: %s", path, strerror(errno));
    free(pieces);
    free(sharers);
    ckpt_allreduce_checksums(sums, n);
    int damaged = 0;
    for (size_t j = 0; j < n; j++) {
        uint64_t stored = 0;
        int missing = ckpt_attr_read_u64(dsets[j], "checksum", &stored) < 0;
        if (missing || stored != sums[j]) {
            if (damaged++ == 0) {
                const char *name = global.views[j % (size_t)global.n].name;
                if (missing)
                    snprintf(why, why_len, "tensor %s/%s has no checksum", ckpt_kind_group((int)(j / global.n)),
                             name);
                else
                    snprintf(why, why_len, "tensor %s/%s: checksum 0x%016llx, stored 0x%016llx",
                             ckpt_kind_group((int)(j / global.n)), name, (unsigned long long)sums[j],
                             (unsigned long long)stored);
            }
        }
        CHECK_H5(H5Dclose(dsets[j]));
    }
    if (damaged > 1) {
        size_t len = strlen(why);
        snprintf(why + len, why_len - len, " (and %d more damaged tensor%s)", damaged - 1, damaged > 2 ? "s" : "");
    }
    free(sums);
    free(dsets);
    free(r.stage);
    ckpt_xfer_free(&r.xfer);
    long long counts[2] = {r.xfer.collective, r.xfer.independent};
    comm_allreduce(comm_world(), counts, 2, COMM_I64, COMM_MAX);
    st->collective = counts[0];
    st->independent = counts[1];
    param_table_free(&global);
    CHECK_H5(H5Fclose(file));
    if (damaged) {
        ckpt_meta_free(&m);
        return -1;
    }

    if (rank == 0 && (uint64_t)m.rng_seed != t->cfg->run.seed)
        fb_warn("checkpoint %s was made with run.seed = %lld; this run uses %llu, so sampling and dropout differ "
                "from the run that wrote it", path, m.rng_seed, (unsigned long long)t->cfg->run.seed);
    if (t->plan)
        step_plan_state_set(t->plan, &m.data);
    zero_set_step_count(t->zero, (long)m.optimizer_step);
    zero_sync_params(t->zero);
    /* a dynamic scaler continues where the saved dynamic one stopped; any
     * other combination starts from the configured scale */
    if (t->scaler && t->scaler->dynamic && m.fp16_enabled && m.fp16_dynamic && m.has_scaler_state) {
        loss_scale_state_t ls = {m.loss_scale, (long)m.scaler_cur_iter, (long)m.scaler_last_overflow_iter,
                                 (int)m.scaler_cur_hysteresis};
        char lwhy[160];
        if (loss_scale_restore(t->scaler, &ls, lwhy, sizeof lwhy) != 0 && rank == 0)
            fb_warn("checkpoint %s: loss scaler state not restored (%s); starting from the configured scale",
                    path, lwhy);
    }
    p->step = (long)m.step;
    p->tokens_seen = m.tokens_seen;
    ckpt_meta_free(&m);

    double bytes = 0.0;
    if (rank == 0) {
        struct stat sb;
        if (stat(path, &sb) == 0)
            bytes = (double)sb.st_size;
    }
    comm_bcast(comm_world(), &bytes, sizeof bytes, 0);
    st->bytes = bytes;
    st->seconds = parallel_wtime() - t0;
    return 0;
}
