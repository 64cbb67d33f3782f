/* The curves an engineer reads first when a run misbehaves, on one run's
 * page: the gradient norm against the clipping threshold, the router's aux
 * and z losses, the expert assignments capacity dropped, the fp16 loss
 * scale. Each is drawn only when metrics.jsonl has its field; a note says
 * why not otherwise. Every chart marks where the run resumed. */
#ifndef FABULA_REPORT_HEALTH_CHARTS_H
#define FABULA_REPORT_HEALTH_CHARTS_H

#include "report/run_data.h"
#include "util/strbuf.h"

void health_charts(strbuf_t *b, const report_run_t *r);

#endif
