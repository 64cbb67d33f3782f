#include "tokenizer/bpe.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define EMPTY_KEY UINT64_MAX

struct bpe {
    int32_t base[256];
    /* Open-addressed merge table: key (left << 32 | right), value (rank << 32 | result). */
    uint64_t *keys, *vals;
    size_t mask, used;
    int32_t *list;      /* merges as added: left, right, result */
    size_t nlist, caplist;
    bytemap_t *whole;   /* NULL unless ignore_merges */
    int32_t unk;        /* -1: bytes without a token are dropped */
    int fuse_unk;
};

typedef struct heap_ent {
    int32_t rank, pos, result;
} heap_ent_t;

struct bpe_work {
    int32_t *id, *rank, *result, *prev, *next;
    size_t cap;
    heap_ent_t *heap;
    size_t heap_n, heap_cap;
    size_t heap_threshold;
};

static inline uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t)(uint32_t)l << 32 | (uint32_t)r; }
static inline size_t pair_slot(uint64_t key, size_t mask) { return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & mask; }

bpe_t *bpe_new(const int32_t base[256])
{
    bpe_t *b = fb_calloc(1, sizeof *b);
    memcpy(b->base, base, sizeof b->base);
    b->unk = -1;
    b->mask = 1023;
    b->keys = fb_malloc((b->mask + 1) * sizeof *b->keys);
    b->vals = fb_malloc((b->mask + 1) * sizeof *b->vals);
    memset(b->keys, 0xff, (b->mask + 1) * sizeof *b->keys);
    return b;
}

void bpe_free(bpe_t *b)
{
    if (!b)
        return;
    free(b->keys);
    free(b->vals);
    free(b->list);
    if (b->whole) {
        bytemap_free(b->whole);
        free(b->whole);
    }
    free(b);
}

static void table_put(uint64_t *keys, uint64_t *vals, size_t mask, uint64_t key, uint64_t val, size_t *used)
{
    size_t i = pair_slot(key, mask);
    while (keys[i] != EMPTY_KEY && keys[i] != key)
        i = (i + 1) & mask;
    if (keys[i] == EMPTY_KEY)
        (*used)++;
    keys[i] = key;
    vals[i] = val;
}

void bpe_add_merge(bpe_t *b, int32_t left, int32_t right, int32_t result)
{
    FB_ASSERT(left >= 0 && right >= 0 && result >= 0 && b->nlist < INT32_MAX);
    if (2 * (b->used + 1) > b->mask + 1) {
        size_t nmask = 2 * (b->mask + 1) - 1, dummy = 0;
        uint64_t *nk = fb_malloc((nmask + 1) * sizeof *nk), *nv = fb_malloc((nmask + 1) * sizeof *nv);
        memset(nk, 0xff, (nmask + 1) * sizeof *nk);
        for (size_t i = 0; i <= b->mask; i++)
            if (b->keys[i] != EMPTY_KEY)
                table_put(nk, nv, nmask, b->keys[i], b->vals[i], &dummy);
        free(b->keys);
        free(b->vals);
        b->keys = nk;
        b->vals = nv;
        b->mask = nmask;
    }
    uint64_t rank = b->nlist;
    table_put(b->keys, b->vals, b->mask, pair_key(left, right), rank << 32 | (uint32_t)result, &b->used);
    if (b->nlist == b->caplist) {
        b->caplist = b->caplist ? 2 * b->caplist : 1024;
        b->list = fb_realloc(b->list, 3 * b->caplist * sizeof *b->list);
    }
    b->list[3 * b->nlist] = left;
    b->list[3 * b->nlist + 1] = right;
    b->list[3 * b->nlist + 2] = result;
    b->nlist++;
}

size_t bpe_nmerges(const bpe_t *b) { return b->nlist; }

void bpe_merge_get(const bpe_t *b, size_t rank, int32_t *left, int32_t *right, int32_t *result)
{
    FB_ASSERT(rank < b->nlist);
    *left = b->list[3 * rank];
    *right = b->list[3 * rank + 1];
    *result = b->list[3 * rank + 2];
}

static inline int lookup(const bpe_t *b, int32_t l, int32_t r, int32_t *rank, int32_t *result)
{
    uint64_t key = pair_key(l, r);
    for (size_t i = pair_slot(key, b->mask);; i = (i + 1) & b->mask) {
        uint64_t k = b->keys[i];
        if (k == key) {
            *rank = (int32_t)(b->vals[i] >> 32);
            *result = (int32_t)(uint32_t)b->vals[i];
            return 1;
        }
        if (k == EMPTY_KEY)
            return 0;
    }
}

int bpe_merge_find(const bpe_t *b, int32_t left, int32_t right, int32_t *rank, int32_t *result)
{
    return lookup(b, left, right, rank, result);
}

void bpe_set_whole_words(bpe_t *b, bytemap_t *tokens) { b->whole = tokens; }
int bpe_has_whole_words(const bpe_t *b) { return b->whole != NULL; }

int32_t bpe_base(const bpe_t *b, uint8_t byte) { return b->base[byte]; }

void bpe_set_unk(bpe_t *b, int32_t unk, int fuse)
{
    b->unk = unk;
    b->fuse_unk = fuse;
}

int32_t bpe_unk(const bpe_t *b, int *fuse)
{
    *fuse = b->fuse_unk;
    return b->unk;
}

bpe_work_t *bpe_work_new(void)
{
    bpe_work_t *w = fb_calloc(1, sizeof *w);
    w->heap_threshold = 64;
    return w;
}

void bpe_work_free(bpe_work_t *w)
{
    if (!w)
        return;
    free(w->id);
    free(w->rank);
    free(w->result);
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w);
}

void bpe_work_set_heap_threshold(bpe_work_t *w, size_t n) { w->heap_threshold = n; }

static void work_reserve(bpe_work_t *w, size_t n)
{
    if (n <= w->cap)
        return;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < n)
        cap *= 2;
    w->id = fb_realloc(w->id, cap * sizeof *w->id);
    w->rank = fb_realloc(w->rank, cap * sizeof *w->rank);
    w->result = fb_realloc(w->result, cap * sizeof *w->result);
    w->prev = fb_realloc(w->prev, cap * sizeof *w->prev);
    w->next = fb_realloc(w->next, cap * sizeof *w->next);
    w->cap = cap;
}

static void emit(token_vec_t *out, const int32_t *ids, size_t k)
{
    token_vec_reserve(out, k);
    memcpy(out->ids + out->n, ids, k * sizeof *ids);
    out->n += k;
}

/* O(k^2) but with tiny constants: the usual case (k below ~64 bytes). */
static void encode_linear(const bpe_t *b, bpe_work_t *w, size_t k, token_vec_t *out)
{
    int32_t *id = w->id, *rank = w->rank, *res = w->result;
    for (size_t i = 0; i + 1 < k; i++)
        if (!lookup(b, id[i], id[i + 1], &rank[i], &res[i]))
            rank[i] = INT32_MAX;
    while (k > 1) {
        int32_t best = INT32_MAX;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < k; i++)
            if (rank[i] < best) {
                best = rank[i];
                bi = i;
            }
        if (best == INT32_MAX)
            break;
        id[bi] = res[bi];
        /* Drop symbol bi+1 and pair bi+1 (pair bi is recomputed below). */
        memmove(id + bi + 1, id + bi + 2, (k - bi - 2) * sizeof *id);
        if (k - bi > 2) {
            memmove(rank + bi + 1, rank + bi + 2, (k - bi - 3) * sizeof *rank);
            memmove(res + bi + 1, res + bi + 2, (k - bi - 3) * sizeof *res);
        }
        k--;
        if (bi > 0 && !lookup(b, id[bi - 1], id[bi], &rank[bi - 1], &res[bi - 1]))
            rank[bi - 1] = INT32_MAX;
        if (bi + 1 < k && !lookup(b, id[bi], id[bi + 1], &rank[bi], &res[bi]))
            rank[bi] = INT32_MAX;
    }
    emit(out, id, k);
}

static inline int ent_less(heap_ent_t a, heap_ent_t b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(bpe_work_t *w, heap_ent_t e)
{
    if (w->heap_n == w->heap_cap) {
        w->heap_cap = w->heap_cap ? 2 * w->heap_cap : 256;
        w->heap = fb_realloc(w->heap, w->heap_cap * sizeof *w->heap);
    }
    size_t i = w->heap_n++;
    while (i > 0 && ent_less(e, w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = e;
}

static heap_ent_t heap_pop(bpe_work_t *w)
{
    heap_ent_t top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ent_less(w->heap[c + 1], w->heap[c]))
            c++;
        if (!ent_less(w->heap[c], last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

static void push_pair(const bpe_t *b, bpe_work_t *w, int32_t pos)
{
    int32_t nx = w->next[pos], rank, res;
    if (nx >= 0 && lookup(b, w->id[pos], w->id[nx], &rank, &res))
        heap_push(w, (heap_ent_t){rank, pos, res});
}

/* Hugging Face's Word::merge_all: a queue of (rank, position); entries made
 * stale by earlier merges are recognised and skipped when popped. */
static void encode_heap(const bpe_t *b, bpe_work_t *w, size_t k, token_vec_t *out)
{
    int32_t *id = w->id, *prev = w->prev, *next = w->next;
    for (size_t i = 0; i < k; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < k ? (int32_t)i + 1 : -1;
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < k; i++)
        push_pair(b, w, (int32_t)i);
    while (w->heap_n) {
        heap_ent_t e = heap_pop(w);
        int32_t nx = next[e.pos], rank, res;
        if (id[e.pos] < 0 || nx < 0 || !lookup(b, id[e.pos], id[nx], &rank, &res) || res != e.result)
            continue;
        id[e.pos] = res;
        id[nx] = -1;
        next[e.pos] = next[nx];
        if (next[nx] >= 0)
            prev[next[nx]] = e.pos;
        if (prev[e.pos] >= 0)
            push_pair(b, w, prev[e.pos]);
        push_pair(b, w, e.pos);
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = next[i])
        id[m++] = id[i];
    emit(out, id, m);
}

void bpe_encode_word(const bpe_t *b, bpe_work_t *w, const uint8_t *s, size_t n, token_vec_t *out)
{
    FB_ASSERT(n > 0 && n < INT32_MAX);
    if (b->whole) {
        uint64_t *v = bytemap_find(b->whole, s, n, bytemap_hash(s, n));
        if (v) {
            token_vec_push(out, (int32_t)*v);
            return;
        }
    }
    work_reserve(w, n);
    size_t k = 0;
    int in_unk = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = b->base[s[i]];
        if (id >= 0) {
            w->id[k++] = id;
            in_unk = 0;
        } else if (b->unk >= 0 && !(in_unk && b->fuse_unk)) {
            w->id[k++] = b->unk;
            in_unk = 1;
        }
    }
    if (k == 0)
        return;
    if (k <= w->heap_threshold)
        encode_linear(b, w, k, out);
    else
        encode_heap(b, w, k, out);
}
