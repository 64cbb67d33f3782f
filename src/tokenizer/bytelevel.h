/* The byte <-> character table of byte-level BPE (GPT-2's bytes_to_unicode,
 * as in Hugging Face tokenizers): every byte value gets a printable code
 * point, so that a vocabulary of byte strings can be stored as JSON text.
 * Bytes 33..126, 161..172 and 174..255 stand for themselves; the other 68
 * (0..32, 127..160, 173) map, in increasing order, to U+0100..U+0143. So the
 * space 0x20 is U+0120 'Ġ' and the newline 0x0A is U+010A 'Ċ'. */
#ifndef FABULA_DATA_BYTELEVEL_H
#define FABULA_DATA_BYTELEVEL_H

#include <stddef.h>
#include <stdint.h>

/* The code point that stands for byte b. */
uint32_t bytelevel_char(uint8_t b);

/* The byte a code point stands for, or -1 when it is not in the table. */
int bytelevel_byte(uint32_t cp);

/* Writes the UTF-8 text of byte b's character to out (1 or 2 bytes); returns the length. */
int bytelevel_char_utf8(uint8_t b, char out[2]);

/* Decodes the byte-level text s[0..n) (UTF-8) into bytes: out must hold n
 * bytes. Returns the byte count, or -1 when s is not valid UTF-8 or holds a
 * character outside the table (a token that is not a byte-level string). */
long bytelevel_decode(const char *s, size_t n, uint8_t *out);

#endif
