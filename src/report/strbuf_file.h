/* A report's text buffer written as its file. */
#ifndef FABULA_REPORT_STRBUF_FILE_H
#define FABULA_REPORT_STRBUF_FILE_H

#include "util/strbuf.h"

/* Writes the buffer to `path` atomically (fb_fatal FB_EXIT_IO on failure). */
void sb_write_file(const strbuf_t *b, const char *path);

#endif
