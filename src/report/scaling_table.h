/* The Markdown of `fabula report --scaling` (docs/monitoring.md, "Scaling
 * table"): one row per point, each phase's time over ranks, the planner's
 * prediction beside the measurement, and a warning per oversubscribed
 * point. */
#ifndef FABULA_REPORT_SCALING_TABLE_H
#define FABULA_REPORT_SCALING_TABLE_H

#include <stddef.h>

#include "report/scaling_data.h"
#include "util/strbuf.h"

void scaling_tables(strbuf_t *b, const scaling_point_t *p, size_t n);

#endif
