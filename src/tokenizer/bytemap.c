#include "tokenizer/bytemap.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static inline uint64_t mix(uint64_t x)
{
    /* splitmix64's finalizer. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t bytemap_hash(const uint8_t *k, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 0x9fb21c651e98df25ull;
        h ^= h >> 29;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, k + i, n - i);
        h = (h ^ w) * 0x9fb21c651e98df25ull;
    }
    return mix(h);
}

void bytemap_init(bytemap_t *m) { memset(m, 0, sizeof *m); }

void bytemap_free(bytemap_t *m)
{
    free(m->slots);
    free(m->hash);
    free(m->koff);
    free(m->klen);
    free(m->val);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

void bytemap_clear(bytemap_t *m)
{
    if (m->slots)
        memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->n = 0;
    m->keys_len = 0;
}

size_t bytemap_memory(const bytemap_t *m)
{
    return (m->slots ? (m->mask + 1) * sizeof *m->slots : 0) + m->cap * (3 * sizeof(uint64_t) + sizeof(uint32_t)) +
           m->keys_cap;
}

uint64_t *bytemap_find(const bytemap_t *m, const uint8_t *k, size_t n, uint64_t h)
{
    if (!m->slots)
        return NULL;
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint32_t s = m->slots[i];
        if (!s)
            return NULL;
        size_t e = s - 1;
        if (m->hash[e] == h && m->klen[e] == n && memcmp(m->keys + m->koff[e], k, n) == 0)
            return &m->val[e];
    }
}

static void rehash(bytemap_t *m, size_t nslots)
{
    free(m->slots);
    m->slots = fb_calloc(nslots, sizeof *m->slots);
    m->mask = nslots - 1;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = m->hash[e] & m->mask;
        while (m->slots[i])
            i = (i + 1) & m->mask;
        m->slots[i] = (uint32_t)(e + 1);
    }
}

uint64_t *bytemap_insert(bytemap_t *m, const uint8_t *k, size_t n, uint64_t h, int *inserted)
{
    uint64_t *v = bytemap_find(m, k, n, h);
    if (v) {
        if (inserted)
            *inserted = 0;
        return v;
    }
    FB_ASSERT(n <= UINT32_MAX && m->n < UINT32_MAX - 1);
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->hash = fb_realloc(m->hash, m->cap * sizeof *m->hash);
        m->koff = fb_realloc(m->koff, m->cap * sizeof *m->koff);
        m->klen = fb_realloc(m->klen, m->cap * sizeof *m->klen);
        m->val = fb_realloc(m->val, m->cap * sizeof *m->val);
    }
    /* Load factor at most 1/2: probes stay short. */
    if (!m->slots || 2 * (m->n + 1) > m->mask + 1)
        rehash(m, m->slots ? 2 * (m->mask + 1) : 2048);
    if (m->keys_len + n > m->keys_cap) {
        while (m->keys_len + n > m->keys_cap)
            m->keys_cap = m->keys_cap ? 2 * m->keys_cap : 1 << 16;
        m->keys = fb_realloc(m->keys, m->keys_cap);
    }
    size_t e = m->n++;
    m->hash[e] = h;
    m->koff[e] = m->keys_len;
    m->klen[e] = (uint32_t)n;
    m->val[e] = 0;
    if (n)
        memcpy(m->keys + m->keys_len, k, n);
    m->keys_len += n;
    size_t i = h & m->mask;
    while (m->slots[i])
        i = (i + 1) & m->mask;
    m->slots[i] = (uint32_t)(e + 1);
    if (inserted)
        *inserted = 1;
    return &m->val[e];
}
