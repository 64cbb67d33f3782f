/* Tokenizers behind one interface: the built-in byte-level one ("bytes"), a
 * fabula BPE file (made by `fabula tokenizer train`), or a Hugging Face
 * tokenizer.json of the byte-level BPE kind. prep and train see only this. */
#ifndef FABULA_DATA_TOKENIZER_H
#define FABULA_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/token_vec.h"

typedef struct tokenizer tokenizer_t;

/* "bytes", a fabula tokenizer file, or a tokenizer.json (detected by
 * content). Errors: FB_EXIT_IO (unreadable) or FB_EXIT_DATA (malformed),
 * naming the file. */
tokenizer_t *tokenizer_load(const char *spec);
void tokenizer_free(tokenizer_t *t);

int tokenizer_vocab_size(const tokenizer_t *t);
/* Hex SHA-256 over the tokenizer's canonical content: corpus files record
 * it, and training refuses a corpus made with another tokenizer. */
const char *tokenizer_digest(const tokenizer_t *t);
/* "bytes", "fabula-bpe" or "hf-bpe". */
const char *tokenizer_kind(const tokenizer_t *t);

/* Id of a special token by its text ("<|chapter_sep|>", "<|genre_wuxia|>",
 * "<|pad|>", "<|bos|>", "<|eos|>"), or -1 if the tokenizer lacks it. */
int32_t tokenizer_special(const tokenizer_t *t, const char *text);

/* Appends the ids of `text` (any bytes: invalid UTF-8 too) to `out`.
 * Special-token text inside `text` is NOT interpreted: it is ordinary text. */
void tokenizer_encode(const tokenizer_t *t, const uint8_t *text, size_t n, token_vec_t *out);
/* The bytes of `ids` (specials as their text); malloc'd, length in *len.
 * decode(encode(x)) == x for every byte string x, except for a
 * tokenizer.json that normalizes the text or lacks tokens for some bytes:
 * then decode(encode(x)) == tokenizer_expected_text(x) (see there). */
uint8_t *tokenizer_decode(const tokenizer_t *t, const int32_t *ids, size_t n, size_t *len);

/* ---- additions (tokenizer.c) ---- */

/* The special (and, for a tokenizer.json, added) tokens: i in
 * [0, tokenizer_nspecial); returns the text, id in *id. */
int tokenizer_nspecial(const tokenizer_t *t);
const char *tokenizer_special_at(const tokenizer_t *t, int i, int32_t *id);

/* The bytes token `id` decodes to (not NUL-terminated), NULL for an id
 * outside the vocabulary. */
const uint8_t *tokenizer_token_bytes(const tokenizer_t *t, int32_t id, size_t *len);

/* Whether decode(encode(x)) can differ from x (a tokenizer.json with a
 * normalizer, or whose vocab lacks some bytes). */
int tokenizer_is_lossy(const tokenizer_t *t);
/* What decode(encode(x)) gives: x normalized, then each byte without a
 * token dropped or, with an unknown token, that token's text (once per run
 * with fuse_unk). malloc'd, length in *len. */
uint8_t *tokenizer_expected_text(const tokenizer_t *t, const uint8_t *text, size_t n, size_t *len);

/* The file the tokenizer was loaded from, or "bytes". */
const char *tokenizer_source(const tokenizer_t *t);

/* Thread safety: a loaded tokenizer is read-only; tokenizer_encode may be
 * called from several threads at once (each thread keeps its own pre-token
 * cache and regex match state). */

#endif
