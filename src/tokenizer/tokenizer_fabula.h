/* fabula's own tokenizer file (format "fabula-tokenizer", version 1; see
 * docs/tokenizer.md): a byte-level BPE given by its pre-tokenizer regex,
 * its merges as pairs of token ids, and the special tokens, with a SHA-256
 * digest of the canonical content that is verified on load. */
#ifndef FABULA_DATA_TOKENIZER_FABULA_H
#define FABULA_DATA_TOKENIZER_FABULA_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

#define TOKENIZER_FABULA_FORMAT "fabula-tokenizer"
#define TOKENIZER_FABULA_VERSION 1

/* What `fabula tokenizer train` records about its run (informational: not
 * covered by the digest). */
typedef struct tokenizer_train_info {
    long long vocab_size_requested;
    long long min_frequency;
    long long novels, bytes;
    long long pretokens, distinct_pretokens;
} tokenizer_train_info_t;

/* The tokenizer with this pre-tokenizer pattern and these merges: merge i
 * is (merges[2i], merges[2i+1]) -> id 256 + i; ids 0..255 are the bytes;
 * the 13 specials follow the merges in the order of docs/data.md. `source`
 * names it in messages. Bad content (an id not yet defined, a pattern that
 * does not compile) exits FB_EXIT_DATA naming `source`. */
tokenizer_t *tokenizer_fabula_build(const char *source, const char *pattern, const int32_t *merges, size_t nmerges);

/* The file text (JSON, digest included) of a tokenizer made by
 * tokenizer_fabula_build; `info` may be NULL. malloc'd, length in *len. */
char *tokenizer_fabula_to_json(const tokenizer_t *t, const tokenizer_train_info_t *info, size_t *len);

#endif
