/* Expert parallelism: the expert side of each MoE layer spread over the ep
 * group (docs/expert-parallel.md).
 *
 * Every rank routes and plans its own tokens over all E experts exactly as
 * the single-rank model does (moe.c), so the same assignments are kept or
 * dropped whatever ep is. Its permuted rows a->xp are sorted by global
 * expert, and ep rank j holds experts [j*El, (j+1)*El), El = E / ep: the rows
 * for rank j are one contiguous run. Per MoE layer, forward:
 *
 *   counts    alltoall: rows per (destination rank, its local expert)
 *   dispatch  alltoallv of the rows, in nc chunks
 *   experts   per chunk: reorder to expert-major, grouped matmuls, reorder back
 *   return    alltoallv of the outputs into the source's a->eo
 *
 * and the backward sends d(outputs) the same way and returns d(inputs).
 *
 * Two layouts of the rows a rank receives:
 *   receive layout  chunk, then source rank, then the source's row order
 *                   (expert-sorted): what one alltoallv per chunk delivers;
 *   compute layout  chunk, then local expert, then source rank, then the
 *                   source's order: a chunk's rows of one expert are
 *                   contiguous, as the grouped matmul needs.
 * A chunk occupies the same row range in both, so its reorders stay inside
 * it and chunks in flight never share rows. Chunk c of the n rows rank i
 * sends rank j is the slice [n*c/nc, n*(c+1)/nc), which both ends compute
 * from the exchanged counts.
 *
 * With expert dropout, each row's dropout key (the source's micro-batch
 * seed, the layer, the token and choice: model_expert_dropout_key) travels
 * with it in one more exchange, so that its mask is the one it gets on a
 * single rank whatever the layout. */
#include <stdlib.h>
#include <string.h>

#include "model/expert_ffn.h"
#include "model/model_impl.h"
#include "model/model_memory.h"
#include "util/error.h"
#include "util/test_defect.h"

typedef struct ep_layer {
    int64_t *send, *recv;       /* [P*El]: rows to rank j for its local expert x at j*El+x; from rank i for mine */
    int nc, rows;               /* chunks of the current layout; rows received in all */
    size_t *scount, *sdispl;    /* [nc*P] elements this rank sends, per chunk and rank */
    size_t *rcount, *rdispl;    /* [nc*P] elements it receives */
    int32_t *base;              /* host [nc+1]: first row of each chunk (both layouts) */
    int32_t *off;               /* host [nc*(El+1)]: chunk-relative row offsets of the local experts */
    int32_t *h_c2r, *h_r2c;     /* host [cap]: compute row -> receive row, and back */
    int32_t *c2r, *r2c;         /* backend copies */
    int32_t *h_c2k;             /* host [cap]: compute row -> its place among the received rows, source by source */
    uint64_t *h_key;            /* host [cap]: each compute row's expert dropout key */
    fb_act *xr, *g, *u, *act;   /* compute layout, kept for the backward */
    uint8_t *mask;              /* expert dropout */
    size_t cap;                 /* rows the per-layer buffers hold */
    int nc_cap;
} ep_layer_t;

struct moe_ep {
    int P, El;
    ep_layer_t *layer;          /* [L]; MoE layers only (full recomputation: the first one's, shared) */
    int shared_layer;           /* full recomputation: the MoE layer whose state every MoE layer uses; else -1 */
    /* selective recomputation: the SwiGLU products and dropout masks of
     * every MoE layer in one set of act_cap rows, rebuilt per chunk in
     * the backward (else NULL: each layer's own) */
    fb_act *act;
    uint8_t *mask;
    size_t act_cap;
    fb_act *rbuf, *cbuf;        /* [cap, D]: receive- and compute-layout scratch */
    fb_act *dg, *du, *dact;      /* [cap, I]: the model's own until a step needs more rows */
    int own_scratch;
    size_t cap;
    /* the current exchange's requests, for progress polling */
    comm_request_t **in, **out;
    int nc;
};

static fb_act *aalloc(model_t *m, size_t n)
{
    m->alloc_bytes += ACT_BYTES(m, n);
    return m->ops->alloc(ACT_BYTES(m, n ? n : 1));
}

static void frelease(model_t *m, void *p, size_t bytes)
{
    if (!p)
        return;
    m->alloc_bytes -= bytes;
    m->ops->release(p);
}

/* Rows beyond the expected T*K (a hot expert, dropless) grow the buffers by
 * a quarter more than asked, so a slowly rising peak reallocates rarely. */
static size_t grown(size_t need) { return need + need / 4 + 1; }

static int selective(const model_t *m) { return m->mc.recompute == MODEL_RECOMPUTE_SELECTIVE; }

/* A SwiGLU product [cap, I] and its dropout mask (a byte an element). */
static void act_alloc(model_t *m, size_t cap, fb_act **act, uint8_t **mask)
{
    const size_t I = (size_t)m->mc.intermediate_size;
    *act = aalloc(m, cap * I);
    *mask = m->ops->alloc(cap * I > 0 ? cap * I : 1);
    m->alloc_bytes += cap * I;
}

/* Selective recomputation's shared products: as many rows as the largest
 * layer's buffers hold. */
static void shared_act_reserve(model_t *m, struct moe_ep *x, size_t cap)
{
    const size_t I = (size_t)m->mc.intermediate_size;
    if (x->act && cap <= x->act_cap)
        return;
    if (x->act) {
        frelease(m, x->act, x->act_cap * ACT_BYTES(m, I));
        frelease(m, x->mask, x->act_cap * I);
    }
    x->act_cap = cap;
    act_alloc(m, cap, &x->act, &x->mask);
}

static void layer_alloc(model_t *m, ep_layer_t *ly, size_t cap)
{
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size;
    ly->cap = cap;
    ly->xr = aalloc(m, cap * D);
    ly->g = aalloc(m, cap * I);
    ly->u = aalloc(m, cap * I);
    if (selective(m))
        shared_act_reserve(m, m->epx, cap);
    else
        act_alloc(m, cap, &ly->act, &ly->mask);
    ly->c2r = m->ops->alloc((cap ? cap : 1) * sizeof(int32_t));
    ly->r2c = m->ops->alloc((cap ? cap : 1) * sizeof(int32_t));
    m->alloc_bytes += 2 * cap * sizeof(int32_t);
    ly->h_c2r = fb_malloc((cap ? cap : 1) * sizeof(int32_t));
    ly->h_r2c = fb_malloc((cap ? cap : 1) * sizeof(int32_t));
    ly->h_c2k = fb_malloc((cap ? cap : 1) * sizeof(int32_t));
    ly->h_key = fb_malloc((cap ? cap : 1) * sizeof(uint64_t));
}

static void layer_release(model_t *m, ep_layer_t *ly)
{
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size, cap = ly->cap;
    frelease(m, ly->xr, cap * ACT_BYTES(m, D));
    frelease(m, ly->g, cap * ACT_BYTES(m, I));
    frelease(m, ly->u, cap * ACT_BYTES(m, I));
    frelease(m, ly->act, cap * ACT_BYTES(m, I));
    frelease(m, ly->mask, cap * I);
    frelease(m, ly->c2r, cap * sizeof(int32_t));
    frelease(m, ly->r2c, cap * sizeof(int32_t));
    free(ly->h_c2r);
    free(ly->h_r2c);
    free(ly->h_c2k);
    free(ly->h_key);
    ly->xr = ly->g = ly->u = ly->act = NULL;
    ly->mask = NULL;
    ly->c2r = ly->r2c = ly->h_c2r = ly->h_r2c = ly->h_c2k = NULL;
    ly->h_key = NULL;
    ly->cap = 0;
}

static void scratch_release(model_t *m, struct moe_ep *x)
{
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size;
    frelease(m, x->rbuf, x->cap * ACT_BYTES(m, D));
    frelease(m, x->cbuf, x->cap * ACT_BYTES(m, D));
    if (x->own_scratch) {
        frelease(m, x->dg, x->cap * ACT_BYTES(m, I));
        frelease(m, x->du, x->cap * ACT_BYTES(m, I));
        frelease(m, x->dact, x->cap * ACT_BYTES(m, I));
    }
    x->rbuf = x->cbuf = x->dg = x->du = x->dact = NULL;
}

/* Scratch for `rows` received rows; the backward's [rows, I] buffers are
 * the model's own (sized T*K) while they suffice. */
static void scratch_reserve(model_t *m, struct moe_ep *x, size_t rows)
{
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size;
    if (x->rbuf && rows <= x->cap)
        return;
    const size_t tk = (size_t)m->max_tokens * (size_t)m->mc.num_experts_per_tok;
    size_t cap = x->rbuf ? grown(rows) : (rows > tk ? rows : tk);
    scratch_release(m, x);
    x->cap = cap;
    x->rbuf = aalloc(m, cap * D);
    x->cbuf = aalloc(m, cap * D);
    x->own_scratch = cap > tk;
    if (x->own_scratch) {
        x->dg = aalloc(m, cap * I);
        x->du = aalloc(m, cap * I);
        x->dact = aalloc(m, cap * I);
    } else {
        x->dg = m->dg;
        x->du = m->du;
        x->dact = m->dact;
    }
}

/* Bytes of the ep buffers when each MoE layer's buffers hold `layer_rows`
 * rows and the shared scratch `scratch_rows` (tk = T*K: the backward's
 * [rows, I] buffers are the model's up to tk rows, the scratch's own
 * beyond): per layer the received rows [rows, D], three [rows, I]
 * activations, the dropout mask a byte an element and two int32 row maps;
 * the scratch two [rows, D] buffers. model.recompute: "full" keeps one
 * layer's set for all, "selective" one set of the SwiGLU products and masks
 * (docs/model.md, "Recomputation"). */
static size_t ep_bytes(const model_config_t *mc, size_t ab, size_t layer_rows, size_t scratch_rows, size_t tk)
{
    const size_t D = (size_t)mc->hidden_size, I = (size_t)mc->intermediate_size;
    const size_t act = layer_rows * I * ab + layer_rows * I;
    const size_t rest = layer_rows * D * ab + 2 * layer_rows * I * ab + 2 * layer_rows * sizeof(int32_t);
    size_t nmoe = 0;
    for (int l = 0; l < mc->num_hidden_layers; l++)
        nmoe += model_layer_is_moe(mc, l);
    size_t bytes;
    if (mc->recompute == MODEL_RECOMPUTE_FULL)
        bytes = nmoe ? rest + act : 0;
    else if (mc->recompute == MODEL_RECOMPUTE_SELECTIVE)
        bytes = nmoe * rest + (nmoe ? act : 0);
    else
        bytes = nmoe * (rest + act);
    bytes += 2 * scratch_rows * D * ab;
    if (scratch_rows > tk)
        bytes += 3 * scratch_rows * I * ab;
    return bytes;
}

/* What moe_ep_create allocates: layer_alloc(T*K) per MoE layer, then
 * scratch_reserve(T*K); model_create checks the sum. */
size_t model_ep_buffer_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size)
{
    if (ep_size <= 1 || !config_model_is_moe(mc))
        return 0;
    const size_t tk = (size_t)max_tokens * (size_t)mc->num_experts_per_tok;
    return ep_bytes(mc, act_bytes, tk, tk, tk);
}

/* The most rows one rank can receive in a layer: each of the E experts
 * keeps at most moe_capacity() rows of each source's micro-batch, and a
 * rank's El experts hear from P sources, so P * El * capacity = E *
 * capacity; dropless (no capacity), every source's T*K rows. Beyond T*K
 * the exchange grows the buffers to grown(rows) (exchange_layout). */
size_t model_ep_buffer_bytes_at_capacity(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size)
{
    if (ep_size <= 1 || !config_model_is_moe(mc))
        return 0;
    const size_t tk = (size_t)max_tokens * (size_t)mc->num_experts_per_tok;
    const int cap = moe_capacity(mc->capacity_factor, max_tokens, mc->num_experts_per_tok, mc->num_local_experts);
    const size_t rows = cap > 0 ? (size_t)mc->num_local_experts * (size_t)cap : (size_t)ep_size * tk;
    if (rows <= tk)
        return ep_bytes(mc, act_bytes, tk, tk, tk);
    return ep_bytes(mc, act_bytes, grown(rows), grown(rows), tk);
}

void moe_ep_create(model_t *m)
{
    const model_config_t *mc = &m->mc;
    struct moe_ep *x = fb_calloc(1, sizeof *x);
    m->epx = x;
    x->P = m->ep_size;
    x->El = m->table.experts_local;
    FB_ASSERT(x->El >= 1 && x->El * x->P == mc->num_local_experts);
    x->layer = fb_calloc((size_t)mc->num_hidden_layers, sizeof *x->layer);
    x->shared_layer = -1;
    const size_t tk = (size_t)m->max_tokens * (size_t)mc->num_experts_per_tok;
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        if (!model_layer_is_moe(mc, l) || x->shared_layer >= 0)
            continue;
        /* full recomputation refills a layer's exchange state and buffers
         * before its backward: one set serves every MoE layer */
        if (mc->recompute == MODEL_RECOMPUTE_FULL)
            x->shared_layer = l;
        ep_layer_t *ly = &x->layer[l];
        ly->send = fb_calloc((size_t)x->P * x->El, sizeof *ly->send);
        ly->recv = fb_calloc((size_t)x->P * x->El, sizeof *ly->recv);
        layer_alloc(m, ly, tk);
    }
    scratch_reserve(m, x, tk);
}

void moe_ep_free(model_t *m)
{
    struct moe_ep *x = m->epx;
    if (!x)
        return;
    for (int l = 0; l < m->mc.num_hidden_layers; l++) {
        ep_layer_t *ly = &x->layer[l];
        layer_release(m, ly);
        free(ly->send);
        free(ly->recv);
        free(ly->scount);
        free(ly->sdispl);
        free(ly->rcount);
        free(ly->rdispl);
        free(ly->base);
        free(ly->off);
    }
    scratch_release(m, x);
    if (x->act) {
        const size_t I = (size_t)m->mc.intermediate_size;
        frelease(m, x->act, x->act_cap * ACT_BYTES(m, I));
        frelease(m, x->mask, x->act_cap * I);
    }
    free(x->layer);
    free(x);
    m->epx = NULL;
}

/* The exchange state and buffers of MoE layer l. */
static ep_layer_t *ep_layer(struct moe_ep *x, int l) { return &x->layer[x->shared_layer >= 0 ? x->shared_layer : l]; }

/* ------------------------------------------------------------- layouts */

static int64_t slice_lo(int64_t n, int c, int nc) { return n * c / nc; }

static void layout_reserve(ep_layer_t *ly, int nc, int P, int El)
{
    if (ly->nc_cap >= nc)
        return;
    const size_t n = (size_t)nc * (size_t)P;
    ly->scount = fb_realloc(ly->scount, n * sizeof *ly->scount);
    ly->sdispl = fb_realloc(ly->sdispl, n * sizeof *ly->sdispl);
    ly->rcount = fb_realloc(ly->rcount, n * sizeof *ly->rcount);
    ly->rdispl = fb_realloc(ly->rdispl, n * sizeof *ly->rdispl);
    ly->base = fb_realloc(ly->base, ((size_t)nc + 1) * sizeof *ly->base);
    ly->off = fb_realloc(ly->off, (size_t)nc * ((size_t)El + 1) * sizeof *ly->off);
    ly->nc_cap = nc;
}

/* From ly->send and ly->recv: the per-chunk counts and displacements of
 * both ends, the chunk offsets of the local experts and the reorder maps. */
static void layout_build(model_t *m, struct moe_ep *x, ep_layer_t *ly, int nc)
{
    const int P = x->P, El = x->El;
    const size_t D = (size_t)m->mc.hidden_size;
    layout_reserve(ly, nc, P, El);
    ly->nc = nc;
    int64_t *tot_send = fb_calloc((size_t)P, sizeof *tot_send), *tot_recv = fb_calloc((size_t)P, sizeof *tot_recv);
    int64_t rows = 0;
    for (int i = 0; i < P; i++)
        for (int e = 0; e < El; e++) {
            tot_send[i] += ly->send[(size_t)i * El + e];
            tot_recv[i] += ly->recv[(size_t)i * El + e];
        }
    for (int i = 0; i < P; i++)
        rows += tot_recv[i];
    if (rows >= (int64_t)1 << 31)
        fb_fatal(FB_EXIT_INTERNAL, "MoE layer: %lld rows received by one rank, more than 2^31 - 1",
                 (long long)rows);
    ly->rows = (int)rows;
    if ((size_t)rows > ly->cap) {
        layer_release(m, ly);
        layer_alloc(m, ly, grown((size_t)rows));
    }
    scratch_reserve(m, x, (size_t)rows);

    /* receive layout: chunk, then source */
    int64_t pos = 0;
    for (int c = 0; c < nc; c++) {
        ly->base[c] = (int32_t)pos;
        for (int i = 0; i < P; i++) {
            int64_t n = slice_lo(tot_recv[i], c + 1, nc) - slice_lo(tot_recv[i], c, nc);
            ly->rcount[(size_t)c * P + i] = (size_t)n * D;
            ly->rdispl[(size_t)c * P + i] = (size_t)pos * D;
            pos += n;
        }
    }
    ly->base[nc] = (int32_t)pos;
    /* send side: rank j's rows start where the earlier ranks' end */
    int64_t start = 0;
    for (int j = 0; j < P; j++) {
        for (int c = 0; c < nc; c++) {
            int64_t lo = slice_lo(tot_send[j], c, nc), hi = slice_lo(tot_send[j], c + 1, nc);
            ly->scount[(size_t)c * P + j] = (size_t)(hi - lo) * D;
            ly->sdispl[(size_t)c * P + j] = (size_t)(start + lo) * D;
        }
        start += tot_send[j];
    }
    /* compute layout: chunk, then local expert, then source */
    int64_t *src_pre = fb_calloc((size_t)P, sizeof *src_pre);
    for (int i = 1; i < P; i++)
        src_pre[i] = src_pre[i - 1] + tot_recv[i - 1];
    for (int c = 0; c < nc; c++) {
        int32_t row = ly->base[c];
        int32_t *off = ly->off + (size_t)c * (El + 1);
        for (int e = 0; e < El; e++) {
            off[e] = row - ly->base[c];
            for (int i = 0; i < P; i++) {
                const int64_t *cnt = ly->recv + (size_t)i * El;
                int64_t lo = slice_lo(tot_recv[i], c, nc), hi = slice_lo(tot_recv[i], c + 1, nc);
                int64_t pre = 0;
                for (int f = 0; f < e; f++)
                    pre += cnt[f];
                int64_t a = pre > lo ? pre : lo, b = pre + cnt[e] < hi ? pre + cnt[e] : hi;
                const int64_t piece = (int64_t)(ly->rdispl[(size_t)c * P + i] / D);
                for (int64_t q = a; q < b; q++) {
                    int32_t r = (int32_t)(piece + (q - lo));
                    ly->h_c2r[row] = r;
                    ly->h_r2c[r] = row;
                    ly->h_c2k[row] = (int32_t)(src_pre[i] + q);
                    row++;
                }
            }
        }
        off[El] = row - ly->base[c];
        FB_ASSERT(row == ly->base[c + 1]);
    }
    if (rows > 0) {
        m->ops->to_backend(ly->c2r, ly->h_c2r, (size_t)rows * sizeof(int32_t));
        m->ops->to_backend(ly->r2c, ly->h_r2c, (size_t)rows * sizeof(int32_t));
    }
    free(src_pre);
    free(tot_send);
    free(tot_recv);
}

/* Expert dropout: every row's key from the rank whose token it is, into
 * ly->h_key in the compute layout. One exchange of the whole layer (8 bytes
 * a row) before the rows' own. */
static void exchange_keys(model_t *m, int l, ep_layer_t *ly)
{
    struct moe_ep *x = m->epx;
    const int P = x->P, El = x->El;
    size_t *sc = fb_calloc((size_t)P * 4, sizeof *sc), *sd = sc + P, *rc = sc + 2 * P, *rd = sc + 3 * P;
    size_t nsend = 0, nrecv = 0;
    for (int i = 0; i < P; i++) {
        for (int e = 0; e < El; e++) {
            sc[i] += (size_t)ly->send[(size_t)i * El + e];
            rc[i] += (size_t)ly->recv[(size_t)i * El + e];
        }
        sd[i] = nsend;
        rd[i] = nrecv;
        nsend += sc[i];
        nrecv += rc[i];
    }
    /* this rank's rows are its plan's, in its expert-sorted order (a rank
     * without tokens sends none) */
    const uint64_t *mine = nsend ? model_expert_row_keys(m, l, &m->acts[l].plan) : NULL;
    FB_ASSERT(!nsend || (mine && (size_t)m->acts[l].plan.R == nsend));
    uint64_t *got = fb_malloc((nrecv ? nrecv : 1) * sizeof *got);
    comm_alltoallv(m->ep_host, mine, sc, sd, got, rc, rd, COMM_I64);
    for (int row = 0; row < ly->rows; row++)
        ly->h_key[row] = got[ly->h_c2k[row]];
    free(got);
    free(sc);
}

/* ------------------------------------------------------- expert compute */

/* Drives the progress of the exchanges in flight (MPI advances
 * non-blocking collectives mostly inside MPI calls). */
static void poll(struct moe_ep *x)
{
    for (int c = 0; c < x->nc; c++) {
        if (x->in[c])
            comm_test(x->in[c]);
        if (x->out[c])
            comm_test(x->out[c]);
    }
}

static void poll_cb(void *ctx) { poll(ctx); }

/* Chunk c's rows of layer l in the compute layout, through the local experts. */
static expert_rows_t chunk_rows(model_t *m, int l, int c)
{
    struct moe_ep *x = m->epx;
    ep_layer_t *ly = ep_layer(x, l);
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size;
    const size_t b = (size_t)ly->base[c];
    return (expert_rows_t){.rows = ly->base[c + 1] - ly->base[c],
                           .ne = x->El,
                           .off = ly->off + (size_t)c * (x->El + 1),
                           .x = ACT(m, ly->xr, b * D),
                           .g = ACT(m, ly->g, b * I),
                           .u = ACT(m, ly->u, b * I),
                           .act = ACT(m, x->act ? x->act : ly->act, b * I),
                           .mask = (x->act ? x->mask : ly->mask) + b * I,
                           .row_key = model_expert_dropout_on(m) ? ly->h_key + b : NULL,
                           .progress = poll_cb,
                           .progress_ctx = x};
}

static void chunk_forward(model_t *m, int l, int c)
{
    struct moe_ep *x = m->epx;
    ep_layer_t *ly = ep_layer(x, l);
    const ops_t *o = m->ops;
    const size_t D = (size_t)m->mc.hidden_size, b = (size_t)ly->base[c];
    const expert_rows_t r = chunk_rows(m, l, c);
    if (r.rows == 0)
        return;
    o->permute_fwd(r.x, x->rbuf, ly->c2r + b, r.rows, (int)D);
    model_expert_ffn_forward(m, l, &r, ACT(m, x->cbuf, b * D));
    /* the chunk's input rows are consumed: its outputs go back in their place */
    o->permute_fwd(ACT(m, x->rbuf, b * D), x->cbuf, ly->r2c + b, r.rows, (int)D);
}

static void chunk_backward(model_t *m, int l, int c)
{
    struct moe_ep *x = m->epx;
    ep_layer_t *ly = ep_layer(x, l);
    const ops_t *o = m->ops;
    const size_t D = (size_t)m->mc.hidden_size, I = (size_t)m->mc.intermediate_size, b = (size_t)ly->base[c];
    const expert_rows_t r = chunk_rows(m, l, c);
    if (r.rows == 0)
        return;
    fb_act *deo = ACT(m, x->cbuf, b * D), *tmp = ACT(m, x->rbuf, b * D);
    if (x->act) /* selective recomputation: the chunk's products again, from its g and u */
        model_expert_ffn_act(m, &r);
    o->permute_fwd(deo, x->rbuf, ly->c2r + b, r.rows, (int)D);
    model_expert_ffn_backward(m, l, &r, deo, tmp, ACT(m, x->dg, b * I), ACT(m, x->du, b * I),
                              ACT(m, x->dact, b * I));
    o->permute_fwd(ACT(m, x->rbuf, b * D), x->cbuf, ly->r2c + b, r.rows, (int)D);
}

/* Rows `src` of this rank (send layout) go to their experts, each chunk is
 * computed as soon as it has arrived, and the results come back into `dst`
 * (same layout as src). One blocking exchange each way without chunking;
 * with chunks, the dispatch of chunk c+1 and the returns of the chunks before
 * c are in flight while chunk c computes. Every rank of the ep group issues
 * the same calls in the same order (d0 d1 r0 d2 r1 ... r_last). */
static void exchange(model_t *m, int l, const fb_act *src, fb_act *dst, int backward)
{
    struct moe_ep *x = m->epx;
    ep_layer_t *ly = ep_layer(x, l);
    const int P = x->P, nc = ly->nc;
    void (*work)(model_t *, int, int) = backward ? chunk_backward : chunk_forward;
    const comm_dtype_t dt = model_act_comm_dtype(m);
    if (nc == 1) {
        comm_alltoallv(m->ep, src, ly->scount, ly->sdispl, x->rbuf, ly->rcount, ly->rdispl, dt);
        work(m, l, 0);
        comm_alltoallv(m->ep, x->rbuf, ly->rcount, ly->rdispl, dst, ly->scount, ly->sdispl, dt);
        return;
    }
    x->nc = nc;
    x->in = fb_calloc((size_t)nc, sizeof *x->in);
    x->out = fb_calloc((size_t)nc, sizeof *x->out);
#define SEND(c) (ly->scount + (size_t)(c) * P), (ly->sdispl + (size_t)(c) * P)
#define RECV(c) (ly->rcount + (size_t)(c) * P), (ly->rdispl + (size_t)(c) * P)
    x->in[0] = comm_ialltoallv(m->ep, src, SEND(0), x->rbuf, RECV(0), dt);
    for (int c = 0; c < nc; c++) {
        if (c + 1 < nc)
            x->in[c + 1] = comm_ialltoallv(m->ep, src, SEND(c + 1), x->rbuf, RECV(c + 1), dt);
        comm_wait(&x->in[c]);
        work(m, l, c);
        x->out[c] = comm_ialltoallv(m->ep, x->rbuf, RECV(c), dst, SEND(c), dt);
        poll(x);
    }
#undef SEND
#undef RECV
    comm_waitall(x->out, nc);
    free(x->in);
    free(x->out);
    x->in = x->out = NULL;
    x->nc = 0;
}

void moe_ep_forward(model_t *m, int l, const int32_t *offsets)
{
    struct moe_ep *x = m->epx;
    ep_layer_t *ly = ep_layer(x, l);
    const int P = x->P, El = x->El;
    for (int j = 0; j < P * El; j++)
        ly->send[j] = offsets ? offsets[j + 1] - offsets[j] : 0;
    /* test-only defect (docs/testing.md "Injected defects") */
    if (fb_test_defect("ep_route_off_by_one")) {
        /* the boundary between ep rank 0's rows and rank 1's one expert
         * early: the rows of rank 0's last expert (global El - 1) go to
         * rank 1's first (global El), forward and backward alike */
        ly->send[El] += ly->send[El - 1];
        ly->send[El - 1] = 0;
    }
    comm_alltoall(m->ep_host, ly->send, ly->recv, (size_t)El, COMM_I64);
    layout_build(m, x, ly, m->a2a_chunks);
    if (model_expert_dropout_on(m))
        exchange_keys(m, l, ly);
    exchange(m, l, m->acts[l].xp, m->acts[l].eo, 0);
}

void moe_ep_backward(model_t *m, int l) { exchange(m, l, m->dxp, m->dtmp, 1); }

void model_moe_idle_forward(model_t *m, int l)
{
    if (m->ep_size > 1 && model_layer_is_moe(&m->mc, l))
        moe_ep_forward(m, l, NULL);
}

void model_moe_idle_backward(model_t *m, int l)
{
    if (m->ep_size > 1 && model_layer_is_moe(&m->mc, l))
        moe_ep_backward(m, l);
}
