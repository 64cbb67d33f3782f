/* The tokenizer object shared by tokenizer.c (encode, decode, the common
 * builder and digest) and the loaders of the three kinds. Private to
 * src/tokenizer/tokenizer*.c and the tokenizer tests. */
#ifndef FABULA_DATA_TOKENIZER_INTERNAL_H
#define FABULA_DATA_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"

enum tokenizer_kind_id { TOKENIZER_BYTES = 0, TOKENIZER_FABULA, TOKENIZER_HF };

/* Per-id flags. */
enum {
    TOKF_PRESENT = 1, /* the id exists (Hugging Face vocabularies may have holes) */
    TOKF_SPECIAL = 2, /* a special/added token: decodes to its text, never produced by encode */
    TOKF_RAW = 4,     /* a vocabulary entry that is not byte-level text: its UTF-8 is its bytes */
};

struct tokenizer {
    int kind;
    char *source;          /* the file it came from ("bytes" for the built-in one) */
    int32_t vocab_size;
    uint8_t *flags;        /* per id */
    uint64_t *off;         /* per id: its bytes are bytes[off[id] .. off[id] + len[id]) */
    uint32_t *len;
    uint8_t *bytes;
    size_t bytes_len, bytes_cap;
    char **special_text;   /* specials and added tokens, in id order of registration */
    int32_t *special_id;
    int nspecial;
    normalizer_t *norm;    /* NULL: the text is used as it is */
    int lossy;             /* a normalizer or bytes without a token: decode(encode(x)) may differ from x */
    pretok_t *pretok;      /* NULL for "bytes" */
    bpe_t *bpe;            /* NULL for "bytes" */
    uint64_t serial;       /* tells per-thread encode caches which tokenizer they belong to */
    char digest[65];
};

/* An empty tokenizer of `vocab_size` ids (all absent). */
tokenizer_t *tokenizer_alloc(int kind, const char *source, int32_t vocab_size);
/* Gives id its bytes and flags (TOKF_PRESENT is implied). */
void tokenizer_set_token(tokenizer_t *t, int32_t id, const uint8_t *bytes, size_t n, int flags);
/* Registers a special token: sets its bytes to its text, flags it. */
void tokenizer_add_special(tokenizer_t *t, const char *text, int32_t id);
/* Grows the vocabulary (new ids absent). */
void tokenizer_grow(tokenizer_t *t, int32_t vocab_size);
/* Computes t->digest from the canonical description. */
void tokenizer_compute_digest(tokenizer_t *t);
/* The canonical description the digest is taken over (docs/tokenizer.md);
 * malloc'd, length in *n. */
char *tokenizer_canonical(const tokenizer_t *t, size_t *n);

/* fabula's 13 special tokens, in id order for "bytes" and fabula files. */
#define TOKENIZER_NSPECIAL 13
const char *tokenizer_fabula_special_name(int i);

/* Loaders of the two file kinds: `root` is the parsed JSON (jansson), `path`
 * names the file in messages. Errors exit FB_EXIT_DATA. */
struct json_t;
tokenizer_t *tokenizer_fabula_from_json(const char *path, struct json_t *root);
tokenizer_t *tokenizer_hf_from_json(const char *path, struct json_t *root);

#endif
