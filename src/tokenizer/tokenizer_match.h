/* Whether a tokenizer given on the command line (`generate --tokenizer`,
 * `export --tokenizer`) is the one a checkpoint was trained with: another
 * vocabulary would turn the model's ids into other text without a word
 * (docs/generate.md, docs/export.md). */
#ifndef FABULA_TOKENIZER_TOKENIZER_MATCH_H
#define FABULA_TOKENIZER_TOKENIZER_MATCH_H

#include "tokenizer/tokenizer.h"

/* `tok`, loaded from `spec`, against checkpoint `ckpt` whose saved config
 * names `trained` (data.tokenizer: "bytes" or a file) and `corpus`
 * (data.corpus, "" for none). The reference is the trained tokenizer when
 * it can be read, else the corpus's record of it (digest, kind,
 * vocabulary). A different vocabulary (size, an id's bytes, a special
 * token) ends the process with FB_EXIT_DATA naming both; nothing to compare
 * with is a warning. Serial. */
void tokenizer_check_match(const char *ckpt, const char *trained, const char *corpus, const tokenizer_t *tok,
                           const char *spec);

#endif
