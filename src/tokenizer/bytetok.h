/* The built-in byte-level tokenizer: every byte is its own token, followed by
 * a handful of special tokens. It needs no training and no tokenizer file, so
 * a model can be trained on any text (valid UTF-8 or not) right away; the BPE
 * tokenizer of the full corpus pipeline keeps the same special-token names.
 *
 *   0..255   the byte values
 *   256      <|pad|>
 *   257      <|bos|>
 *   258      <|eos|>
 *   259      <|chapter_sep|>
 *   260..268 <|genre_fantasy|> ... <|genre_unknown|>, in enum bytetok_genre order
 */
#ifndef FABULA_DATA_BYTETOK_H
#define FABULA_DATA_BYTETOK_H

#include <stddef.h>
#include <stdint.h>

enum bytetok_special {
    BYTETOK_PAD = 256,
    BYTETOK_BOS = 257,
    BYTETOK_EOS = 258,
    BYTETOK_CHAPTER_SEP = 259,
    BYTETOK_GENRE_FIRST = 260,
};

/* Genre index (stored per novel and per sample); token = BYTETOK_GENRE_FIRST + index. */
enum bytetok_genre {
    GENRE_FANTASY = 0,
    GENRE_ROMANCE,
    GENRE_URBAN,
    GENRE_SCIFI,
    GENRE_HISTORICAL,
    GENRE_WUXIA,
    GENRE_MYSTERY,
    GENRE_OTHER,   /* a genre string fabula does not know */
    GENRE_UNKNOWN, /* no genre given */
    BYTETOK_NGENRES
};

/* Smallest vocab_size a model trained with this tokenizer can have. */
#define BYTETOK_VOCAB (BYTETOK_GENRE_FIRST + BYTETOK_NGENRES)

/* Genre index of a "genre" field: NULL -> GENRE_UNKNOWN; one of the names
 * (case-insensitive) -> its index; any other string -> GENRE_OTHER with
 * *was_unknown_string set to 1 (else 0; the pointer may be NULL). The names
 * "other" and "unknown" themselves are recognised. */
int bytetok_genre_id(const char *genre_or_null, int *was_unknown_string);

/* Lower-case name of a genre index ("fantasy"), NULL when out of range. */
const char *bytetok_genre_name(int genre);

/* Token id of a genre index. */
int bytetok_genre_token(int genre);

/* "<0x41>" for a byte id, "<|bos|>" etc. for a special, NULL for any other id. */
const char *bytetok_token_name(int id);

/* ids[i] = bytes[i] for i < n. */
void bytetok_encode(const uint8_t *bytes, size_t n, int32_t *ids);

/* Bytes of a token sequence: byte ids as the raw byte, specials as their
 * names, any id outside the vocabulary as "<|id_N|>" (a model whose
 * vocab_size is padded past BYTETOK_VOCAB can emit those). *out is a new
 * NUL-terminated buffer (free()); the length excludes the terminator and
 * counts any 0 bytes inside. */
size_t bytetok_decode(const int32_t *ids, size_t n, char **out);

#endif
