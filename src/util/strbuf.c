/* util/strbuf.h. */
#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void reserve(strbuf_t *b, size_t more)
{
    if (b->n + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    b->s = s;
    b->cap = cap;
}

void sb_printf(strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0)
        fb_fatal(FB_EXIT_INTERNAL, "vsnprintf failed on '%s'", fmt);
    reserve(b, (size_t)k);
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void sb_add(strbuf_t *b, const void *s, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void sb_xml(strbuf_t *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': sb_printf(b, "&amp;"); break;
        case '<': sb_printf(b, "&lt;"); break;
        case '>': sb_printf(b, "&gt;"); break;
        case '"': sb_printf(b, "&quot;"); break;
        case '\'': sb_printf(b, "&#39;"); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t')
                sb_printf(b, " ");
            else
                sb_printf(b, "%c", *s);
        }
    }
}

void sb_free(strbuf_t *b)
{
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}
