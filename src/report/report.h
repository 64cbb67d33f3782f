/* `fabula report`: what a run directory holds, as an HTML page with inline
 * SVG charts and a Markdown summary; several runs overlaid; a scaling table
 * (docs/monitoring.md "The report"). One process, no MPI. Each returns the
 * process exit code; errors on input are fb_fatal with the documented code. */
#ifndef FABULA_REPORT_REPORT_H
#define FABULA_REPORT_REPORT_H

#include <stddef.h>

/* RUN_DIR -> OUT/report.html and OUT/summary.md; the summary also on stdout. */
int report_run(const char *run_dir, const char *out_dir);
/* RUN_A RUN_B ... -> OUT/compare.html and OUT/compare.md (stdout too). */
int report_compare(const char *const *dirs, size_t n, const char *out_dir);
/* RUN_DIR... -> the scaling table on stdout, OUT/scaling.md, OUT/scaling.svg. */
int report_scaling(const char *const *dirs, size_t n, const char *out_dir);

#endif
