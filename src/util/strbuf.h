/* A growing text buffer: text built in memory and written once (the
 * report's HTML, SVG and Markdown; a tokenizer's canonical form). */
#ifndef FABULA_UTIL_STRBUF_H
#define FABULA_UTIL_STRBUF_H

#include <stddef.h>

/* s is NUL-terminated once anything was added; {0} is the empty buffer. */
typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf_t;

void sb_printf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes of s as they are (NULs included). */
void sb_add(strbuf_t *b, const void *s, size_t n);
/* `s` escaped for XML text and attribute values (& < > " '). */
void sb_xml(strbuf_t *b, const char *s);
void sb_free(strbuf_t *b);

#endif
