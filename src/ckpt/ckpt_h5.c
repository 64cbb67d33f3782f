/* The HDF5 plumbing the checkpoint writer, reader and inspector share:
 * file access properties, flat-range selections, and the attributes
 * h5tensor does not have. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "parallel/comm.h"
#include "parallel/mpi_io.h"
#include "util/error.h"

static const char *const kind_groups[CKPT_NKINDS] = {"/params", "/optimizer/m", "/optimizer/v"};

const char *ckpt_kind_group(int kind)
{
    FB_ASSERT(kind >= 0 && kind < CKPT_NKINDS);
    return kind_groups[kind];
}

void ckpt_dataset_path(char *buf, size_t n, int kind, const char *name)
{
    int w = snprintf(buf, n, "%s/%s", ckpt_kind_group(kind), name);
    FB_ASSERT(w > 0 && (size_t)w < n);
}

hid_t ckpt_fapl(int parallel, const mpi_hints_t *hints)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_H5(fapl);
    /* the 1.8 object format: attributes over 64 KiB (the config) go to
     * dense storage instead of failing */
    CHECK_H5(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST));
    if (parallel) {
        parallel_h5_fapl_mpio(fapl, comm_world(), hints);
        /* metadata read once and broadcast, written once, instead of every
         * rank touching the same blocks */
        CHECK_H5(H5Pset_all_coll_metadata_ops(fapl, 1));
        CHECK_H5(H5Pset_coll_metadata_write(fapl, 1));
        CHECK_H5(H5Pset_alignment(fapl, CKPT_ALIGN_THRESHOLD, CKPT_ALIGNMENT));
    }
    return fapl;
}

void ckpt_select_flat(hid_t space, int ndim, const hsize_t *dims, size_t a, size_t b)
{
    FB_ASSERT(a < b);
    if (ndim == 1) {
        hsize_t start[1] = {a}, count[1] = {b - a};
        CHECK_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
        return;
    }
    FB_ASSERT(ndim == 2 && dims[1] > 0);
    const hsize_t cols = dims[1];
    hsize_t r0 = a / cols, c0 = a % cols, r1 = b / cols, c1 = b % cols;
    H5S_seloper_t op = H5S_SELECT_SET;
    if (r0 == r1) {
        hsize_t start[2] = {r0, c0}, count[2] = {1, c1 - c0};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        return;
    }
    if (c0 > 0) {
        hsize_t start[2] = {r0, c0}, count[2] = {1, cols - c0};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        op = H5S_SELECT_OR;
        r0++;
    }
    if (r1 > r0) {
        hsize_t start[2] = {r0, 0}, count[2] = {r1 - r0, cols};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        op = H5S_SELECT_OR;
    }
    if (c1 > 0) {
        hsize_t start[2] = {r1, 0}, count[2] = {1, c1};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
    }
}

void ckpt_select_view(hid_t space, int ndim, const hsize_t *dims, const param_view_t *lv, size_t a, size_t b)
{
    FB_ASSERT(a < b);
    if (!lv || lv->tp_dim != 1) {
        const size_t at = lv ? param_view_full_pos(lv, a) : a;
        ckpt_select_flat(space, ndim, dims, at, at + (b - a));
        return;
    }
    /* a column block [off, off + cols) of the full rows: the local flat
     * range is a partial first row, whole rows, a partial last row of the
     * block, which HDF5 visits in the same row-major order */
    FB_ASSERT(ndim == 2);
    const hsize_t cols = (hsize_t)lv->shape[1], off = (hsize_t)lv->tp_off;
    hsize_t r0 = a / cols, c0 = a % cols, r1 = b / cols, c1 = b % cols;
    H5S_seloper_t op = H5S_SELECT_SET;
    if (r0 == r1) {
        hsize_t start[2] = {r0, off + c0}, count[2] = {1, c1 - c0};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        return;
    }
    if (c0 > 0) {
        hsize_t start[2] = {r0, off + c0}, count[2] = {1, cols - c0};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        op = H5S_SELECT_OR;
        r0++;
    }
    if (r1 > r0) {
        hsize_t start[2] = {r0, off}, count[2] = {r1 - r0, cols};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
        op = H5S_SELECT_OR;
    }
    if (c1 > 0) {
        hsize_t start[2] = {r1, off}, count[2] = {1, c1};
        CHECK_H5(H5Sselect_hyperslab(space, op, start, NULL, count, NULL));
    }
}

uint64_t ckpt_view_checksum_serial(const param_view_t *lv, const float *x, size_t a, size_t b)
{
    uint64_t sum = 0;
    for (size_t e = a; e < b;) {
        size_t run = lv ? param_view_run(lv, e) : b - e;
        run = run < b - e ? run : b - e;
        sum += ckpt_checksum_serial(x + (e - a), run, lv ? param_view_full_pos(lv, e) : e);
        e += run;
    }
    return sum;
}

uint64_t ckpt_view_checksum(const param_view_t *lv, const float *x, size_t a, size_t b)
{
    if (b <= a)
        return 0;
    if (!lv || lv->tp_dim != 1)
        return ckpt_checksum(x, b - a, lv ? param_view_full_pos(lv, a) : a);
    /* a column slice: one run per row, the rows over the threads */
    const size_t cols = (size_t)lv->shape[1], r0 = a / cols, r1 = (b - 1) / cols;
    uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (r1 - r0 >= 64)
    for (size_t r = r0; r <= r1; r++) {
        size_t from = r * cols > a ? r * cols : a, to = (r + 1) * cols < b ? (r + 1) * cols : b;
        sum += ckpt_checksum_serial(x + (from - a), to - from, param_view_full_pos(lv, from));
    }
    return sum;
}

const param_view_t *ckpt_local_view(const param_table_t *local, int i, const param_view_t *gv)
{
    const param_view_t *lv = i < local->n && !strcmp(local->views[i].name, gv->name)
                                 ? &local->views[i]
                                 : param_table_find(local, gv->name);
    /* a tensor-parallel slice of the whole tensor gv */
    FB_ASSERT(!lv || (lv->ndim == gv->ndim && lv->full_shape[0] == gv->shape[0] &&
                      lv->full_shape[1] == gv->shape[1]));
    return lv;
}

float *ckpt_shard_base(const zero_shard_t *sh, int kind)
{
    return kind == CKPT_PARAMS ? sh->params : kind == CKPT_M ? sh->m : sh->v;
}

int ckpt_shard_on_host(const ckpt_target_t *t, const zero_shard_t *sh, int kind)
{
    if (t->ops == ops_cpu())
        return 1;
    return kind == CKPT_PARAMS ? sh->params_host : sh->moments_host;
}

/* Two 32-bit halves, each summed as an int64: exact for any number of
 * ranks below 2^31, and MPI has no modular 64-bit sum. */
void ckpt_allreduce_checksums(uint64_t *sums, size_t n)
{
    long long *halves = fb_malloc(2 * n * sizeof *halves);
    for (size_t i = 0; i < n; i++) {
        halves[2 * i] = (long long)(sums[i] >> 32);
        halves[2 * i + 1] = (long long)(sums[i] & 0xffffffffu);
    }
    comm_allreduce(comm_world(), halves, 2 * n, COMM_I64, COMM_SUM);
    for (size_t i = 0; i < n; i++)
        sums[i] = ((uint64_t)halves[2 * i] << 32) + (uint64_t)halves[2 * i + 1];
    free(halves);
}

void ckpt_xfer_init(ckpt_xfer_t *x, int all_collective)
{
    memset(x, 0, sizeof *x);
    x->all_collective = all_collective;
    x->coll = H5Pcreate(H5P_DATASET_XFER);
    CHECK_H5(x->coll);
    parallel_h5_dxpl_collective(x->coll);
    x->indep = H5Pcreate(H5P_DATASET_XFER);
    CHECK_H5(x->indep);
    parallel_h5_dxpl_independent(x->indep);
}

void ckpt_xfer_free(ckpt_xfer_t *x)
{
    CHECK_H5(H5Pclose(x->coll));
    CHECK_H5(H5Pclose(x->indep));
}

/* The elements of view lv inside [lo, hi) of its group, as [*a, *b) from
 * the view's start; left as they are when there are none. */
static void view_part(const param_view_t *lv, size_t lo, size_t hi, size_t *a, size_t *b)
{
    size_t end = lv->offset + lv->numel;
    size_t from = lv->offset > lo ? lv->offset : lo, to = end < hi ? end : hi;
    if (to > from) {
        *a = from - lv->offset;
        *b = to - lv->offset;
    }
}

static ckpt_piece_t piece_of(const zero_shard_t *shard, const param_view_t *lv, int move)
{
    ckpt_piece_t pc = {lv, 0, 0, 0, 0};
    if (!lv)
        return pc;
    const zero_shard_t *sh = &shard[lv->group];
    view_part(lv, sh->write_lo, sh->write_hi, &pc.wa, &pc.wb);
    if (move == CKPT_MOVE_WRITE_RANGE) {
        pc.a = pc.wa;
        pc.b = pc.wb;
    } else {
        view_part(lv, sh->lo, sh->hi, &pc.a, &pc.b);
        FB_ASSERT(pc.wb <= pc.wa || (pc.wa >= pc.a && pc.wb <= pc.b));
    }
    return pc;
}

ckpt_piece_t *ckpt_pieces_build(const zero_shard_t *shard, const param_table_t *global, const param_table_t *local,
                                const groups_t *groups, int move, long long **sharers)
{
    const int n = global->n;
    ckpt_piece_t *pieces = fb_calloc((size_t)n, sizeof *pieces);
    long long *count = fb_calloc((size_t)n, sizeof *count);
    /* The ranks of one (tp, pp) coordinate partition a tensor by their
     * write ranges; a tensor held whole on every tp rank (a norm, the
     * router), a kv head's slice held by the tp ranks sharing it, or a
     * tensor on more than one stage is written and checksummed by the
     * copies of the lowest coordinate alone (tp_copy 0), so that every
     * element counts once in the stored sum. */
    long long *replica = fb_malloc((size_t)n * sizeof *replica);
    const param_view_t **lvs = fb_malloc((size_t)n * sizeof *lvs);
    for (int i = 0; i < n; i++) {
        lvs[i] = ckpt_local_view(local, i, &global->views[i]);
        replica[i] = !lvs[i] ? LLONG_MAX
                             : (long long)lvs[i]->tp_copy * groups->pp_size + groups->pp_rank;
    }
    comm_allreduce(comm_world(), replica, (size_t)n, COMM_I64, COMM_MIN);
    for (int i = 0; i < n; i++) {
        pieces[i] = piece_of(shard, lvs[i], move);
        if (lvs[i] && replica[i] != (long long)lvs[i]->tp_copy * groups->pp_size + groups->pp_rank) {
            pieces[i].wa = pieces[i].wb = 0;
            if (move == CKPT_MOVE_WRITE_RANGE)
                pieces[i].a = pieces[i].b = 0;
        }
        count[i] = pieces[i].b > pieces[i].a ? 1 : 0;
    }
    free(replica);
    free(lvs);
    comm_allreduce(comm_world(), count, (size_t)n, COMM_I64, COMM_SUM);
    *sharers = count;
    return pieces;
}

int ckpt_xfer_run(ckpt_xfer_t *x, hid_t dset, int ndim, const hsize_t *dims, size_t numel, const param_view_t *lv,
                  size_t a, size_t b, float *buf, int write, long long sharers)
{
    const int collective = x->all_collective || sharers > 1;
    if (!collective && b <= a)
        return 0;
    hid_t dxpl = collective ? x->coll : x->indep;
    hid_t fspace = H5Dget_space(dset);
    CHECK_H5(fspace);
    /* a collective transfer needs the same number of calls on every rank */
    size_t rounds = collective ? (numel + CKPT_ROUND_ELEMENTS - 1) / CKPT_ROUND_ELEMENTS
                               : (b - a + CKPT_ROUND_ELEMENTS - 1) / CKPT_ROUND_ELEMENTS;
    int rc = 0;
    for (size_t k = 0; k < rounds && rc == 0; k++) {
        size_t ka = a + (b - a) * k / rounds, kb = a + (b - a) * (k + 1) / rounds;
        hsize_t mdims[1] = {kb > ka ? kb - ka : 1};
        hid_t mspace = H5Screate_simple(1, mdims, NULL);
        CHECK_H5(mspace);
        float dummy[1] = {0.0f};
        if (kb > ka) {
            ckpt_select_view(fspace, ndim, dims, lv, ka, kb);
        } else {
            CHECK_H5(H5Sselect_none(fspace));
            CHECK_H5(H5Sselect_none(mspace));
        }
        float *p = kb > ka ? buf + (ka - a) : dummy;
        herr_t e = write ? H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, p)
                         : H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, p);
        if (e < 0) {
            rc = -1;
        } else if (collective) {
            x->collective++;
            H5D_mpio_actual_io_mode_t mode;
            CHECK_H5(H5Pget_mpio_actual_io_mode(dxpl, &mode));
            if (mode == H5D_MPIO_NO_COLLECTIVE) {
                uint32_t local = 0, global = 0;
                x->not_collective++;
                CHECK_H5(H5Pget_mpio_no_collective_cause(dxpl, &local, &global));
                x->cause_local = local;
                x->cause_global = global;
            }
        } else {
            x->independent++;
        }
        CHECK_H5(H5Sclose(mspace));
    }
    CHECK_H5(H5Sclose(fspace));
    return rc;
}

/* ------------------------------------------------------------ attributes */

void ckpt_h5_quiet_begin(ckpt_h5_quiet_t *q)
{
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &q->func, &q->client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
}

void ckpt_h5_quiet_end(const ckpt_h5_quiet_t *q) { CHECK_H5(H5Eset_auto2(H5E_DEFAULT, q->func, q->client)); }

hid_t ckpt_open_read(const char *path, int parallel, const mpi_hints_t *hints)
{
    /* H5Fopen opens by name: a FIFO there would block it for good (the
     * callers say what the file is; this is the last guard) */
    char why[64];
    if (regular_file_check(path, why, sizeof why) != 0)
        return -1;
    hid_t fapl = ckpt_fapl(parallel, hints);
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    ckpt_h5_quiet_end(&q);
    CHECK_H5(H5Pclose(fapl));
    return f;
}

/* Reads a numeric attribute of exactly n elements, converted to mtype. */
static int attr_read(hid_t obj, const char *name, hid_t mtype, size_t n, void *out)
{
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    int rc = -1;
    if (H5Aexists(obj, name) > 0) {
        hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
        if (a >= 0) {
            hid_t space = H5Aget_space(a);
            hid_t ft = H5Aget_type(a);
            hssize_t np = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
            H5T_class_t cls = ft >= 0 ? H5Tget_class(ft) : H5T_NO_CLASS;
            if (np == (hssize_t)n && (cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Aread(a, mtype, out) >= 0)
                rc = 0;
            if (ft >= 0)
                H5Tclose(ft);
            if (space >= 0)
                H5Sclose(space);
            H5Aclose(a);
        }
    }
    ckpt_h5_quiet_end(&q);
    return rc;
}

int ckpt_attr_read_u64(hid_t obj, const char *name, uint64_t *v)
{
    unsigned long long x = 0;
    int rc = attr_read(obj, name, H5T_NATIVE_ULLONG, 1, &x);
    *v = x;
    return rc;
}

int ckpt_attr_read_i64(hid_t obj, const char *name, long long *v)
{
    return attr_read(obj, name, H5T_NATIVE_LLONG, 1, v);
}

int ckpt_attr_read_f64(hid_t obj, const char *name, double *v)
{
    return attr_read(obj, name, H5T_NATIVE_DOUBLE, 1, v);
}

int ckpt_attr_read_i64s(hid_t obj, const char *name, long long *v, size_t n)
{
    return attr_read(obj, name, H5T_NATIVE_LLONG, n, v);
}

char *ckpt_attr_read_string(hid_t obj, const char *name)
{
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    htri_t exists = H5Aexists(obj, name);
    hid_t a = exists > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : -1;
    hid_t ft = a >= 0 ? H5Aget_type(a) : -1;
    int is_string = ft >= 0 && H5Tget_class(ft) == H5T_STRING;
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    ckpt_h5_quiet_end(&q);
    /* present and a string: h5tensor's reader handles both string kinds */
    return is_string ? h5_read_attr_string(obj, name) : NULL;
}
