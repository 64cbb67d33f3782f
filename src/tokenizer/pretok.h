/* Pre-tokenization: cutting text into pieces ("pre-tokens") before BPE, by
 * a sequence of regex splits run with PCRE2 (UTF + Unicode properties, JIT
 * when available). Each step splits every piece the previous step produced,
 * the way a Hugging Face pre_tokenizer Sequence does.
 *
 * Any bytes are accepted: patterns are compiled with PCRE2_MATCH_INVALID_UTF,
 * so a byte that is not valid UTF-8 simply never matches; such bytes (and
 * any other text between matches) still come out as pieces of their own, so
 * the pieces always tile the input exactly. A match may be empty: it cuts
 * the text where it is, as in tokenizers (an empty pattern cuts between
 * every two characters). */
#ifndef FABULA_DATA_PRETOK_H
#define FABULA_DATA_PRETOK_H

#include <stddef.h>
#include <stdint.h>

/* GPT-2's pattern, the one Hugging Face's ByteLevel pre-tokenizer applies
 * when "use_regex" is true. */
#define PRETOK_GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* fabula's own pattern for Chinese and English novels (docs/tokenizer.md):
 * English contractions (straight or curly apostrophe); every Han ideograph
 * alone; runs of other letters/marks with an optional leading space;
 * numbers in groups of up to 3 digits; runs of punctuation/symbols with an
 * optional leading space and trailing newlines; whitespace as GPT-2 does.
 * Han is given as the CJK ideograph blocks rather than \p{Han}, whose
 * meaning changed in PCRE2 10.40 (script extensions take in 。 and ，), so
 * the split does not depend on the PCRE2 version. */
#define PRETOK_HAN_RANGES "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{323AF}"
#define PRETOK_FABULA_PATTERN                                                                              \
    "['\\x{2019}](?i:[sdmt]|ll|ve|re)|[" PRETOK_HAN_RANGES "]"                                              \
    "| ?[^\\s" PRETOK_HAN_RANGES "\\p{N}\\p{P}\\p{S}\\p{C}\\p{Z}]+|\\p{N}{1,3}"                             \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* What happens to the matches of a step (Hugging Face's
 * SplitDelimiterBehavior; "Removed" is not offered: it would lose text). */
typedef enum pretok_behavior {
    PRETOK_ISOLATED = 0,         /* matches and the text between them are separate pieces */
    PRETOK_MERGED_WITH_PREVIOUS, /* a match joins the piece before it */
    PRETOK_MERGED_WITH_NEXT,     /* a match joins the piece after it */
    PRETOK_CONTIGUOUS,           /* adjacent matches form one piece */
} pretok_behavior_t;

typedef struct pretok pretok_t;
typedef struct pretok_scratch pretok_scratch_t;

pretok_t *pretok_new(void);
void pretok_free(pretok_t *p);

/* Appends a step. `literal`: the pattern is a plain string, not a regex.
 * `invert`: the pattern matches the pieces, not the delimiters. Returns 0,
 * or -1 with PCRE2's message and the offset in err. */
int pretok_add_split(pretok_t *p, const char *pattern, int literal, pretok_behavior_t behavior, int invert,
                     char *err, size_t errlen);

/* Makes the last step match on the byte-level text of its pieces (each byte
 * as its bytes_to_unicode character, src/tokenizer/bytelevel.h), as a
 * Hugging Face step placed after ByteLevel does; the pieces are still cut
 * at the corresponding bytes. */
void pretok_set_bytelevel(pretok_t *p);
/* Whether step i matches on byte-level text. */
int pretok_step_bytelevel(const pretok_t *p, int i);

int pretok_nsteps(const pretok_t *p);
/* A step's settings, for the tokenizer's canonical description. */
void pretok_step_get(const pretok_t *p, int i, const char **pattern, int *literal, pretok_behavior_t *behavior,
                     int *invert);
const char *pretok_behavior_name(pretok_behavior_t b);
/* Whether the compiled patterns run through the JIT. */
int pretok_jit_enabled(const pretok_t *p);

/* Per-thread match state (a pretok_t itself is read-only once built and may
 * be shared by threads, each with its own scratch). */
pretok_scratch_t *pretok_scratch_new(void);
void pretok_scratch_free(pretok_scratch_t *s);

/* Calls fn(ctx, piece, len) for every non-empty piece of text[0..n), in
 * order; the pieces concatenate to the text. With no step the whole text is
 * one piece. */
typedef void (*pretok_piece_fn)(void *ctx, const uint8_t *piece, size_t len);
void pretok_split(const pretok_t *p, pretok_scratch_t *s, const uint8_t *text, size_t n, pretok_piece_fn fn,
                  void *ctx);

#endif
