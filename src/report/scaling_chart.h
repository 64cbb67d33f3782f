/* scaling.svg of `fabula report --scaling`: throughput against ranks on
 * log-log axes (the median with the repeats' min-max, the ideal linear
 * line, the prediction where there is one) above the parallel efficiency
 * against ranks on a log2 axis with the ideal at 1. */
#ifndef FABULA_REPORT_SCALING_CHART_H
#define FABULA_REPORT_SCALING_CHART_H

#include <stddef.h>

#include "report/scaling_data.h"
#include "util/strbuf.h"

/* The whole standalone file, XML declaration included. */
void scaling_chart(strbuf_t *b, const scaling_point_t *p, size_t n);

#endif
