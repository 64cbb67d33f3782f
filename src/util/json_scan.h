/* Scans of JSON text that jansson's parser does not offer: the keys given
 * twice in one object (jansson keeps the last value silently, or refuses the
 * whole text), and numbers too large for a double or a 64-bit integer (which
 * jansson refuses). Both need text a JSON parser accepts, apart from those
 * numbers. */
#ifndef FABULA_UTIL_JSON_SCAN_H
#define FABULA_UTIL_JSON_SCAN_H

#include <stddef.h>

/* Calls dup(ctx, path, first_line, line) for each key met a second (third,
 * ...) time in the same object: `path` is the key's dotted path from the top
 * ("a.b", "a[2].b"; cut at 200 bytes), `first_line` the 1-based line of its
 * first occurrence, `line` that of this one. Keys compare as
 * written (two spellings with different escapes are not matched). Returns
 * the number of duplicates. */
size_t json_scan_duplicates(const char *text, size_t n,
                            void (*dup)(void *ctx, const char *path, int first_line, int line),
                            void *ctx);

/* A copy of `text` (length in *out_n) in which every number jansson cannot
 * hold is rewritten: an integer beyond 64 bits gets ".0" (read as a double);
 * a number beyond the double range becomes null. Strings are untouched.
 * NULL when there is no such number. */
char *json_scan_tame_numbers(const char *text, size_t n, size_t *out_n);

#endif
