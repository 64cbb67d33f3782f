/* Collectives on device buffers (comm_device_create), run under mpiexec -n
 * 1, 2 and 4 by tests/e2e/comm_device.sh. Exits 77 (skipped) in a build
 * without CUDA or where no rank sees a GPU.
 *
 * Every collective runs twice on the same data: on device buffers through a
 * device comm, and on host copies through a host comm over the same ranks
 * (the MPI path, which test_comm checks against formulas). The results must
 * agree byte for byte, the elements around the pieces included (both sides
 * start them as the same sentinel), and so must the send buffers, which
 * must come back untouched. Payloads: F32 small integers (exact sums in any
 * order) and BF16 bit patterns (moved, not reduced: the host path cannot
 * reduce bf16); on NCCL also bf16 reductions of small integers, against an
 * F32 host reduction of the same values. Blocking, started and waited, and
 * started and polled with comm_test; several in flight at once; zero counts
 * (an empty piece, row, column and whole call); statistics equal to the
 * host comm's.
 *
 * Comms: the world as comm_device_create chooses (NCCL where every rank has
 * a GPU of its own, staging where ranks share one), the world with staging
 * forced, and pairs of ranks (comm_split). */
#include "build_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

#ifdef HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "ops.h"
#include "testlib.h"

static int wrank;
static char label[96];
static const ops_t *dev_ops;

#define CHECK(cond, ...) EXPECT_RANK(wrank, label, cond, __VA_ARGS__)

static void said(const char *what)
{
    if (wrank == 0)
        printf("checked [%s]: %s\n", label, what);
}

/* ---- one buffer on both sides ------------------------------------------- */

/* The same bytes in host memory (for the host comm) and device memory (for
 * the device comm). */
typedef struct twin {
    size_t bytes;
    unsigned char *h;
    void *d;
} twin_t;

static twin_t twin_new(const unsigned char *init, size_t bytes)
{
    twin_t b = {bytes, fb_malloc(bytes + 1), dev_ops->alloc(bytes + 1)};
    memcpy(b.h, init, bytes);
    dev_ops->to_backend(b.d, init, bytes);
    return b;
}

/* The device bytes must equal the host bytes; frees both. */
static void twin_check_free(twin_t *b, const char *what)
{
    unsigned char *got = fb_malloc(b->bytes + 1);
    dev_ops->to_host(got, b->d, b->bytes);
    size_t i = 0;
    while (i < b->bytes && got[i] == b->h[i])
        i++;
    CHECK(i == b->bytes, "%s: device bytes differ from the host path's at byte %zu of %zu (0x%02x, host 0x%02x)", what,
          i, b->bytes, i < b->bytes ? got[i] : 0, i < b->bytes ? b->h[i] : 0);
    free(got);
    free(b->h);
    dev_ops->release(b->d);
}

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu ^ c * 0xc2b2ae35u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

/* n elements of rank r's data for call `salt`: F32 small integers below
 * `range`; BF16 (or F16) any bit pattern, or with range > 0 a small
 * integer's bf16 encoding (exact, below 256). */
static unsigned char *data(size_t n, comm_dtype_t t, int r, uint32_t salt, uint32_t range)
{
    unsigned char *p = fb_malloc(n * comm_dtype_size(t) + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t h = mix((uint32_t)r, (uint32_t)i, salt);
        if (t == COMM_F32) {
            float v = (float)(h % range);
            memcpy(p + 4 * i, &v, 4);
        } else {
            uint16_t v = (uint16_t)h;
            if (range > 0) {
                float f = (float)(h % range);
                uint32_t bits;
                memcpy(&bits, &f, 4);
                v = (uint16_t)(bits >> 16);
            }
            memcpy(p + 2 * i, &v, 2);
        }
    }
    return p;
}

/* n elements of the sentinel, which no call may write. */
static unsigned char *sentinel(size_t n, comm_dtype_t t)
{
    unsigned char *p = fb_malloc(n * comm_dtype_size(t) + 1);
    memset(p, 0xa5, n * comm_dtype_size(t));
    return p;
}

static const char *dname(comm_dtype_t t) { return t == COMM_F32 ? "f32" : t == COMM_BF16 ? "bf16" : "?"; }

/* ---- completion modes --------------------------------------------------- */

/* 0: the blocking call; 1: start, comm_wait; 2: start, comm_test until 1. */
static const char *const mode_name[] = {"blocking", "non-blocking", "polled"};

static void complete(comm_request_t *r, int mode)
{
    if (mode == 2) {
        double t0 = parallel_wtime();
        int done = 0;
        while (!(done = comm_test(r)) && parallel_wtime() - t0 < 60)
            ;
        CHECK(done, "comm_test did not report completion within 60 s");
        if (done)
            CHECK(comm_test(r) == 1, "comm_test went back to 0 after reporting completion");
    }
    comm_wait(&r);
    CHECK(r == NULL, "comm_wait leaves the handle NULL");
}

/* ---- the collectives ---------------------------------------------------- */

static void allreduce_case(comm_t *hc, comm_t *dc, size_t n, comm_op_t op, int mode)
{
    unsigned char *init = data(n, COMM_F32, comm_rank(hc), 1 + (uint32_t)n, 61);
    twin_t b = twin_new(init, n * 4);
    comm_allreduce(hc, b.h, n, COMM_F32, op);
    if (mode == 0)
        comm_allreduce(dc, b.d, n, COMM_F32, op);
    else
        complete(comm_iallreduce(dc, b.d, n, COMM_F32, op), mode);
    char what[128];
    snprintf(what, sizeof what, "allreduce f32 op %d n=%zu %s", (int)op, n, mode_name[mode]);
    twin_check_free(&b, what);
    free(init);
}

/* Piece j of the send buffer goes to rank j. `equal`: every piece `unit`
 * long (NCCL's reduce-scatter); else lengths vary and rank 1 gets none. */
static void reduce_scatter_case(comm_t *hc, comm_t *dc, size_t unit, int equal, int mode)
{
    int r = comm_rank(hc), p = comm_size(hc);
    size_t *counts = fb_malloc((size_t)p * sizeof *counts), total = 0;
    for (int j = 0; j < p; j++) {
        counts[j] = equal ? unit : (j == 1 ? 0 : unit + 13 * (size_t)j);
        total += counts[j];
    }
    unsigned char *init = data(total, COMM_F32, r, 2, 61), *guard = sentinel(counts[r] + 4, COMM_F32);
    twin_t s = twin_new(init, total * 4), v = twin_new(guard, (counts[r] + 4) * 4);
    comm_reduce_scatter(hc, s.h, v.h, counts, COMM_F32, COMM_SUM);
    if (mode == 0)
        comm_reduce_scatter(dc, s.d, v.d, counts, COMM_F32, COMM_SUM);
    else
        complete(comm_ireduce_scatter(dc, s.d, v.d, counts, COMM_F32, COMM_SUM), mode);
    char what[128];
    snprintf(what, sizeof what, "reduce_scatter f32 %s unit %zu %s", equal ? "equal" : "varied", unit,
             mode_name[mode]);
    twin_check_free(&v, what);
    twin_check_free(&s, "reduce_scatter send buffer");
    free(init);
    free(guard);
    free(counts);
}

/* Layouts of allgatherv: pieces of varied lengths (the last rank sends
 * none) or all `unit` long, in reverse rank order with gaps of 5 that must
 * keep the sentinel; or all `unit` long back to back (NCCL's allgather). */
typedef enum { AG_VARIED, AG_EQUAL_GAPS, AG_PACKED } ag_layout_t;

static void allgatherv_case(comm_t *hc, comm_t *dc, size_t unit, ag_layout_t lay, comm_dtype_t t, int inplace,
                            int mode)
{
    int r = comm_rank(hc), p = comm_size(hc);
    size_t es = comm_dtype_size(t), len = 0;
    size_t *counts = fb_malloc((size_t)p * sizeof *counts), *displs = fb_malloc((size_t)p * sizeof *displs);
    for (int j = p - 1; j >= 0; j--) {
        counts[j] = lay != AG_VARIED ? unit : (j == p - 1 && p > 1 ? 0 : unit + 7 * (size_t)j);
        displs[j] = lay == AG_PACKED ? unit * (size_t)j : len + 5;
        len = lay == AG_PACKED ? unit * (size_t)p : displs[j] + counts[j];
    }
    len += lay == AG_PACKED ? 0 : 5;
    unsigned char *piece = data(counts[r], t, r, 3, 61), *init = sentinel(len, t);
    if (inplace)
        memcpy(init + displs[r] * es, piece, counts[r] * es);
    twin_t s = twin_new(piece, counts[r] * es), v = twin_new(init, len * es);
    if (inplace)
        comm_allgatherv_inplace(hc, v.h, counts, displs, t);
    else
        comm_allgatherv(hc, s.h, counts[r], v.h, counts, displs, t);
    if (inplace && mode == 0)
        comm_allgatherv_inplace(dc, v.d, counts, displs, t);
    else if (inplace)
        complete(comm_iallgatherv_inplace(dc, v.d, counts, displs, t), mode);
    else if (mode == 0)
        comm_allgatherv(dc, s.d, counts[r], v.d, counts, displs, t);
    else
        complete(comm_iallgatherv(dc, s.d, counts[r], v.d, counts, displs, t), mode);
    char what[128];
    static const char *const lname[] = {"varied", "equal with gaps", "packed"};
    snprintf(what, sizeof what, "allgatherv %s %s unit %zu%s %s", dname(t), lname[lay], unit,
             inplace ? " in place" : "", mode_name[mode]);
    twin_check_free(&v, what);
    twin_check_free(&s, "allgatherv send piece");
    free(piece);
    free(init);
    free(counts);
    free(displs);
}

/* Elements rank s sends rank d: zero for a quarter of the pairs; `empty`
 * makes the whole exchange empty. */
static size_t a2a_count(int s, int d, size_t unit, int empty)
{
    return empty ? 0 : (size_t)((s * 3 + d * 5 + 1) % 4) * unit;
}

/* Pieces placed in reverse rank order with gaps (2 in the send buffer, 3
 * in the receive buffer). */
static void alltoallv_case(comm_t *hc, comm_t *dc, size_t unit, int empty, comm_dtype_t t, int mode)
{
    int r = comm_rank(hc), p = comm_size(hc);
    size_t es = comm_dtype_size(t), slen = 0, rlen = 0;
    size_t *sc = fb_malloc(4 * (size_t)p * sizeof *sc), *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
    for (int j = p - 1; j >= 0; j--) {
        sc[j] = a2a_count(r, j, unit, empty);
        sd[j] = slen + 2;
        slen = sd[j] + sc[j];
        rc[j] = a2a_count(j, r, unit, empty);
        rd[j] = rlen + 3;
        rlen = rd[j] + rc[j];
    }
    rlen += 3;
    unsigned char *init = data(slen, t, r, 4, 61), *guard = sentinel(rlen, t);
    twin_t s = twin_new(init, slen * es), v = twin_new(guard, rlen * es);
    comm_alltoallv(hc, s.h, sc, sd, v.h, rc, rd, t);
    if (mode == 0)
        comm_alltoallv(dc, s.d, sc, sd, v.d, rc, rd, t);
    else
        complete(comm_ialltoallv(dc, s.d, sc, sd, v.d, rc, rd, t), mode);
    char what[128];
    snprintf(what, sizeof what, "alltoallv %s unit %zu%s %s", dname(t), unit, empty ? " (all empty)" : "",
             mode_name[mode]);
    twin_check_free(&v, what);
    twin_check_free(&s, "alltoallv send buffer");
    free(init);
    free(guard);
    free(sc);
}

static void alltoall_case(comm_t *hc, comm_t *dc, size_t count, comm_dtype_t t, int mode)
{
    int p = comm_size(hc);
    size_t es = comm_dtype_size(t), n = count * (size_t)p;
    unsigned char *init = data(n, t, comm_rank(hc), 5, 61), *guard = sentinel(n + 2, t);
    twin_t s = twin_new(init, n * es), v = twin_new(guard, (n + 2) * es);
    comm_alltoall(hc, s.h, v.h, count, t);
    if (mode == 0)
        comm_alltoall(dc, s.d, v.d, count, t);
    else
        complete(comm_ialltoall(dc, s.d, v.d, count, t), mode);
    char what[128];
    snprintf(what, sizeof what, "alltoall %s count %zu %s", dname(t), count, mode_name[mode]);
    twin_check_free(&v, what);
    twin_check_free(&s, "alltoall send buffer");
    free(init);
    free(guard);
}

/* Non-root ranks start with their own bytes, which the root's replace. */
static void bcast_case(comm_t *hc, comm_t *dc, size_t bytes, int root, int mode)
{
    unsigned char *init = data(bytes + 3, COMM_BF16, comm_rank(hc), 6, 0);
    twin_t b = twin_new(init, bytes + 3);
    comm_bcast(hc, b.h, bytes, root);
    if (mode == 0)
        comm_bcast(dc, b.d, bytes, root);
    else
        complete(comm_ibcast(dc, b.d, bytes, root), mode);
    char what[128];
    snprintf(what, sizeof what, "bcast %zu bytes from %d %s", bytes, root, mode_name[mode]);
    twin_check_free(&b, what);
    free(init);
}

/* ---- several in flight --------------------------------------------------- */

/* Five calls started back to back on the device comm (each staged request
 * needs a buffer of its own), polled together, then waited in one
 * comm_waitall; the host comm does the same calls blocking. */
static void in_flight(comm_t *hc, comm_t *dc)
{
    int r = comm_rank(hc), p = comm_size(hc);
    size_t n = 50000, *counts = fb_malloc(2 * (size_t)p * sizeof *counts), *displs = counts + p;
    for (int j = 0; j < p; j++) {
        counts[j] = 1000 + (size_t)j;
        displs[j] = (j == 0 ? 0 : displs[j - 1] + counts[j - 1]) + 1;
    }
    size_t glen = displs[p - 1] + counts[p - 1] + 1;
    unsigned char *ar = data(n, COMM_F32, r, 7, 61), *rs = data(n * (size_t)p, COMM_F32, r, 8, 61);
    unsigned char *gp = data(counts[r], COMM_BF16, r, 9, 0), *gv = sentinel(glen, COMM_BF16);
    unsigned char *bc = data(777, COMM_BF16, r, 10, 0), *rv = sentinel(n, COMM_F32);
    unsigned char *a2s = data(64 * (size_t)p, COMM_F32, r, 11, 61), *a2r = sentinel(64 * (size_t)p, COMM_F32);
    twin_t t_ar = twin_new(ar, n * 4), t_rs = twin_new(rs, n * (size_t)p * 4), t_rv = twin_new(rv, n * 4);
    twin_t t_gp = twin_new(gp, counts[r] * 2), t_gv = twin_new(gv, glen * 2), t_bc = twin_new(bc, 777 * 2);
    twin_t t_a2s = twin_new(a2s, 64 * (size_t)p * 4), t_a2r = twin_new(a2r, 64 * (size_t)p * 4);
    size_t *rcounts = fb_malloc((size_t)p * sizeof *rcounts);
    for (int j = 0; j < p; j++)
        rcounts[j] = n;

    comm_allreduce(hc, t_ar.h, n, COMM_F32, COMM_SUM);
    comm_reduce_scatter(hc, t_rs.h, t_rv.h, rcounts, COMM_F32, COMM_MAX);
    comm_allgatherv(hc, t_gp.h, counts[r], t_gv.h, counts, displs, COMM_BF16);
    comm_bcast(hc, t_bc.h, 777 * 2, p - 1);
    comm_alltoall(hc, t_a2s.h, t_a2r.h, 64, COMM_F32);

    comm_request_t *req[5] = {
        comm_iallreduce(dc, t_ar.d, n, COMM_F32, COMM_SUM),
        comm_ireduce_scatter(dc, t_rs.d, t_rv.d, rcounts, COMM_F32, COMM_MAX),
        comm_iallgatherv(dc, t_gp.d, counts[r], t_gv.d, counts, displs, COMM_BF16),
        comm_ibcast(dc, t_bc.d, 777 * 2, p - 1),
        comm_ialltoall(dc, t_a2s.d, t_a2r.d, 64, COMM_F32),
    };
    /* The arrays were copied by the calls. */
    memset(rcounts, 0, (size_t)p * sizeof *rcounts);
    double t0 = parallel_wtime();
    int done = 0;
    while (done < 5 && parallel_wtime() - t0 < 60) {
        done = 0;
        for (int i = 0; i < 5; i++)
            done += comm_test(req[i]);
    }
    CHECK(done == 5, "only %d of 5 requests in flight completed within 60 s", done);
    comm_waitall(req, 5);
    CHECK(!req[0] && !req[1] && !req[2] && !req[3] && !req[4], "comm_waitall leaves the handles NULL");
    twin_check_free(&t_ar, "in flight: allreduce f32 sum");
    twin_check_free(&t_rv, "in flight: reduce_scatter f32 max");
    twin_check_free(&t_gv, "in flight: allgatherv bf16");
    twin_check_free(&t_bc, "in flight: bcast");
    twin_check_free(&t_a2r, "in flight: alltoall f32");
    twin_check_free(&t_rs, "in flight: reduce_scatter send buffer");
    twin_check_free(&t_gp, "in flight: allgatherv send piece");
    twin_check_free(&t_a2s, "in flight: alltoall send buffer");
    free(ar);
    free(rs);
    free(gp);
    free(gv);
    free(bc);
    free(rv);
    free(a2s);
    free(a2r);
    free(counts);
    free(rcounts);
}

/* ---- bf16 reductions (NCCL only) ----------------------------------------- */

/* The same small integers as bf16 on the device and f32 on the host; sums
 * stay below 256, so bf16 holds every partial sum exactly and the device
 * result must be the host's f32 result in bf16. */
static void bf16_reduce_case(comm_t *hc, comm_t *dc, size_t n, comm_op_t op, int scatter, int mode)
{
    int r = comm_rank(hc), p = comm_size(hc);
    uint32_t range = 255 / (uint32_t)p;
    size_t *counts = fb_malloc((size_t)p * sizeof *counts), total = scatter ? 0 : n;
    for (int j = 0; scatter && j < p; j++) {
        counts[j] = j == 1 ? 0 : n + 5 * (size_t)j;
        total += counts[j];
    }
    size_t out = scatter ? counts[r] : n;
    unsigned char *f = data(total, COMM_F32, r, 12, range), *h = data(total, COMM_BF16, r, 12, range);
    float *href = fb_malloc((out + 1) * sizeof *href);
    void *dsend = dev_ops->alloc(total * 2 + 1), *drecv = dev_ops->alloc(out * 2 + 1);
    dev_ops->to_backend(dsend, h, total * 2);
    comm_request_t *req = NULL;
    if (scatter) {
        comm_reduce_scatter(hc, f, href, counts, COMM_F32, op);
        if (mode == 0)
            comm_reduce_scatter(dc, dsend, drecv, counts, COMM_BF16, op);
        else
            req = comm_ireduce_scatter(dc, dsend, drecv, counts, COMM_BF16, op);
    } else {
        comm_allreduce(hc, f, n, COMM_F32, op);
        memcpy(href, f, n * 4);
        if (mode == 0)
            comm_allreduce(dc, dsend, n, COMM_BF16, op);
        else
            req = comm_iallreduce(dc, dsend, n, COMM_BF16, op);
    }
    if (req)
        complete(req, mode);
    uint16_t *got = fb_malloc((out + 1) * sizeof *got);
    dev_ops->to_host(got, scatter ? drecv : dsend, out * 2);
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < out; k++) {
        uint32_t bits;
        memcpy(&bits, &href[k], 4);
        if (((bits & 0xffffu) != 0 || got[k] != (uint16_t)(bits >> 16)) && bad++ == 0)
            first = k;
    }
    CHECK(bad == 0, "bf16 %s op %d n=%zu %s: %zu of %zu wrong, first [%zu] = 0x%04x, want %g",
          scatter ? "reduce_scatter" : "allreduce", (int)op, n, mode_name[mode], bad, out, first,
          out ? got[first] : 0, out ? (double)href[first] : 0.0);
    dev_ops->release(dsend);
    dev_ops->release(drecv);
    free(f);
    free(h);
    free(href);
    free(got);
    free(counts);
}

/* ---- the suite ------------------------------------------------------------ */

static void check_stats(comm_t *hc, comm_t *dc)
{
    int bad = 0;
    for (int k = 0; k < COMM_KIND_COUNT; k++) {
        const comm_stats_t *h = comm_stats(hc, (comm_kind_t)k), *d = comm_stats(dc, (comm_kind_t)k);
        if (h->calls != d->calls || h->bytes != d->bytes) {
            bad++;
            printf("FAIL rank %d [%s]: %s: device comm counted %llu calls, %llu bytes; host comm %llu, %llu\n",
                   wrank, label, comm_kind_name((comm_kind_t)k), (unsigned long long)d->calls,
                   (unsigned long long)d->bytes, (unsigned long long)h->calls, (unsigned long long)h->bytes);
        }
        if (d->wait_seconds < 0)
            bad++;
    }
    failures += bad;
}

static void suite(comm_t *hc, comm_t *dc)
{
    int p = comm_size(hc);
    comm_stats_reset(hc);
    comm_stats_reset(dc);
    for (int mode = 0; mode < 3; mode++) {
        const size_t sizes[] = {0, 1, 1000, (size_t)1 << 20};
        for (int i = 0; i < 4; i++)
            allreduce_case(hc, dc, sizes[i], COMM_SUM, mode);
        allreduce_case(hc, dc, 4099, COMM_MAX, mode);
        allreduce_case(hc, dc, 4099, COMM_MIN, mode);
        reduce_scatter_case(hc, dc, 3000, 0, mode);
        reduce_scatter_case(hc, dc, 2048, 1, mode);
        reduce_scatter_case(hc, dc, 0, 1, mode);
        for (int inplace = 0; inplace < 2; inplace++)
            for (int t = 0; t < 2; t++) {
                comm_dtype_t dt = t ? COMM_BF16 : COMM_F32;
                allgatherv_case(hc, dc, 500, AG_VARIED, dt, inplace, mode);
                allgatherv_case(hc, dc, 200, AG_EQUAL_GAPS, dt, inplace, mode);
                allgatherv_case(hc, dc, 300, AG_PACKED, dt, inplace, mode);
                allgatherv_case(hc, dc, 0, AG_PACKED, dt, inplace, mode);
            }
        alltoallv_case(hc, dc, 333, 0, COMM_F32, mode);
        alltoallv_case(hc, dc, 100000, 0, COMM_BF16, mode);
        alltoallv_case(hc, dc, 1, 1, COMM_F32, mode);
        alltoall_case(hc, dc, 1000, COMM_BF16, mode);
        alltoall_case(hc, dc, 3, COMM_F32, mode);
        alltoall_case(hc, dc, 0, COMM_F32, mode);
        bcast_case(hc, dc, 100001, p - 1, mode);
        bcast_case(hc, dc, 0, 0, mode);
    }
    said("allreduce f32 sum n = 0, 1, 1000, 2^20, max, min; reduce_scatter f32 varied (rank 1 gets 0), equal, "
         "empty; allgatherv f32/bf16 varied with gaps (last rank sends 0), equal with gaps, packed, empty, in place "
         "and not; alltoallv f32/bf16 with empty pairs, all empty; alltoall bf16/f32 count 1000, 3, 0; bcast 100001 "
         "and 0 bytes; each blocking, non-blocking and polled; device result = host result byte for byte");
    /* Staging splits by the host path's limit; NCCL takes any count. */
    comm_set_max_count(1000);
    allreduce_case(hc, dc, 10007, COMM_SUM, 0);
    bcast_case(hc, dc, 4321, 0, 1);
    comm_set_max_count(0);
    said("allreduce and bcast with the per-call limit lowered to 1000 elements");
    in_flight(hc, dc);
    said("5 collectives in flight at once, polled with comm_test, then comm_waitall");
    comm_barrier(hc);
    comm_barrier(dc);
    check_stats(hc, dc);
    said("statistics (calls and bytes per kind) equal to the host comm's");
    if (comm_device_uses_nccl(dc)) {
        for (int mode = 0; mode < 2; mode++) {
            bf16_reduce_case(hc, dc, 3001, COMM_SUM, 0, mode);
            bf16_reduce_case(hc, dc, 3001, COMM_MAX, 0, mode);
            bf16_reduce_case(hc, dc, 1500, COMM_SUM, 1, mode);
            bf16_reduce_case(hc, dc, 0, COMM_SUM, 0, mode);
        }
        said("NCCL bf16 allreduce sum/max, reduce_scatter sum (varied counts), n = 0, against f32 on the host");
    }
}

static void run_on(comm_t *hc, const char *name, int force_staging)
{
    comm_device_set_force_staging(force_staging);
    comm_t *dc = comm_device_create(hc);
    comm_device_set_force_staging(0);
    int nccl = comm_device_uses_nccl(dc);
    snprintf(label, sizeof label, "%s, %d ranks, %s", name, comm_size(hc), nccl ? "NCCL" : "staging");
    CHECK(comm_rank(dc) == comm_rank(hc) && comm_size(dc) == comm_size(hc), "device comm rank %d/%d, host %d/%d",
          comm_rank(dc), comm_size(dc), comm_rank(hc), comm_size(hc));
    CHECK(!force_staging || !nccl, "staging was forced but the comm uses NCCL");
#ifndef HAVE_NCCL
    CHECK(!nccl, "a build without NCCL made an NCCL comm");
#endif
    suite(hc, dc);
    comm_free(&dc);
    CHECK(dc == NULL, "comm_free clears the handle");
}

static int run(void)
{
    comm_t *world = comm_create_world();
    int32_t ngpu = cuda_device_count();
    comm_allreduce(world, &ngpu, 1, COMM_I32, COMM_MIN);
    if (ngpu == 0) {
        if (wrank == 0)
            printf("SKIP: no CUDA device visible on some rank\n");
        comm_free(&world);
        parallel_finalize();
        return 77;
    }
    int device = parallel_local_rank() % ngpu;
    char err[256];
    if (cuda_backend_init(device, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "cuda_backend_init(%d): %s", device, err);
    dev_ops = ops_cuda(FB_DTYPE_BF16);
    int size = parallel_size();
    if (wrank == 0)
        printf("%d rank(s), %d on this node, %d GPU(s) each visible\n", size, parallel_local_size(), ngpu);

    CHECK(!comm_device_uses_nccl(world), "a host comm reports NCCL");
    run_on(world, "world", 0);
    /* Ranks sharing a GPU rule NCCL out; NCCL must be chosen where it can. */
    int shared = parallel_local_size() > ngpu;
    comm_t *probe = comm_device_create(world);
#ifdef HAVE_NCCL
    CHECK(size > parallel_local_size() || comm_device_uses_nccl(probe) == !shared,
          "comm_device_create chose %s for %d ranks on one node with %d GPU(s)",
          comm_device_uses_nccl(probe) ? "NCCL" : "staging", parallel_local_size(), ngpu);
#else
    (void)shared;
#endif
    int probed_nccl = comm_device_uses_nccl(probe);
    comm_free(&probe);
    if (probed_nccl)
        run_on(world, "world", 1);
    if (size >= 2 && size % 2 == 0) {
        comm_t *pairs = comm_split(world, wrank / 2, wrank);
        run_on(pairs, "pairs", 0);
        comm_free(&pairs);
    }

    long long total = failures;
    comm_allreduce(comm_world(), &total, 1, COMM_I64, COMM_SUM);
    if (wrank == 0)
        printf("%s: %lld failures over %d ranks\n", total ? "FAIL" : "PASS", total, size);
    comm_free(&world);
    cuda_backend_shutdown();
    parallel_finalize();
    return total ? 1 : 0;
}
#endif /* HAVE_CUDA */

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
#ifdef HAVE_CUDA
    wrank = parallel_rank();
    return run();
#else
    if (parallel_rank() == 0)
        printf("SKIP: fabula was built without CUDA\n");
    parallel_finalize();
    return 77;
#endif
}
