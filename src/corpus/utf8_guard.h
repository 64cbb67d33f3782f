/* Carrying invalid UTF-8 through jansson unchanged.
 *
 * jansson refuses input that is not valid UTF-8, but the byte tokenizer can
 * train on any bytes, and old novel files often hold a stray Latin-1 or GBK
 * byte. Before parsing, each byte that is not part of a valid UTF-8 sequence
 * is replaced by a marker code point U+10FF00 + byte (private use, plane 16;
 * four bytes F4 8F BC..BF 80..BF); after parsing, the markers inside the
 * extracted strings are turned back into the original bytes. A line that has
 * invalid bytes *and* already contains a marker code point cannot be carried
 * exactly and is reported as a collision. */
#ifndef FABULA_DATA_UTF8_GUARD_H
#define FABULA_DATA_UTF8_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 when s[0]
 * does not start one (bad lead byte, bad continuation, overlong form,
 * surrogate, above U+10FFFF, or cut off by the end at s + n). */
int utf8_guard_seqlen(const uint8_t *s, size_t n);

/* Returns the number of invalid bytes in in[0..n). When it is > 0, *out is a
 * new buffer (free()) of *out_n bytes with every invalid byte replaced by its
 * marker; when 0, *out is NULL. Returns -1 (and *out NULL) on a collision. */
long utf8_guard_wrap(const uint8_t *in, size_t n, uint8_t **out, size_t *out_n);

/* Replaces every marker in s[0..n) by its byte, in place; returns the new length. */
size_t utf8_guard_unwrap(uint8_t *s, size_t n);

#endif
