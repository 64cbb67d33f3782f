/* The page around the charts: XHTML that parses as XML and as HTML5, one
 * inline style sheet, no script, nothing fetched. */
#ifndef FABULA_REPORT_HTML_H
#define FABULA_REPORT_HTML_H

#include "util/strbuf.h"
#include "report/summary.h"

void html_begin(strbuf_t *b, const char *title);
void html_end(strbuf_t *b);
void html_h2(strbuf_t *b, const char *id, const char *text);
/* A paragraph saying why a chart is not there. */
void html_note(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void html_summary(strbuf_t *b, const summary_t *s);
void html_pre(strbuf_t *b, const char *text);

#endif
