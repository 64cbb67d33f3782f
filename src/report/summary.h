/* A run's headline numbers as (item, value) text pairs: printed as the
 * Markdown summary and as the first table of the HTML page, so both say the
 * same digits (docs/monitoring.md lists each item and how it is computed). */
#ifndef FABULA_REPORT_SUMMARY_H
#define FABULA_REPORT_SUMMARY_H

#include "report/run_data.h"
#include "util/strbuf.h"

typedef struct summary {
    char **item, **value;
    size_t n, cap;
} summary_t;

void summary_build(const report_run_t *r, summary_t *s);
void summary_add(summary_t *s, const char *item, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "| item | value |" rows under a header. */
void summary_markdown(const summary_t *s, strbuf_t *b);
void summary_free(summary_t *s);

/* The phases of "time", in the order the report stacks them. */
#define REPORT_NPHASES 7
extern const char *const report_phases[REPORT_NPHASES];

#endif
