#include "tokenizer/bpe_train.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/timer.h"

/* ------------------------------------------------------------ counting */

typedef struct count_ctx {
    bytemap_t *counts;
    size_t n;
} count_ctx_t;

static void count_piece(void *p, const uint8_t *s, size_t n)
{
    count_ctx_t *c = p;
    (*bytemap_insert(c->counts, s, n, bytemap_hash(s, n), NULL))++;
    c->n++;
}

size_t bpe_count_pretokens(const pretok_t *p, pretok_scratch_t *s, const uint8_t *text, size_t n, bytemap_t *counts)
{
    count_ctx_t c = {counts, 0};
    pretok_split(p, s, text, n, count_piece, &c);
    return c.n;
}

static void put_le(uint8_t *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint8_t *bpe_counts_pack(const bytemap_t *counts, size_t *n)
{
    size_t total = counts->n * 12 + counts->keys_len;
    uint8_t *buf = fb_malloc(total ? total : 1), *p = buf;
    for (size_t i = 0; i < counts->n; i++) {
        size_t kn;
        const uint8_t *k = bytemap_key(counts, i, &kn);
        put_le(p, kn, 4);
        memcpy(p + 4, k, kn);
        put_le(p + 4 + kn, counts->val[i], 8);
        p += 12 + kn;
    }
    *n = total;
    return buf;
}

int bpe_counts_add_packed(bytemap_t *counts, const uint8_t *buf, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i < 4)
            return -1;
        size_t kn = (size_t)get_le(buf + i, 4);
        if (n - i - 4 < kn + 8)
            return -1;
        const uint8_t *k = buf + i + 4;
        *bytemap_insert(counts, k, kn, bytemap_hash(k, kn), NULL) += get_le(k + kn, 8);
        i += 12 + kn;
    }
    return 0;
}

/* ------------------------------------------------------------ training */

typedef struct wlist {
    int32_t *w;
    uint32_t n, cap;
} wlist_t;

typedef struct heap_ent {
    long long count;
    int32_t pair;
} heap_ent_t;

typedef struct trainer {
    /* words */
    int32_t *syms;
    size_t *woff;
    uint32_t *wlen;
    long long *wcnt;
    size_t nwords;
    uint32_t *wseen;
    /* tokens: bytes of every id */
    uint8_t *tbytes;
    size_t tbytes_len, tbytes_cap;
    size_t *toff;
    uint32_t *tlen;
    size_t ntok;
    /* pairs */
    uint64_t *pkeys;     /* open-addressed: key (a << 32 | b), UINT64_MAX = empty */
    int32_t *pidx;
    size_t pmask;
    int32_t *pa, *pb;
    long long *pcnt;
    wlist_t *plist;
    uint32_t *pstamp;
    size_t npairs, pcap;
    /* max-heap of (count, pair) */
    heap_ent_t *heap;
    size_t hn, hcap;
} trainer_t;

static void tok_reserve(trainer_t *t, size_t n)
{
    if (t->tbytes_len + n > t->tbytes_cap) {
        t->tbytes_cap = 2 * (t->tbytes_len + n) + 4096;
        t->tbytes = fb_realloc(t->tbytes, t->tbytes_cap);
    }
}

static void tok_add_byte(trainer_t *t, uint8_t b)
{
    tok_reserve(t, 1);
    t->tbytes[t->tbytes_len] = b;
    t->toff[t->ntok] = t->tbytes_len;
    t->tlen[t->ntok] = 1;
    t->tbytes_len++;
    t->ntok++;
}

/* The token made by merging a and b; their bytes are copied after the
 * arena has grown, since growing may move them. */
static void tok_add_merge(trainer_t *t, int32_t a, int32_t b)
{
    size_t na = t->tlen[a], nb = t->tlen[b];
    tok_reserve(t, na + nb);
    memcpy(t->tbytes + t->tbytes_len, t->tbytes + t->toff[a], na);
    memcpy(t->tbytes + t->tbytes_len + na, t->tbytes + t->toff[b], nb);
    t->toff[t->ntok] = t->tbytes_len;
    t->tlen[t->ntok] = (uint32_t)(na + nb);
    t->tbytes_len += na + nb;
    t->ntok++;
}

static int bytes_cmp(const trainer_t *t, int32_t x, int32_t y)
{
    size_t nx = t->tlen[x], ny = t->tlen[y];
    int c = memcmp(t->tbytes + t->toff[x], t->tbytes + t->toff[y], nx < ny ? nx : ny);
    if (c)
        return c;
    return nx < ny ? -1 : nx > ny;
}

/* Whether heap entry x must be merged before y (the tie rule of bpe_train.h). */
static int ent_before(const trainer_t *t, heap_ent_t x, heap_ent_t y)
{
    if (x.count != y.count)
        return x.count > y.count;
    int32_t p = x.pair, q = y.pair;
    int c = bytes_cmp(t, t->pa[p], t->pa[q]);
    if (!c)
        c = bytes_cmp(t, t->pb[p], t->pb[q]);
    if (!c)
        c = t->pa[p] != t->pa[q] ? (t->pa[p] < t->pa[q] ? -1 : 1) : (t->pb[p] < t->pb[q] ? -1 : t->pb[p] > t->pb[q]);
    return c < 0;
}

static void heap_push(trainer_t *t, heap_ent_t e)
{
    if (t->hn == t->hcap) {
        t->hcap = t->hcap ? 2 * t->hcap : 4096;
        t->heap = fb_realloc(t->heap, t->hcap * sizeof *t->heap);
    }
    size_t i = t->hn++;
    while (i > 0 && ent_before(t, e, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
}

static void heap_pop(trainer_t *t)
{
    heap_ent_t last = t->heap[--t->hn];
    size_t i = 0, n = t->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ent_before(t, t->heap[c + 1], t->heap[c]))
            c++;
        if (!ent_before(t, t->heap[c], last))
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n)
        t->heap[i] = last;
}

static size_t pslot(uint64_t key, size_t mask) { return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & mask; }

static void pairs_rehash(trainer_t *t, size_t nslots)
{
    free(t->pkeys);
    free(t->pidx);
    t->pkeys = fb_malloc(nslots * sizeof *t->pkeys);
    t->pidx = fb_malloc(nslots * sizeof *t->pidx);
    memset(t->pkeys, 0xff, nslots * sizeof *t->pkeys);
    t->pmask = nslots - 1;
    for (size_t p = 0; p < t->npairs; p++) {
        uint64_t key = (uint64_t)(uint32_t)t->pa[p] << 32 | (uint32_t)t->pb[p];
        size_t i = pslot(key, t->pmask);
        while (t->pkeys[i] != UINT64_MAX)
            i = (i + 1) & t->pmask;
        t->pkeys[i] = key;
        t->pidx[i] = (int32_t)p;
    }
}

static int32_t pair_get(trainer_t *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = pslot(key, t->pmask);
    for (; t->pkeys[i] != UINT64_MAX; i = (i + 1) & t->pmask)
        if (t->pkeys[i] == key)
            return t->pidx[i];
    if (2 * (t->npairs + 1) > t->pmask + 1) {
        pairs_rehash(t, 2 * (t->pmask + 1));
        return pair_get(t, a, b);
    }
    FB_ASSERT(t->npairs < INT32_MAX);
    if (t->npairs == t->pcap) {
        t->pcap = 2 * t->pcap;
        t->pa = fb_realloc(t->pa, t->pcap * sizeof *t->pa);
        t->pb = fb_realloc(t->pb, t->pcap * sizeof *t->pb);
        t->pcnt = fb_realloc(t->pcnt, t->pcap * sizeof *t->pcnt);
        t->plist = fb_realloc(t->plist, t->pcap * sizeof *t->plist);
        t->pstamp = fb_realloc(t->pstamp, t->pcap * sizeof *t->pstamp);
    }
    int32_t p = (int32_t)t->npairs++;
    t->pa[p] = a;
    t->pb[p] = b;
    t->pcnt[p] = 0;
    t->plist[p] = (wlist_t){0};
    t->pstamp[p] = 0;
    t->pkeys[i] = key;
    t->pidx[i] = p;
    return p;
}

static void wlist_add(wlist_t *l, int32_t w)
{
    if (l->n && l->w[l->n - 1] == w)
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4;
        l->w = fb_realloc(l->w, l->cap * sizeof *l->w);
    }
    l->w[l->n++] = w;
}

/* *nmerges is lowered to what can possibly be learned: each merge removes
 * at least one symbol from the pieces, so there are at most
 * sum(length - 1) of them (a huge --vocab-size allocates nothing). */
static void trainer_init(trainer_t *t, const bytemap_t *counts, size_t *nmerges)
{
    memset(t, 0, sizeof *t);
    size_t nsym = 0;
    for (size_t i = 0; i < counts->n; i++)
        if (counts->klen[i] >= 2) {
            nsym += counts->klen[i];
            t->nwords++;
        }
    if (*nmerges > nsym - t->nwords)
        *nmerges = nsym - t->nwords;
    t->syms = fb_malloc((nsym ? nsym : 1) * sizeof *t->syms);
    t->woff = fb_malloc((t->nwords + 1) * sizeof *t->woff);
    t->wlen = fb_malloc((t->nwords + 1) * sizeof *t->wlen);
    t->wcnt = fb_malloc((t->nwords + 1) * sizeof *t->wcnt);
    t->wseen = fb_calloc(t->nwords + 1, sizeof *t->wseen);
    t->toff = fb_malloc((256 + *nmerges) * sizeof *t->toff);
    t->tlen = fb_malloc((256 + *nmerges) * sizeof *t->tlen);
    for (int b = 0; b < 256; b++)
        tok_add_byte(t, (uint8_t)b);
    t->pcap = 1024;
    t->pa = fb_malloc(t->pcap * sizeof *t->pa);
    t->pb = fb_malloc(t->pcap * sizeof *t->pb);
    t->pcnt = fb_malloc(t->pcap * sizeof *t->pcnt);
    t->plist = fb_malloc(t->pcap * sizeof *t->plist);
    t->pstamp = fb_malloc(t->pcap * sizeof *t->pstamp);
    pairs_rehash(t, 4096);

    size_t w = 0, off = 0;
    for (size_t i = 0; i < counts->n; i++) {
        size_t kn;
        const uint8_t *k = bytemap_key(counts, i, &kn);
        if (kn < 2)
            continue;
        FB_ASSERT(kn <= UINT32_MAX && counts->val[i] <= (uint64_t)LLONG_MAX);
        t->woff[w] = off;
        t->wlen[w] = (uint32_t)kn;
        t->wcnt[w] = (long long)counts->val[i];
        for (size_t j = 0; j < kn; j++)
            t->syms[off + j] = k[j];
        for (size_t j = 0; j + 1 < kn; j++) {
            int32_t p = pair_get(t, k[j], k[j + 1]);
            t->pcnt[p] += t->wcnt[w];
            wlist_add(&t->plist[p], (int32_t)w);
        }
        off += kn;
        w++;
    }
    for (size_t p = 0; p < t->npairs; p++)
        heap_push(t, (heap_ent_t){t->pcnt[p], (int32_t)p});
}

static void trainer_free(trainer_t *t)
{
    for (size_t p = 0; p < t->npairs; p++)
        free(t->plist[p].w);
    free(t->syms);
    free(t->woff);
    free(t->wlen);
    free(t->wcnt);
    free(t->wseen);
    free(t->tbytes);
    free(t->toff);
    free(t->tlen);
    free(t->pkeys);
    free(t->pidx);
    free(t->pa);
    free(t->pb);
    free(t->pcnt);
    free(t->plist);
    free(t->pstamp);
    free(t->heap);
}

/* Replaces every (a, b) in word w by `id`, keeping the pair counts and the
 * pair -> words index current. New pairs (those holding `id`) are collected
 * in `touched` for the heap. */
static void merge_word(trainer_t *t, size_t w, int32_t a, int32_t b, int32_t id, uint32_t stamp, int32_t **touched,
                       size_t *ntouched, size_t *captouched)
{
    int32_t *s = t->syms + t->woff[w];
    size_t L = t->wlen[w];
    long long c = t->wcnt[w];
    size_t i = 0;
    while (i + 1 < L && !(s[i] == a && s[i + 1] == b))
        i++;
    if (i + 1 >= L)
        return; /* a stale entry of the index: the pair left this word earlier */
    for (size_t j = 0; j + 1 < L; j++)
        t->pcnt[pair_get(t, s[j], s[j + 1])] -= c;
    size_t j = 0;
    for (i = 0; i < L;) {
        if (i + 1 < L && s[i] == a && s[i + 1] == b) {
            s[j++] = id;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    L = j;
    t->wlen[w] = (uint32_t)L;
    for (j = 0; j + 1 < L; j++) {
        int32_t p = pair_get(t, s[j], s[j + 1]);
        t->pcnt[p] += c;
        if (s[j] == id || s[j + 1] == id) {
            wlist_add(&t->plist[p], (int32_t)w);
            if (t->pstamp[p] != stamp) {
                t->pstamp[p] = stamp;
                if (*ntouched == *captouched) {
                    *captouched = *captouched ? 2 * *captouched : 1024;
                    *touched = fb_realloc(*touched, *captouched * sizeof **touched);
                }
                (*touched)[(*ntouched)++] = p;
            }
        }
    }
}

int32_t *bpe_train(const bytemap_t *counts, size_t nmerges, long long min_frequency, int progress, size_t *nout)
{
    trainer_t t;
    size_t asked = nmerges;
    trainer_init(&t, counts, &nmerges);
    int32_t *merges = fb_malloc((2 * nmerges + 1) * sizeof *merges);
    int32_t *touched = NULL;
    size_t ntouched = 0, captouched = 0, m = 0;
    size_t every = nmerges >= 10 ? nmerges / 10 : 1;
    const double t0 = timer_now();
    if (min_frequency < 1)
        min_frequency = 1;
    for (; m < nmerges; m++) {
        /* Entries whose count went down since they were pushed are re-queued
         * at their current count. */
        while (t.hn && t.heap[0].count != t.pcnt[t.heap[0].pair]) {
            heap_ent_t e = t.heap[0];
            heap_pop(&t);
            if (t.pcnt[e.pair] > 0)
                heap_push(&t, (heap_ent_t){t.pcnt[e.pair], e.pair});
        }
        if (!t.hn || t.heap[0].count < min_frequency)
            break;
        int32_t p = t.heap[0].pair, a = t.pa[p], b = t.pb[p], id = (int32_t)(256 + m);
        long long seen = t.heap[0].count;
        heap_pop(&t);
        merges[2 * m] = a;
        merges[2 * m + 1] = b;
        tok_add_merge(&t, a, b);
        wlist_t list = t.plist[p];
        t.plist[p] = (wlist_t){0};
        ntouched = 0;
        uint32_t stamp = (uint32_t)m + 1;
        for (uint32_t k = 0; k < list.n; k++) {
            int32_t w = list.w[k];
            if (t.wseen[w] == stamp)
                continue;
            t.wseen[w] = stamp;
            merge_word(&t, (size_t)w, a, b, id, stamp, &touched, &ntouched, &captouched);
        }
        free(list.w);
        for (size_t k = 0; k < ntouched; k++)
            if (t.pcnt[touched[k]] > 0)
                heap_push(&t, (heap_ent_t){t.pcnt[touched[k]], touched[k]});
        if (progress && (m + 1) % every == 0) {
            printf("fabula: tokenizer train: %zu/%zu merges (last pair seen %lld times), %.1f s\n", m + 1, asked, seen,
                   timer_now() - t0);
            fflush(stdout);
        }
    }
    free(touched);
    trainer_free(&t);
    *nout = m;
    return merges;
}
