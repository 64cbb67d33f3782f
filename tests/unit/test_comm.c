/* The comm API and the process groups, run under mpiexec -n 1, 2 and 4 by
 * tests/e2e/comm.sh (and, for the error modes, groups_errors.sh).
 *
 * Every collective, blocking and non-blocking, on the world and on the ep
 * and edp groups, against values derived from ranks: element k that rank s
 * contributes is a formula of (s, k, destination), so the expected result
 * is evaluated separately from the same formula (sums by closed form).
 * Values stay integers below 2^24 so float sums are exact.
 *
 *   test_comm                         the whole suite (exit 0 / 1)
 *   test_comm groups EP EXPERTS       groups_create(EP, EXPERTS), which must
 *                                     end the job (exit 2); returning is a failure
 *   test_comm overflow KIND           a call over the count limit, which must
 *                                     end the job with an internal error (exit 1)
 *   test_comm waitmode                prints (rank 0) the wait policy parallel_init
 *                                     chose: "wait MODE: L ranks on C CPUs"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "testlib.h"
#include "util/error.h"

static int wrank;
static const char *label = "";

#define CHECK(cond, ...) EXPECT_RANK(wrank, label, cond, __VA_ARGS__)

/* What rank 0 reports as checked (every rank checks its own part). */
static void said(comm_t *c, const char *fmt, const char *what)
{
    if (wrank == 0)
        printf("checked [%s, %d ranks]: %s%s\n", label, comm_size(c), fmt, what);
}

/* ---- typed access, so one test body serves every dtype ---------------- */

static void put(void *buf, comm_dtype_t t, size_t i, int64_t v)
{
    switch (t) {
    case COMM_F32: ((float *)buf)[i] = (float)v; break;
    case COMM_F64: ((double *)buf)[i] = (double)v; break;
    case COMM_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case COMM_I64: ((int64_t *)buf)[i] = v; break;
    case COMM_BYTE: ((int8_t *)buf)[i] = (int8_t)v; break;
    /* 16-bit floats only move (never reduce) on the host: raw bit patterns */
    case COMM_BF16:
    case COMM_F16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    }
}

static int64_t get(const void *buf, comm_dtype_t t, size_t i)
{
    switch (t) {
    case COMM_F32: return (int64_t)((const float *)buf)[i];
    case COMM_F64: return (int64_t)((const double *)buf)[i];
    case COMM_I32: return ((const int32_t *)buf)[i];
    case COMM_I64: return ((const int64_t *)buf)[i];
    case COMM_BYTE: return ((const int8_t *)buf)[i];
    case COMM_BF16:
    case COMM_F16: return ((const uint16_t *)buf)[i];
    }
    return 0;
}

/* Data values as a dtype holds them: bytes keep 7 bits so that the sentinel
 * -1 (0xff) never equals data. */
static int64_t held(comm_dtype_t t, int64_t v) { return t == COMM_BYTE ? (v & 0x7f) : v; }

static const char *dname(comm_dtype_t t)
{
    static const char *const n[] = {"f32", "f64", "i32", "i64", "byte"};
    return n[t];
}

static void *alloc(size_t n, comm_dtype_t t) { return fb_calloc(n + 1, comm_dtype_size(t)); }

/* ---- allreduce --------------------------------------------------------- */

/* Rank r, element i: r*1000 + i%977. Sum, max and min by closed form. */
static int64_t ar_value(int r, size_t i) { return (int64_t)r * 1000 + (int64_t)(i % 977); }

static int64_t ar_expected(int p, size_t i, comm_op_t op)
{
    switch (op) {
    case COMM_SUM: return 1000LL * p * (p - 1) / 2 + (int64_t)p * (int64_t)(i % 977);
    case COMM_MAX: return ar_value(p - 1, i);
    case COMM_MIN: return ar_value(0, i);
    }
    return 0;
}

static void allreduce_case(comm_t *c, size_t n, comm_dtype_t t, comm_op_t op, int nonblocking)
{
    int r = comm_rank(c), p = comm_size(c);
    void *buf = alloc(n, t);
    for (size_t i = 0; i < n; i++)
        put(buf, t, i, ar_value(r, i));
    put(buf, t, n, -5); /* guard just past the end */
    if (nonblocking) {
        comm_request_t *req = comm_iallreduce(c, buf, n, t, op);
        comm_wait(&req);
        CHECK(req == NULL, "comm_wait leaves the handle NULL");
    } else {
        comm_allreduce(c, buf, n, t, op);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (get(buf, t, i) != ar_expected(p, i, op) && bad++ == 0)
            first = i;
    CHECK(bad == 0, "allreduce %s op %d n=%zu %s: %zu wrong, first [%zu] = %lld, want %lld", dname(t), (int)op, n,
          nonblocking ? "non-blocking" : "blocking", bad, first, (long long)get(buf, t, first),
          (long long)ar_expected(p, first, op));
    CHECK(get(buf, t, n) == -5, "allreduce wrote past the end (n=%zu)", n);
    free(buf);
}

static void test_allreduce(comm_t *c)
{
    const size_t sizes[] = {0, 1, 1000, (size_t)1 << 20};
    for (int nb = 0; nb < 2; nb++) {
        for (size_t s = 0; s < 4; s++)
            allreduce_case(c, sizes[s], COMM_F32, COMM_SUM, nb);
        allreduce_case(c, 4099, COMM_F64, COMM_SUM, nb);
        allreduce_case(c, 4099, COMM_I64, COMM_SUM, nb);
        allreduce_case(c, 4099, COMM_I64, COMM_MAX, nb);
        allreduce_case(c, 4099, COMM_I32, COMM_MIN, nb);
        allreduce_case(c, 4099, COMM_F64, COMM_MAX, nb);
        allreduce_case(c, 4099, COMM_F32, COMM_MIN, nb);
    }
    said(c, "allreduce f32 sum n = 0, 1, 1000, 2^20; f64/i64 sum, i64/f64 max, i32/f32 min", "; blocking and non-blocking");
    /* Split into pieces: a limit of 1000 elements per call. */
    comm_set_max_count(1000);
    allreduce_case(c, 10007, COMM_F32, COMM_SUM, 0);
    allreduce_case(c, 10007, COMM_F64, COMM_SUM, 1);
    comm_set_max_count(0);
    said(c, "allreduce split into pieces of 1000 elements (n = 10007)", "");
}

/* ---- reduce-scatter ------------------------------------------------------ */

/* Rank r, element e of the send buffer: r*1000 + e%1009. */
static void reduce_scatter_case(comm_t *c, const size_t *counts, comm_dtype_t t, comm_op_t op, int nonblocking)
{
    int r = comm_rank(c), p = comm_size(c);
    size_t total = 0, mine = 0;
    for (int j = 0; j < p; j++) {
        if (j < r)
            mine += counts[j];
        total += counts[j];
    }
    void *send = alloc(total, t), *recv = alloc(counts[r], t);
    for (size_t e = 0; e < total; e++)
        put(send, t, e, (int64_t)r * 1000 + (int64_t)(e % 1009));
    put(recv, t, counts[r], -5);
    if (nonblocking) {
        comm_request_t *req = comm_ireduce_scatter(c, send, recv, counts, t, op);
        comm_wait(&req);
    } else {
        comm_reduce_scatter(c, send, recv, counts, t, op);
    }
    size_t bad = 0, first = 0;
    int64_t want0 = 0;
    for (size_t k = 0; k < counts[r]; k++) {
        int64_t e = (int64_t)((mine + k) % 1009), want;
        if (op == COMM_SUM)
            want = 1000LL * p * (p - 1) / 2 + (int64_t)p * e;
        else if (op == COMM_MAX)
            want = 1000LL * (p - 1) + e;
        else
            want = e;
        if (get(recv, t, k) != want && bad++ == 0) {
            first = k;
            want0 = want;
        }
    }
    CHECK(bad == 0, "reduce_scatter %s op %d %s, %zu of %zu: %zu wrong, first [%zu] = %lld want %lld", dname(t),
          (int)op, nonblocking ? "non-blocking" : "blocking", counts[r], total, bad, first,
          (long long)get(recv, t, first), (long long)want0);
    CHECK(get(recv, t, counts[r]) == -5, "reduce_scatter wrote past the rank's piece");
    free(send);
    free(recv);
}

static void test_reduce_scatter(comm_t *c)
{
    int p = comm_size(c);
    size_t *counts = fb_calloc((size_t)p, sizeof *counts);
    const size_t bases[] = {3000, 400000};
    for (int nb = 0; nb < 2; nb++) {
        for (int b = 0; b < 2; b++) {
            /* rank 1 receives nothing */
            for (int j = 0; j < p; j++)
                counts[j] = j == 1 ? 0 : bases[b] + 37 * (size_t)j;
            reduce_scatter_case(c, counts, COMM_F32, COMM_SUM, nb);
        }
        reduce_scatter_case(c, counts, COMM_F64, COMM_MAX, nb);
        reduce_scatter_case(c, counts, COMM_I64, COMM_MIN, nb);
        for (int j = 0; j < p; j++)
            counts[j] = 0;
        reduce_scatter_case(c, counts, COMM_F32, COMM_SUM, nb);
    }
    said(c, "reduce_scatter f32 sum with variable counts (rank 1 gets 0; 3000+ and 400000+ per rank), f64 max, "
            "i64 min, all counts 0", "; blocking and non-blocking");
    free(counts);
}

/* ---- allgather --------------------------------------------------------- */

/* Rank j's piece: counts[j] elements j*100000 + k at displs[j], with a gap
 * of 3 before each piece and after the last that must stay -1. */
static void allgather_case(comm_t *c, size_t base, comm_dtype_t t, int inplace, int nonblocking)
{
    int r = comm_rank(c), p = comm_size(c);
    size_t *counts = fb_calloc((size_t)p, sizeof *counts), *displs = fb_calloc((size_t)p, sizeof *displs);
    size_t len = 0;
    for (int j = 0; j < p; j++) {
        counts[j] = (j == p - 1 && p > 1) ? 0 : base + 11 * (size_t)j; /* the last rank sends nothing */
        displs[j] = len + 3;
        len = displs[j] + counts[j];
    }
    len += 3;
    void *buf = alloc(len, t), *piece = alloc(counts[r], t);
    for (size_t i = 0; i < len; i++)
        put(buf, t, i, -1);
    for (size_t k = 0; k < counts[r]; k++) {
        int64_t v = held(t, (int64_t)r * 100000 + (int64_t)k);
        put(piece, t, k, v);
        if (inplace)
            put(buf, t, displs[r] + k, v);
    }
    comm_request_t *req = NULL;
    if (inplace && nonblocking)
        req = comm_iallgatherv_inplace(c, buf, counts, displs, t);
    else if (inplace)
        comm_allgatherv_inplace(c, buf, counts, displs, t);
    else if (nonblocking)
        req = comm_iallgatherv(c, piece, counts[r], buf, counts, displs, t);
    else
        comm_allgatherv(c, piece, counts[r], buf, counts, displs, t);
    comm_wait(&req);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t want = -1;
        for (int j = 0; j < p; j++)
            if (i >= displs[j] && i < displs[j] + counts[j])
                want = held(t, (int64_t)j * 100000 + (int64_t)(i - displs[j]));
        if (get(buf, t, i) != want && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "allgatherv %s%s%s base %zu: %zu of %zu wrong (gaps included), first [%zu] = %lld", dname(t),
          inplace ? " in place" : "", nonblocking ? " non-blocking" : "", base, bad, len, first,
          (long long)get(buf, t, first));
    free(buf);
    free(piece);
    free(counts);
    free(displs);
}

static void test_allgather(comm_t *c)
{
    for (int inplace = 0; inplace < 2; inplace++)
        for (int nb = 0; nb < 2; nb++) {
            allgather_case(c, 500, COMM_F32, inplace, nb);
            allgather_case(c, 300000, COMM_F32, inplace, nb);
            allgather_case(c, 700, COMM_I32, inplace, nb);
            allgather_case(c, 900, COMM_BYTE, inplace, nb);
        }
    said(c, "allgatherv f32 (500+, 300000+ per rank), i32, byte; last rank sends nothing; gaps untouched",
         "; in place and not, blocking and non-blocking");
}

/* ---- alltoallv --------------------------------------------------------- */

typedef enum { A2A_MIXED, A2A_EMPTY_ROW, A2A_ALL_TO_ONE, A2A_LARGE } a2a_pattern_t;

/* Elements rank s sends to rank d. */
static size_t a2a_count(a2a_pattern_t pat, int p, int s, int d)
{
    switch (pat) {
    case A2A_MIXED: return (size_t)((s + 2 * d) % 3) * 5 + (s == d);
    case A2A_EMPTY_ROW: return s == 0 ? 0 : (size_t)(3 + s + d);
    case A2A_ALL_TO_ONE: return d == p - 1 ? (size_t)(7 + s) : 0;
    case A2A_LARGE: return ((size_t)1 << 19) + 1000 * (size_t)s + (size_t)d;
    }
    return 0;
}

static int64_t a2a_value(comm_dtype_t t, int s, int d, size_t k)
{
    if (t == COMM_BYTE)
        return held(t, (int64_t)s * 7 + (int64_t)d * 13 + (int64_t)k);
    return (int64_t)s * 1000000 + (int64_t)d * 10000 + (int64_t)k;
}

static const char *pname(a2a_pattern_t pat)
{
    static const char *const n[] = {"mixed", "empty row (rank 0 sends nothing)", "all-to-one", "large"};
    return n[pat];
}

static void alltoallv_case(comm_t *c, a2a_pattern_t pat, comm_dtype_t t, int nonblocking)
{
    int r = comm_rank(c), p = comm_size(c);
    size_t *sc = fb_calloc((size_t)p, sizeof *sc), *sd = fb_calloc((size_t)p, sizeof *sd);
    size_t *rc = fb_calloc((size_t)p, sizeof *rc), *rd = fb_calloc((size_t)p, sizeof *rd);
    size_t slen = 0, rlen = 0;
    for (int j = 0; j < p; j++) {
        sc[j] = a2a_count(pat, p, r, j);
        sd[j] = slen + 2; /* gaps of 2 in the send buffer, 1 in the receive buffer */
        slen = sd[j] + sc[j];
        rc[j] = a2a_count(pat, p, j, r);
        rd[j] = rlen + 1;
        rlen = rd[j] + rc[j];
    }
    rlen += 1;
    void *send = alloc(slen, t), *recv = alloc(rlen, t);
    for (size_t i = 0; i < slen; i++)
        put(send, t, i, -1);
    for (int d = 0; d < p; d++)
        for (size_t k = 0; k < sc[d]; k++)
            put(send, t, sd[d] + k, a2a_value(t, r, d, k));
    for (size_t i = 0; i < rlen; i++)
        put(recv, t, i, -1);
    if (nonblocking) {
        comm_request_t *req = comm_ialltoallv(c, send, sc, sd, recv, rc, rd, t);
        comm_wait(&req);
    } else {
        comm_alltoallv(c, send, sc, sd, recv, rc, rd, t);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < rlen; i++) {
        int64_t want = -1;
        for (int s = 0; s < p; s++)
            if (i >= rd[s] && i < rd[s] + rc[s])
                want = a2a_value(t, s, r, i - rd[s]);
        if (get(recv, t, i) != want && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "alltoallv %s %s%s: %zu of %zu wrong (gaps included), first [%zu] = %lld", pname(pat),
          dname(t), nonblocking ? " non-blocking" : "", bad, rlen, first, (long long)get(recv, t, first));
    free(send);
    free(recv);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void test_alltoallv(comm_t *c)
{
    for (int nb = 0; nb < 2; nb++) {
        alltoallv_case(c, A2A_MIXED, COMM_I64, nb);
        alltoallv_case(c, A2A_MIXED, COMM_F32, nb);
        alltoallv_case(c, A2A_EMPTY_ROW, COMM_I32, nb);
        alltoallv_case(c, A2A_ALL_TO_ONE, COMM_F64, nb);
        alltoallv_case(c, A2A_LARGE, COMM_BYTE, nb);
    }
    said(c, "alltoallv mixed counts with zeros (i64, f32), empty row (i32), all-to-one (f64), 512 KiB+ per pair "
            "(byte)", "; blocking and non-blocking");
}

/* ---- alltoall of counts ------------------------------------------------ */

static void test_alltoall(comm_t *c)
{
    int r = comm_rank(c), p = comm_size(c);
    for (int nb = 0; nb < 2; nb++) {
        int64_t *s64 = fb_calloc((size_t)p, sizeof *s64), *r64 = fb_calloc((size_t)p, sizeof *r64);
        int32_t *s32 = fb_calloc(3 * (size_t)p, sizeof *s32), *r32 = fb_calloc(3 * (size_t)p, sizeof *r32);
        for (int d = 0; d < p; d++) {
            s64[d] = (int64_t)r * 100 + d;
            for (int q = 0; q < 3; q++)
                s32[3 * d + q] = r * 1000 + d * 10 + q;
        }
        if (nb) {
            comm_request_t *req[2] = {comm_ialltoall(c, s64, r64, 1, COMM_I64),
                                      comm_ialltoall(c, s32, r32, 3, COMM_I32)};
            comm_waitall(req, 2);
            CHECK(req[0] == NULL && req[1] == NULL, "comm_waitall leaves the handles NULL");
        } else {
            comm_alltoall(c, s64, r64, 1, COMM_I64);
            comm_alltoall(c, s32, r32, 3, COMM_I32);
        }
        int bad = 0;
        for (int s = 0; s < p; s++) {
            bad += r64[s] != (int64_t)s * 100 + r;
            for (int q = 0; q < 3; q++)
                bad += r32[3 * s + q] != s * 1000 + r * 10 + q;
        }
        CHECK(bad == 0, "alltoall of counts%s: %d wrong", nb ? " non-blocking" : "", bad);
        free(s64);
        free(r64);
        free(s32);
        free(r32);
    }
    said(c, "alltoall i64 x1 and i32 x3 per rank", "; blocking and non-blocking (waitall)");
}

/* ---- bcast ------------------------------------------------------------- */

static void bcast_case(comm_t *c, size_t bytes, int root, int nonblocking)
{
    unsigned char *buf = fb_calloc(bytes + 1, 1);
    if (comm_rank(c) == root)
        for (size_t k = 0; k < bytes; k++)
            buf[k] = (unsigned char)(k * 31 + 7);
    buf[bytes] = 0xa5;
    if (nonblocking) {
        comm_request_t *req = comm_ibcast(c, buf, bytes, root);
        comm_wait(&req);
    } else {
        comm_bcast(c, buf, bytes, root);
    }
    size_t bad = 0;
    for (size_t k = 0; k < bytes; k++)
        bad += buf[k] != (unsigned char)(k * 31 + 7);
    CHECK(bad == 0 && buf[bytes] == 0xa5, "bcast %zu bytes from %d%s: %zu wrong", bytes, root,
          nonblocking ? " non-blocking" : "", bad);
    free(buf);
}

static void test_bcast(comm_t *c)
{
    int last = comm_size(c) - 1;
    for (int nb = 0; nb < 2; nb++) {
        bcast_case(c, 0, 0, nb);
        bcast_case(c, 5, last, nb);
        bcast_case(c, (size_t)3 << 20, last, nb);
    }
    comm_set_max_count(1000);
    bcast_case(c, 5003, 0, 0);
    bcast_case(c, 5003, last, 1);
    comm_set_max_count(0);
    said(c, "bcast 0, 5 and 3 MiB bytes from the first and last rank; split in pieces of 1000", "; blocking and "
            "non-blocking");
}

/* ---- point to point ----------------------------------------------------- */

/* A ring: every rank sends n i32 to the next rank and receives from the
 * previous one, two messages of different tags in flight at once (received
 * in the opposite order); the received values come from the sender's rank
 * by formula, the element past them untouched. */
static void p2p_case(comm_t *c, size_t n)
{
    const int r = comm_rank(c), P = comm_size(c), next = (r + 1) % P, prev = (r + P - 1) % P;
    int32_t *a = fb_calloc(n + 1, sizeof *a), *b = fb_calloc(n + 1, sizeof *b);
    int32_t *ra = fb_calloc(n + 1, sizeof *ra), *rb = fb_calloc(n + 1, sizeof *rb);
    for (size_t k = 0; k < n; k++) {
        a[k] = (int32_t)(r * 100003 + (int)k);
        b[k] = -(int32_t)(r * 7 + (int)k);
    }
    ra[n] = rb[n] = 77;
    comm_request_t *qa = comm_isend(c, a, n, COMM_I32, next, 2);
    comm_request_t *qb = comm_isend(c, b, n, COMM_I32, next, 3);
    comm_recv(c, rb, n, COMM_I32, prev, 3);
    comm_recv(c, ra, n, COMM_I32, prev, 2);
    comm_wait(&qa);
    comm_wait(&qb);
    size_t bad = 0;
    for (size_t k = 0; k < n; k++)
        bad += ra[k] != (int32_t)(prev * 100003 + (int)k) || rb[k] != -(int32_t)(prev * 7 + (int)k);
    CHECK(bad == 0 && ra[n] == 77 && rb[n] == 77 && !qa && !qb, "send/recv %zu i32 (limit %zu): %zu wrong", n,
          comm_max_count(), bad);
    free(a);
    free(b);
    free(ra);
    free(rb);
}

static void test_p2p(comm_t *c)
{
    if (comm_size(c) < 2)
        return;
    comm_stats_reset(c);
    p2p_case(c, 0);
    p2p_case(c, 5);
    p2p_case(c, (size_t)1 << 20);
    comm_set_max_count(1000);
    p2p_case(c, 5003);
    comm_set_max_count(0);
    const comm_stats_t *s = comm_stats(c, COMM_KIND_SEND), *q = comm_stats(c, COMM_KIND_RECV);
    const uint64_t bytes = 2 * 4 * (uint64_t)(5 + ((size_t)1 << 20) + 5003);
    CHECK(s->calls == 8 && q->calls == 8 && s->bytes == bytes && q->bytes == bytes,
          "send/recv statistics: %llu/%llu calls, %llu/%llu bytes, expected 8 and %llu",
          (unsigned long long)s->calls, (unsigned long long)q->calls, (unsigned long long)s->bytes,
          (unsigned long long)q->bytes, (unsigned long long)bytes);
    said(c, "isend/recv around the ring: 0, 5, 1 Mi and 5003 i32 (pieces of 1000), two tags in flight; "
            "statistics", "");
}

/* ---- exscan ------------------------------------------------------------ */

static void exscan_case(comm_t *c, size_t n)
{
    int r = comm_rank(c);
    int64_t *buf = fb_calloc(n + 1, sizeof *buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = ar_value(r, i);
    buf[n] = -7;
    comm_exscan_sum(c, buf, n, COMM_I64);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t want = 0;
        for (int q = 0; q < r; q++)
            want += ar_value(q, i);
        bad += buf[i] != want;
    }
    CHECK(bad == 0 && buf[n] == -7, "exscan_sum %zu i64 (limit %zu): %zu wrong", n, comm_max_count(), bad);
    free(buf);
}

static void test_exscan(comm_t *c)
{
    exscan_case(c, 0);
    exscan_case(c, 1);
    exscan_case(c, 3001);
    comm_set_max_count(100);
    exscan_case(c, 3001);
    comm_set_max_count(0);
    said(c, "exscan_sum i64 of 0, 1 and 3001 elements", "; split in pieces of 100; rank 0 zeros");
}

/* ---- gather_bytes --------------------------------------------------------- */

static size_t gb_size(int r) { return (size_t)r * 1237 + 5; }
static unsigned char gb_byte(int r, size_t k) { return (unsigned char)(r * 13 + k * 7); }

typedef struct {
    int next, bad;
} gb_seen_t;

static void gb_sink(void *ctx, int rank, const void *buf, size_t n)
{
    gb_seen_t *seen = ctx;
    const unsigned char *b = buf;
    int bad = rank != seen->next || n != gb_size(rank);
    for (size_t k = 0; !bad && k < n; k++)
        bad = b[k] != gb_byte(rank, k);
    seen->bad += bad;
    seen->next++;
}

static void gather_bytes_case(comm_t *c, int root)
{
    int r = comm_rank(c);
    size_t n = gb_size(r);
    unsigned char *buf = fb_malloc(n);
    for (size_t k = 0; k < n; k++)
        buf[k] = gb_byte(r, k);
    gb_seen_t seen = {0, 0};
    comm_gather_bytes(c, buf, n, root, gb_sink, &seen);
    if (r == root)
        CHECK(seen.bad == 0 && seen.next == comm_size(c), "gather_bytes to %d (limit %zu): %d of %d buffers wrong",
              root, comm_max_count(), seen.bad + comm_size(c) - seen.next, comm_size(c));
    else
        CHECK(seen.next == 0, "gather_bytes to %d: the sink ran on rank %d", root, r);
    free(buf);
}

static void test_gather_bytes(comm_t *c)
{
    int last = comm_size(c) - 1;
    gather_bytes_case(c, 0);
    gather_bytes_case(c, last);
    comm_set_max_count(100);
    gather_bytes_case(c, last);
    comm_set_max_count(0);
    said(c, "gather_bytes of 5 + 1237 r bytes to the first and last rank, in rank order", "; split in pieces of "
            "100");
}

/* ---- barrier: nobody leaves before everybody entered ------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_barrier(comm_t *c)
{
    if (comm_rank(c) == 0) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    double enter = now();
    comm_barrier(c);
    double leave = now();
    comm_allreduce(c, &enter, 1, COMM_F64, COMM_MAX);
    comm_allreduce(c, &leave, 1, COMM_F64, COMM_MIN);
    CHECK(enter <= leave, "a rank left the barrier %.6f s before the last one entered", enter - leave);
    said(c, "barrier: latest entry precedes earliest exit (first rank late by 20 ms)", "");
}

/* ---- progress: start several, test while computing, then wait ---------- */

static void test_progress(comm_t *c)
{
    int r = comm_rank(c), p = comm_size(c);
    size_t n = (size_t)1 << 20;
    float *ar = fb_malloc(n * sizeof *ar);
    for (size_t i = 0; i < n; i++)
        ar[i] = (float)ar_value(r, i);
    size_t *counts = fb_calloc((size_t)p, sizeof *counts);
    size_t total = 0, mine = 0;
    for (int j = 0; j < p; j++) {
        counts[j] = 100000 + 3 * (size_t)j;
        mine += j < r ? counts[j] : 0;
        total += counts[j];
    }
    float *rs_send = fb_malloc(total * sizeof *rs_send), *rs_recv = fb_malloc(counts[r] * sizeof *rs_recv);
    for (size_t e = 0; e < total; e++)
        rs_send[e] = (float)(r * 1000 + (int)(e % 1009));
    int64_t *bc = fb_calloc(1000, sizeof *bc);
    if (r == 0)
        for (int k = 0; k < 1000; k++)
            bc[k] = 7 * k - 3;

    comm_request_t *req[4] = {comm_iallreduce(c, ar, n, COMM_F32, COMM_SUM),
                              comm_ireduce_scatter(c, rs_send, rs_recv, counts, COMM_F32, COMM_SUM), NULL,
                              comm_ibcast(c, bc, 1000 * sizeof *bc, 0)};
    long polls = 0;
    int pending = 1;
    double t0 = now();
    volatile double sink = 0;
    while (pending && now() - t0 < 30.0) {
        for (int k = 0; k < 20000; k++) /* stands for a backward kernel */
            sink += (double)k * 1e-9;
        pending = 0;
        for (int q = 0; q < 4; q++)
            if (req[q] && !comm_test(req[q]))
                pending = 1;
        polls++;
    }
    CHECK(!pending, "comm_test did not see completion within 30 s (%ld polls)", polls);
    CHECK(comm_test(req[0]) == 1, "comm_test stays 1 once complete");
    comm_waitall(req, 4);
    comm_wait(&req[2]); /* NULL: returns at once */
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += (int64_t)ar[i] != ar_expected(p, i, COMM_SUM);
    for (size_t k = 0; k < counts[r]; k++)
        bad += (int64_t)rs_recv[k] != 1000LL * p * (p - 1) / 2 + (int64_t)p * (int64_t)((mine + k) % 1009);
    for (int k = 0; k < 1000; k++)
        bad += bc[k] != 7 * k - 3;
    CHECK(bad == 0 && req[0] == NULL && req[1] == NULL && req[3] == NULL,
          "results after the test/wait loop: %zu wrong", bad);
    said(c, "iallreduce 2^20 + ireduce_scatter + ibcast progressed by comm_test between compute, then comm_waitall", "");
    free(ar);
    free(counts);
    free(rs_send);
    free(rs_recv);
    free(bc);
}

/* ---- statistics -------------------------------------------------------- */

static void test_stats(comm_t *c)
{
    int r = comm_rank(c), p = comm_size(c);
    comm_stats_reset(c);
    for (int k = 0; k < COMM_KIND_COUNT; k++) {
        const comm_stats_t *s = comm_stats(c, (comm_kind_t)k);
        CHECK(s->calls == 0 && s->bytes == 0 && s->wait_seconds == 0, "stats of %s not zero after reset",
              comm_kind_name((comm_kind_t)k));
    }
    float f[100] = {0};
    double d[50] = {0};
    comm_allreduce(c, f, 100, COMM_F32, COMM_SUM);
    comm_request_t *req = comm_iallreduce(c, d, 50, COMM_F64, COMM_SUM);
    comm_wait(&req);

    size_t *counts = fb_calloc((size_t)p, sizeof *counts), *displs = fb_calloc((size_t)p, sizeof *displs);
    size_t total = 0;
    for (int j = 0; j < p; j++) {
        counts[j] = 10 + (size_t)j;
        displs[j] = total;
        total += counts[j];
    }
    float *big = fb_calloc(total, sizeof *big), *piece = fb_calloc(counts[r], sizeof *piece);
    comm_reduce_scatter(c, big, piece, counts, COMM_F32, COMM_SUM);
    comm_allgatherv(c, piece, counts[r], big, counts, displs, COMM_F32);

    size_t *sc = fb_calloc((size_t)p, sizeof *sc), *sd = fb_calloc((size_t)p, sizeof *sd);
    size_t *rc = fb_calloc((size_t)p, sizeof *rc), *rd = fb_calloc((size_t)p, sizeof *rd);
    size_t slen = 0, rlen = 0, to_others = 0;
    for (int j = 0; j < p; j++) {
        sc[j] = a2a_count(A2A_MIXED, p, r, j);
        sd[j] = slen;
        slen += sc[j];
        rc[j] = a2a_count(A2A_MIXED, p, j, r);
        rd[j] = rlen;
        rlen += rc[j];
        to_others += j == r ? 0 : sc[j];
    }
    int64_t *s64 = fb_calloc(slen, sizeof *s64), *r64 = fb_calloc(rlen, sizeof *r64);
    comm_alltoallv(c, s64, sc, sd, r64, rc, rd, COMM_I64);
    int32_t *a = fb_calloc(3 * (size_t)p, sizeof *a), *b = fb_calloc(3 * (size_t)p, sizeof *b);
    comm_alltoall(c, a, b, 3, COMM_I32);
    char five[5] = {0};
    comm_bcast(c, five, 5, 0);
    comm_barrier(c);

    struct {
        comm_kind_t k;
        uint64_t calls, bytes;
    } want[] = {
        {COMM_KIND_ALLREDUCE, 2, 100 * 4 + 50 * 8},
        {COMM_KIND_REDUCE_SCATTER, 1, total * 4},
        {COMM_KIND_ALLGATHER, 1, counts[r] * 4},
        {COMM_KIND_ALLTOALLV, 1, to_others * 8},
        {COMM_KIND_ALLTOALL, 1, 3 * 4 * (uint64_t)(p - 1)},
        {COMM_KIND_BCAST, 1, 5},
        {COMM_KIND_BARRIER, 1, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const comm_stats_t *s = comm_stats(c, want[i].k);
        CHECK(s->calls == want[i].calls && s->bytes == want[i].bytes && s->wait_seconds >= 0,
              "stats %s: %llu calls %llu bytes, want %llu and %llu", comm_kind_name(want[i].k),
              (unsigned long long)s->calls, (unsigned long long)s->bytes, (unsigned long long)want[i].calls,
              (unsigned long long)want[i].bytes);
    }
    said(c, "statistics: calls and payload bytes per kind after one known call sequence; zero after reset", "");
    free(counts);
    free(displs);
    free(big);
    free(piece);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(s64);
    free(r64);
    free(a);
    free(b);
}

static void test_collectives(comm_t *c)
{
    test_allreduce(c);
    test_reduce_scatter(c);
    test_allgather(c);
    test_alltoallv(c);
    test_alltoall(c);
    test_bcast(c);
    test_p2p(c);
    test_exscan(c);
    test_gather_bytes(c);
    test_barrier(c);
    test_progress(c);
    test_stats(c);
}

/* ---- groups ------------------------------------------------------------ */

/* World ranks of the members of `g`, in group-rank order. */
static int32_t *members(comm_t *g, int wr)
{
    int n = comm_size(g);
    int32_t *m = fb_calloc((size_t)n, sizeof *m);
    size_t *counts = fb_calloc((size_t)n, sizeof *counts), *displs = fb_calloc((size_t)n, sizeof *displs);
    for (int j = 0; j < n; j++) {
        counts[j] = 1;
        displs[j] = (size_t)j;
    }
    m[comm_rank(g)] = wr;
    comm_allgatherv_inplace(g, m, counts, displs, COMM_I32);
    free(counts);
    free(displs);
    return m;
}

static void test_groups(int ep, int run_collectives)
{
    int rank = parallel_rank(), size = parallel_size();
    groups_t g;
    groups_create(&g, ep, 4);
    CHECK(g.world_rank == rank && g.world_size == size, "world %d/%d", g.world_rank, g.world_size);
    CHECK(g.dp_rank == rank && g.dp_size == size, "dp %d/%d", g.dp_rank, g.dp_size);
    CHECK(g.ep_rank == rank % ep && g.ep_size == ep, "ep %d/%d, want %d/%d", g.ep_rank, g.ep_size, rank % ep, ep);
    CHECK(g.edp_rank == rank / ep && g.edp_size == size / ep, "edp %d/%d, want %d/%d", g.edp_rank, g.edp_size,
          rank / ep, size / ep);
    CHECK(comm_rank(g.ep) == g.ep_rank && comm_size(g.ep) == g.ep_size && comm_rank(g.edp) == g.edp_rank &&
              comm_size(g.edp) == g.edp_size && comm_rank(g.dp) == g.dp_rank && comm_size(g.dp) == g.dp_size &&
              comm_rank(g.world) == rank && comm_size(g.world) == size,
          "comm_rank/comm_size of the groups match the struct");

    /* Each rank's member lists (ep, edp, dp), gathered everywhere; rank 0
     * checks the layout as a whole. */
    int32_t *me = members(g.ep, rank), *mx = members(g.edp, rank), *md = members(g.dp, rank);
    size_t row = (size_t)ep + (size_t)(size / ep) + (size_t)size;
    int32_t *all = fb_calloc(row * (size_t)size, sizeof *all);
    memcpy(all + row * (size_t)rank, me, (size_t)ep * sizeof *me);
    memcpy(all + row * (size_t)rank + ep, mx, (size_t)(size / ep) * sizeof *mx);
    memcpy(all + row * (size_t)rank + ep + size / ep, md, (size_t)size * sizeof *md);
    size_t *counts = fb_calloc((size_t)size, sizeof *counts), *displs = fb_calloc((size_t)size, sizeof *displs);
    for (int j = 0; j < size; j++) {
        counts[j] = row;
        displs[j] = row * (size_t)j;
    }
    comm_allgatherv_inplace(g.world, all, counts, displs, COMM_I32);
    if (rank == 0) {
        int bad = 0;
        for (int q = 0; q < size; q++) {
            const int32_t *qe = all + row * (size_t)q, *qx = qe + ep, *qd = qx + size / ep;
            for (int i = 0; i < ep; i++)
                bad += qe[i] != (q - q % ep) + i; /* consecutive ranks, in order */
            for (int i = 0; i < size / ep; i++)
                bad += qx[i] != q % ep + i * ep; /* same ep_rank */
            for (int i = 0; i < size; i++)
                bad += qd[i] != i;
            /* ep and edp groups meet in q alone */
            int common = 0, only_q = 1;
            for (int i = 0; i < ep; i++)
                for (int j = 0; j < size / ep; j++)
                    if (qe[i] == qx[j]) {
                        common++;
                        only_q &= qe[i] == q;
                    }
            bad += common != 1 || !only_q;
            /* q is in its groups and every member lists the same group, so
             * the ep groups (and the edp groups) partition the world */
            bad += qe[q % ep] != q || qx[q / ep] != q;
            for (int i = 0; i < ep; i++)
                bad += memcmp(all + row * (size_t)qe[i], qe, (size_t)ep * sizeof *qe) != 0;
            for (int i = 0; i < size / ep; i++)
                bad += memcmp(all + row * (size_t)qx[i] + ep, qx, (size_t)(size / ep) * sizeof *qx) != 0;
        }
        CHECK(bad == 0, "group membership over the world: %d violations", bad);
        printf("checked groups ep=%d world=%d: ranks and sizes by formula; ep = consecutive ranks, edp = same "
               "ep_rank, dp = all; every member lists the same group; ep and edp meet only in the rank itself\n",
               ep, size);
    }
    free(all);
    free(counts);
    free(displs);
    free(me);
    free(mx);
    free(md);

    if (run_collectives) {
        label = "ep group";
        test_collectives(g.ep);
        label = "edp group";
        test_collectives(g.edp);
        label = "";
    }
    groups_free(&g);
    CHECK(!g.world && !g.dp && !g.ep && !g.edp && g.world_size == 0, "groups_free clears the struct");
}

/* The tensor-parallel layout (docs/parallel.md): every group's members, in
 * group-rank order, are the ranks the formulas give, r = tp_rank + tp
 * (ep_rank + ep edp_rank); each rank checks its own groups, so together
 * they check the world-wide partition. */
static void test_groups_tp(int tp, int ep)
{
    const int rank = parallel_rank(), size = parallel_size();
    groups_t g;
    groups_create_tp(&g, tp, ep, 4);
    const int tr = rank % tp, er = rank / tp % ep, xr = rank / (tp * ep);
    CHECK(g.tp_rank == tr && g.tp_size == tp && g.dp_rank == rank / tp && g.dp_size == size / tp &&
              g.ep_rank == er && g.ep_size == ep && g.edp_rank == xr && g.edp_size == size / (tp * ep),
          "tp %d ep %d: ranks and sizes by formula", tp, ep);
    int32_t *mt = members(g.tp, rank), *md = members(g.dp, rank), *me = members(g.ep, rank),
            *mx = members(g.edp, rank);
    int bad = 0;
    for (int i = 0; i < tp; i++)
        bad += mt[i] != rank - tr + i; /* consecutive */
    for (int i = 0; i < size / tp; i++)
        bad += md[i] != tr + tp * i; /* same tp_rank */
    for (int i = 0; i < ep; i++)
        bad += me[i] != tr + tp * (i + ep * xr); /* same tp_rank and edp_rank */
    for (int i = 0; i < size / (tp * ep); i++)
        bad += mx[i] != tr + tp * (er + ep * i); /* same tp_rank and ep_rank */
    CHECK(bad == 0, "tp %d ep %d: %d members off the formula", tp, ep, bad);
    if (rank == 0)
        printf("checked groups tp=%d ep=%d world=%d: tp consecutive, dp = same tp_rank, ep = same tp_rank and "
               "edp_rank, edp = same tp_rank and ep_rank, by formula\n", tp, ep, size);
    free(mt);
    free(md);
    free(me);
    free(mx);
    groups_free(&g);
}

/* ---- error modes ------------------------------------------------------- */

static int overflow(const char *kind)
{
    int p = parallel_size();
    comm_t *w = comm_create_world();
    comm_set_max_count(100);
    size_t *cnt = fb_calloc((size_t)p, sizeof *cnt), *dsp = fb_calloc((size_t)p, sizeof *dsp);
    for (int j = 0; j < p; j++) {
        cnt[j] = 200;
        dsp[j] = 200 * (size_t)j;
    }
    float *a = fb_calloc(200 * (size_t)p, sizeof *a), *b = fb_calloc(200 * (size_t)p, sizeof *b);
    if (strcmp(kind, "alltoallv") == 0)
        comm_alltoallv(w, a, cnt, dsp, b, cnt, dsp, COMM_F32);
    else if (strcmp(kind, "reduce_scatter") == 0)
        comm_reduce_scatter(w, a, b, cnt, COMM_F32, COMM_SUM);
    else if (strcmp(kind, "allgatherv") == 0)
        comm_allgatherv(w, a, 200, b, cnt, dsp, COMM_F32);
    else
        fb_fatal(FB_EXIT_USAGE, "test_comm overflow: unknown kind '%s'", kind);
    printf("FAIL: comm_%s took counts above the limit\n", kind);
    return 1;
}

/* pp stages outermost (docs/parallel.md): with S = world / pp, rank r is
 * stage r / S; its pp group holds the ranks r % S + i S, its dp group the
 * S ranks of its stage (tp 1), its ep group ep consecutive ranks inside the
 * stage; the members gathered and compared with those formulas. */
static void test_pipeline_groups(int pp, int ep)
{
    const int rank = parallel_rank(), size = parallel_size(), S = size / pp, q = rank % S;
    groups_t g;
    groups_create_pp(&g, pp, 1, ep, 4);
    CHECK(g.pp_rank == rank / S && g.pp_size == pp && g.dp_rank == q && g.dp_size == S && g.ep_rank == q % ep &&
              g.edp_rank == q / ep && g.edp_size == S / ep,
          "pp %d ep %d: pp %d/%d dp %d/%d ep %d edp %d/%d", pp, ep, g.pp_rank, g.pp_size, g.dp_rank, g.dp_size,
          g.ep_rank, g.edp_rank, g.edp_size);
    int32_t *mp = members(g.pp, rank), *md = members(g.dp, rank), *me = members(g.ep, rank), *mx = members(g.edp, rank);
    int bad = comm_size(g.pp) != pp || comm_size(g.dp) != S || comm_size(g.ep) != ep || comm_size(g.edp) != S / ep;
    for (int i = 0; i < pp && !bad; i++)
        bad += mp[i] != q + i * S;
    for (int i = 0; i < S && !bad; i++)
        bad += md[i] != rank - q + i;
    for (int i = 0; i < ep && !bad; i++)
        bad += me[i] != rank - q % ep + i;
    for (int i = 0; i < S / ep && !bad; i++)
        bad += mx[i] != rank - q + q % ep + i * ep;
    CHECK(bad == 0, "pp %d ep %d: group members of rank %d", pp, ep, rank);
    if (rank == 0)
        printf("checked groups pp=%d ep=%d world=%d: pp = the ranks of equal position in each stage, dp, ep and "
               "edp inside the stage, by formula\n", pp, ep, size);
    free(mp);
    free(md);
    free(me);
    free(mx);
    groups_free(&g);
}

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    wrank = parallel_rank();
    if (argc == 4 && strcmp(argv[1], "groups") == 0) {
        groups_t g;
        groups_create(&g, atoi(argv[2]), atoi(argv[3]));
        printf("FAIL: groups_create accepted ep=%s experts=%s on %d ranks\n", argv[2], argv[3], parallel_size());
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "overflow") == 0)
        return overflow(argv[2]);
    if (argc == 2 && strcmp(argv[1], "waitmode") == 0) {
        if (wrank == 0)
            printf("wait %s: %d ranks on %d CPUs\n", comm_wait_mode() == COMM_WAIT_YIELD ? "yield" : "spin",
                   parallel_local_size(), comm_node_cpus());
        parallel_finalize();
        return 0;
    }
    if (argc != 1)
        fb_fatal(FB_EXIT_USAGE, "usage: test_comm [groups EP EXPERTS | overflow KIND | waitmode]");

    int size = parallel_size();
    comm_t *world = comm_create_world();
    label = "world";
    test_collectives(world);
    comm_free(&world);
    CHECK(world == NULL, "comm_free clears the handle");
    label = "";
    for (int ep = 1; ep <= 4; ep *= 2)
        if (size % ep == 0)
            test_groups(ep, ep == 2);
    for (int tp = 1; tp <= size; tp *= 2)
        for (int ep = 1; tp * ep <= size; ep *= 2)
            if (size % (tp * ep) == 0)
                test_groups_tp(tp, ep);
    for (int pp = 2; pp <= size; pp *= 2)
        for (int ep = 1; ep <= size / pp; ep *= 2)
            if (size % (pp * ep) == 0)
                test_pipeline_groups(pp, ep);

    long long total = failures;
    comm_allreduce(comm_world(), &total, 1, COMM_I64, COMM_SUM);
    if (wrank == 0)
        printf("%s: %lld failures over %d ranks\n", total ? "FAIL" : "PASS", total, size);
    parallel_finalize();
    return total ? 1 : 0;
}
