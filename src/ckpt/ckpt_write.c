/* Writing a checkpoint: every rank creates the same datasets (collective
 * metadata), writes the part of each tensor inside its ZeRO write range
 * (collectively where several ranks share the tensor: ckpt_xfer_t), and
 * checksums that part; the checksums are summed over the ranks and stored
 * on each dataset. The file is written under a temporary name and renamed
 * once complete. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "model/params.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

/* The file being written, removed by the abort cleanup when the job fails
 * during the save, so that a failed save leaves nothing behind. */
static char tmp_path[4096];
static char final_path[4096];

static void tmp_remove(void)
{
    if (!tmp_path[0])
        return;
    unlink(tmp_path);
    fprintf(stderr, "fabula: checkpoint %s was not written: its temporary file is removed, the earlier "
                    "checkpoints are unchanged\n", final_path);
}

/* A failed write happens on some ranks only, so the job must be aborted;
 * the message goes out first, and is given a moment to reach the launcher
 * before the abort tears the job down. */
static _Noreturn void save_fail(const char *what, const char *name)
{
    if (tmp_path[0])
        unlink(tmp_path);
    tmp_path[0] = '\0';
    fprintf(stderr, "fabula: error: checkpoint %s: %s%s%s failed (disk full or over quota? the HDF5 and MPI "
            "messages above say more); its temporary file is removed, the earlier checkpoints are unchanged\n",
            final_path, what, name ? " " : "", name ? name : "");
    fflush(stderr);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    fb_abort(FB_EXIT_IO);
}

/* fsync by every rank: on a parallel file system each client flushes what
 * it wrote (the MPI-IO aggregators among them). */
static void sync_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        int err = errno;
        fb_fatal(FB_EXIT_IO, "checkpoint %s: fsync of %s: %s", final_path, path, strerror(err));
    }
    if (close(fd) < 0)
        fb_fatal(FB_EXIT_IO, "checkpoint %s: close of %s: %s", final_path, path, strerror(errno));
}

static void sync_dir(const char *path)
{
    char *copy = fb_strdup(path);
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* some file systems cannot fsync a directory (EINVAL) */
    if (fd < 0 || (fsync(fd) < 0 && errno != EINVAL))
        fb_fatal(FB_EXIT_IO, "checkpoint %s: fsync of directory %s: %s", final_path, dir, strerror(errno));
    close(fd);
    free(copy);
}

/* dir/.name.tmp beside dir/name: hidden, and never matched as a checkpoint. */
static void make_tmp_path(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    int w = slash ? snprintf(out, n, "%.*s/.%s.tmp", (int)(slash - path), path, slash + 1)
                  : snprintf(out, n, ".%s.tmp", path);
    if (w < 0 || (size_t)w >= n)
        fb_fatal(FB_EXIT_IO, "checkpoint path too long: %s", path);
}

typedef struct writer {
    const ckpt_target_t *t;
    hid_t file;
    ckpt_xfer_t xfer;
    zero_shard_t shard[PARAM_NGROUPS];
    float *stage;
    size_t stage_cap;
} writer_t;

/* Creates one tensor's dataset (collective), writes this rank's piece of
 * it, returns the piece's checksum. The dataset stays open for its
 * checksum attribute. */
static uint64_t write_tensor(writer_t *w, const param_view_t *gv, const ckpt_piece_t *pc, long long sharers, int kind,
                             hid_t *dset)
{
    char path[160];
    ckpt_dataset_path(path, sizeof path, kind, gv->name);
    hsize_t dims[2] = {(hsize_t)gv->shape[0], (hsize_t)gv->shape[1]};
    hid_t fspace = H5Screate_simple(gv->ndim, dims, NULL);
    CHECK_H5(fspace);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_H5(dcpl);
    /* contiguous, allocated at creation (parallel HDF5's rule), never
     * pre-filled: every element is written once */
    CHECK_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    *dset = H5Dcreate2(w->file, path, H5T_IEEE_F32LE, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (*dset < 0)
        save_fail("creating dataset", path);
    CHECK_H5(H5Pclose(dcpl));
    CHECK_H5(H5Sclose(fspace));

    float *src = NULL;
    if (pc->b > pc->a) {
        const zero_shard_t *sh = &w->shard[pc->lv->group];
        src = ckpt_shard_base(sh, kind) + (pc->lv->offset + pc->a - sh->lo);
        if (!ckpt_shard_on_host(w->t, sh, kind)) {
            if (pc->b - pc->a > w->stage_cap) {
                free(w->stage);
                w->stage_cap = pc->b - pc->a;
                w->stage = fb_malloc(w->stage_cap * sizeof *w->stage);
            }
            w->t->ops->to_host(w->stage, src, (pc->b - pc->a) * sizeof *src);
            src = w->stage;
        }
    }
    uint64_t sum = src ? ckpt_view_checksum(pc->lv, src, pc->a, pc->b) : 0;
    if (ckpt_xfer_run(&w->xfer, *dset, gv->ndim, dims, gv->numel, pc->lv, pc->a, pc->b, src, 1, sharers) < 0)
        save_fail("writing", path);
    return sum;
}

void ckpt_write(const ckpt_target_t *t, const ckpt_progress_t *p, const char *path, ckpt_io_stats_t *st)
{
    const double t0 = parallel_wtime();
    const int rank = t->groups->world_rank;
    if (strlen(path) + 8 >= sizeof final_path)
        fb_fatal(FB_EXIT_IO, "checkpoint path too long: %s", path);
    snprintf(final_path, sizeof final_path, "%s", path);
    char tmp[sizeof tmp_path];
    make_tmp_path(path, tmp, sizeof tmp);
    if (rank == 0) {
        char *copy = fb_strdup(path);
        fs_mkdirs(dirname(copy));
        free(copy);
    }
    comm_barrier(comm_world());
    memcpy(tmp_path, tmp, sizeof tmp_path);
    fb_set_abort_cleanup(tmp_remove);

    writer_t w;
    memset(&w, 0, sizeof w);
    w.t = t;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        w.shard[g] = zero_shard(t->zero, g);
    hid_t fapl = ckpt_fapl(1, &t->cfg->checkpoint.mpi_info);
    w.file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK_H5(H5Pclose(fapl));
    if (w.file < 0)
        save_fail("creating", tmp);
    ckpt_xfer_init(&w.xfer, t->cfg->checkpoint.collective_io);

    ckpt_meta_write(w.file, t, p, w.xfer.coll);
    /* tensors listed in the model's order (creation order), not by name */
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    CHECK_H5(gcpl);
    CHECK_H5(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
    for (int k = 0; k < CKPT_NKINDS; k++) {
        /* "/optimizer" first, as the parent of m and v */
        if (k == CKPT_M) {
            hid_t g = H5Gcreate2(w.file, "/optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            CHECK_H5(g);
            CHECK_H5(H5Gclose(g));
        }
        hid_t g = H5Gcreate2(w.file, ckpt_kind_group(k), H5P_DEFAULT, gcpl, H5P_DEFAULT);
        CHECK_H5(g);
        CHECK_H5(H5Gclose(g));
    }
    CHECK_H5(H5Pclose(gcpl));

    param_table_t global;
    param_table_build(&global, &t->cfg->model);
    const param_table_t *local = model_params_table(zero_model(t->zero));
    const size_t n = (size_t)global.n * CKPT_NKINDS;
    long long *sharers;
    ckpt_piece_t *pieces = ckpt_pieces_build(w.shard, &global, local, t->groups, CKPT_MOVE_WRITE_RANGE, &sharers);
    uint64_t *sums = fb_calloc(n, sizeof *sums);
    hid_t *dsets = fb_calloc(n, sizeof *dsets);
    for (int k = 0; k < CKPT_NKINDS; k++)
        for (int i = 0; i < global.n; i++) {
            size_t j = (size_t)k * (size_t)global.n + (size_t)i;
            sums[j] = write_tensor(&w, &global.views[i], &pieces[i], sharers[i], k, &dsets[j]);
        }
    free(pieces);
    free(sharers);
    ckpt_allreduce_checksums(sums, n);
    for (size_t j = 0; j < n; j++) {
        h5_write_attr_u64(dsets[j], "checksum", sums[j]);
        CHECK_H5(H5Dclose(dsets[j]));
    }
    free(dsets);
    free(sums);
    free(w.stage);
    param_table_free(&global);
    ckpt_xfer_free(&w.xfer);
    if (H5Fclose(w.file) < 0)
        save_fail("closing", tmp);

    long long counts[3] = {w.xfer.not_collective, w.xfer.collective, w.xfer.independent};
    comm_allreduce(comm_world(), counts, 3, COMM_I64, COMM_MAX);
    if (counts[0] > 0 && rank == 0)
        fb_warn("checkpoint %s: %lld collective tensor write(s) were carried out independently by HDF5 (cause "
                "bits local 0x%x, global 0x%x: H5Pget_mpio_no_collective_cause); the file is complete", path,
                counts[0], w.xfer.cause_local, w.xfer.cause_global);
    st->collective = counts[1];
    st->independent = counts[2];

    sync_file(tmp);
    comm_barrier(comm_world());
    double bytes = 0.0;
    if (rank == 0) {
        struct stat sb;
        if (stat(tmp, &sb) < 0)
            fb_fatal(FB_EXIT_IO, "checkpoint %s: stat of %s: %s", path, tmp, strerror(errno));
        bytes = (double)sb.st_size;
        if (rename(tmp, path) < 0)
            fb_fatal(FB_EXIT_IO, "checkpoint %s: rename from %s: %s", path, tmp, strerror(errno));
        sync_dir(path);
    }
    /* nobody goes on (or exits) before the file is in place */
    comm_bcast(comm_world(), &bytes, sizeof bytes, 0);
    fb_set_abort_cleanup(NULL);
    tmp_path[0] = '\0';
    st->bytes = bytes;
    st->seconds = parallel_wtime() - t0;
}
