/* The bottleneck verdicts of one run as a table. A long run gathers every
 * steps_per_print steps and mostly repeats itself: consecutive verdicts
 * that say the same once their numbers are set aside share one row. */
#ifndef FABULA_REPORT_VERDICTS_H
#define FABULA_REPORT_VERDICTS_H

#include "report/run_data.h"
#include "util/strbuf.h"

/* One row per run of consecutive "bottleneck" records whose verdict,
 * evidence and advice are equal with every number (a run of digits and
 * dots) read as one placeholder: "steps A–B (n gathers)", the verdict, and
 * the last record's evidence and advice. The last 60 rows; a note when the
 * run has no verdict. */
void verdict_table(strbuf_t *b, const report_run_t *r);

#endif
