/* A tokenizer written out as the three files transformers'
 * AutoTokenizer.from_pretrained(DIR) reads (`fabula export`, docs/export.md):
 * tokenizer.json (the `tokenizers` library's format), tokenizer_config.json
 * and special_tokens_map.json, giving the ids fabula gives, special tokens
 * (genre, chapter, ...) at their ids.
 *
 *  - hf-bpe: the tokenizer.json it was loaded from, with any special token
 *    fabula knows that its added_tokens lacks appended;
 *  - bytes and fabula-bpe: a byte-level BPE model: vocab = each id's bytes
 *    as GPT-2 byte-level text, merges in rank order, pre-tokenizer fabula's
 *    regex split (fabula-bpe) then ByteLevel without its own regex; specials
 *    as added tokens. */
#ifndef FABULA_TOKENIZER_TOKENIZER_EXPORT_H
#define FABULA_TOKENIZER_TOKENIZER_EXPORT_H

#include "tokenizer/tokenizer.h"

/* Writes the three files into the existing directory `dir`.
 * `model_max_length`: tokenizer_config's model_max_length (the model's
 * positions). Ends the process with FB_EXIT_IO (writing), FB_EXIT_DATA
 * naming the tokenizer (one the format cannot express: two ids with the
 * same bytes). */
void tokenizer_export_hf(const tokenizer_t *t, const char *dir, int model_max_length);

/* The id of bos/eos/pad ("<|bos|>", ...), -1 when the tokenizer has none. */
int32_t tokenizer_export_bos(const tokenizer_t *t);
int32_t tokenizer_export_eos(const tokenizer_t *t);
int32_t tokenizer_export_pad(const tokenizer_t *t);

#endif
