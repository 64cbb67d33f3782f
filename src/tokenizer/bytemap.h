/* A hash map from byte strings to a 64-bit value, with entries kept densely
 * in insertion order (so they can be listed, sorted or serialized without
 * touching the table). Used for the encoder's pre-token cache, the BPE
 * trainer's pre-token counts and whole-token lookups. Not thread-safe: each
 * thread uses its own map, or maps are read-only once built. */
#ifndef FABULA_DATA_BYTEMAP_H
#define FABULA_DATA_BYTEMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bytemap {
    uint32_t *slots;    /* entry index + 1, 0 = empty; `mask + 1` of them */
    size_t mask;
    uint64_t *hash;     /* per entry */
    uint64_t *koff;     /* key offset in `keys` */
    uint32_t *klen;
    uint64_t *val;
    size_t n, cap;      /* entries used / allocated */
    uint8_t *keys;      /* key bytes, back to back */
    size_t keys_len, keys_cap;
} bytemap_t;

/* A well-mixed 64-bit hash of k[0..n). */
uint64_t bytemap_hash(const uint8_t *k, size_t n);

void bytemap_init(bytemap_t *m);
void bytemap_free(bytemap_t *m);
/* Forgets every entry; keeps the memory. */
void bytemap_clear(bytemap_t *m);

/* The value of key k (whose hash is h), or NULL when absent. The pointer is
 * valid until the next insertion. */
uint64_t *bytemap_find(const bytemap_t *m, const uint8_t *k, size_t n, uint64_t h);

/* The value of k, inserted with value 0 when absent (*inserted tells). */
uint64_t *bytemap_insert(bytemap_t *m, const uint8_t *k, size_t n, uint64_t h, int *inserted);

/* Entry i (0 <= i < m->n): its key bytes. */
static inline const uint8_t *bytemap_key(const bytemap_t *m, size_t i, size_t *n)
{
    *n = m->klen[i];
    return m->keys + m->koff[i];
}

/* Bytes held by the map (table, entries and keys), for cache limits. */
size_t bytemap_memory(const bytemap_t *m);

#endif
