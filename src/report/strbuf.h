/* A growing text buffer: the report builds its HTML, SVG and Markdown in
 * memory and writes each file once (atomically). */
#ifndef FABULA_REPORT_STRBUF_H
#define FABULA_REPORT_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf_t;

void sb_printf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* `s` escaped for XML text and attribute values (& < > " '). */
void sb_xml(strbuf_t *b, const char *s);
void sb_free(strbuf_t *b);
/* Writes the buffer to `path` atomically (fb_fatal FB_EXIT_IO on failure). */
void sb_write_file(const strbuf_t *b, const char *path);

#endif
