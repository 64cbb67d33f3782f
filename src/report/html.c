/* The report's page (report/html.h). */
#include "report/html.h"

#include <stdarg.h>
#include <stdio.h>

void html_begin(strbuf_t *b, const char *title)
{
    sb_printf(b, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
                 "<meta charset=\"utf-8\"/>\n<title>");
    sb_xml(b, title);
    sb_printf(b, "</title>\n<style>\n"
                 "body{font-family:sans-serif;margin:1.5em;max-width:1500px;color:#222}\n"
                 "h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}\n"
                 "table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ccc;padding:2px 8px;"
                 "text-align:left}\n"
                 "th.group{background:#f0f0f0}\n"
                 "svg.chart{margin:4px 8px 4px 0;border:1px solid #eee}\n"
                 ".note{color:#866;font-style:italic}\n"
                 "pre{background:#f6f6f6;padding:8px;font-size:0.8em;max-height:30em;overflow:auto}\n"
                 "</style>\n</head>\n<body>\n<h1>");
    sb_xml(b, title);
    sb_printf(b, "</h1>\n");
}

void html_end(strbuf_t *b)
{
    sb_printf(b, "<p class=\"note\">Written by fabula report (docs/monitoring.md); no script, no network.</p>\n"
                 "</body>\n</html>\n");
}

void html_h2(strbuf_t *b, const char *id, const char *text)
{
    sb_printf(b, "<h2 id=\"%s\">", id);
    sb_xml(b, text);
    sb_printf(b, "</h2>\n");
}

void html_note(strbuf_t *b, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    sb_printf(b, "<p class=\"note\">");
    sb_xml(b, buf);
    sb_printf(b, "</p>\n");
}

void html_summary(strbuf_t *b, const summary_t *s)
{
    sb_printf(b, "<table class=\"summary\">\n");
    for (size_t i = 0; i < s->n; i++) {
        sb_printf(b, "<tr><th>");
        sb_xml(b, s->item[i]);
        sb_printf(b, "</th><td>");
        sb_xml(b, s->value[i]);
        sb_printf(b, "</td></tr>\n");
    }
    sb_printf(b, "</table>\n");
}

void html_pre(strbuf_t *b, const char *text)
{
    sb_printf(b, "<pre>");
    sb_xml(b, text);
    sb_printf(b, "</pre>\n");
}
