/* SHA-256 (FIPS 180-4): the digest of tokenizers and, through them, of the
 * corpus files made with them. Written here because fabula links no crypto
 * library; speed is irrelevant at the sizes hashed (a few MB at most). */
#ifndef FABULA_UTIL_SHA256_H
#define FABULA_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t nbytes;     /* total message length so far */
    uint8_t block[64];   /* pending input, `fill` bytes of it */
    size_t fill;
} sha256_ctx_t;

void sha256_init(sha256_ctx_t *c);
void sha256_update(sha256_ctx_t *c, const void *data, size_t n);
void sha256_final(sha256_ctx_t *c, uint8_t out[32]);

/* One-shot digest as 64 lower-case hex digits and a terminating NUL. */
void sha256_hex(const void *data, size_t n, char out[65]);

#endif
