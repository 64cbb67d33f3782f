/* Hugging Face tokenizer.json normalizers, applied to the text before it is
 * pre-tokenized: NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace,
 * Prepend, BertNormalizer, and Sequences of them. Unicode tables come from
 * utf8proc (docs/tokenizer.md says why), so fabula's normalized text is the
 * one `tokenizers` computes.
 *
 * Any bytes are accepted: steps that work on characters change the valid
 * UTF-8 runs of the text and keep bytes that are not valid UTF-8 as they
 * are (`tokenizers` only ever sees valid UTF-8). */
#ifndef FABULA_DATA_NORMALIZER_H
#define FABULA_DATA_NORMALIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct normalizer normalizer_t;

normalizer_t *normalizer_new(void);
void normalizer_free(normalizer_t *nz);
int normalizer_nsteps(const normalizer_t *nz);

/* Unicode normal forms, by their Hugging Face names. */
typedef enum norm_form { NORM_NFC = 0, NORM_NFD, NORM_NFKC, NORM_NFKD } norm_form_t;

void normalizer_add_form(normalizer_t *nz, norm_form_t form);
void normalizer_add_lowercase(normalizer_t *nz);
void normalizer_add_strip(normalizer_t *nz, int left, int right);
/* Removes non-spacing marks (Mn) without decomposing first, as HF's StripAccents. */
void normalizer_add_strip_accents(normalizer_t *nz);
void normalizer_add_prepend(normalizer_t *nz, const char *prefix);
/* Replaces every non-empty match of `pattern` (a PCRE2 regex, or a plain
 * string when `literal`) by `content`. Returns 0, or -1 with the compile
 * error in err. */
int normalizer_add_replace(normalizer_t *nz, const char *pattern, int literal, const char *content, char *err,
                           size_t errlen);
/* BertNormalizer; strip_accents is already resolved (HF: null = lowercase). */
void normalizer_add_bert(normalizer_t *nz, int clean_text, int chinese_chars, int strip_accents, int lowercase);

/* The normalized text of text[0..n): malloc'd (NUL after it), length in *len. */
uint8_t *normalizer_apply(const normalizer_t *nz, const uint8_t *text, size_t n, size_t *len);

/* A line-per-step description of the steps, for the tokenizer's canonical
 * text (docs/tokenizer.md); malloc'd. */
char *normalizer_describe(const normalizer_t *nz);

#endif
