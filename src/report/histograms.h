/* How values spread over a run, where a curve shows only their course: the
 * step times (a long tail is stalls, two humps two kinds of step) and the
 * tokens each expert got per step (a wide spread is an uneven router). */
#ifndef FABULA_REPORT_HISTOGRAMS_H
#define FABULA_REPORT_HISTOGRAMS_H

#include "report/run_data.h"
#include "util/strbuf.h"

/* "step_time" over the measured steps (report_is_warmup's left out, unless
 * every step is one); a note when no step has it. */
void histogram_step_time(strbuf_t *b, const report_run_t *r);

/* Every number of "expert_tokens" (each step, MoE layer and expert); a
 * note when the run has none (a dense model). */
void histogram_expert_tokens(strbuf_t *b, const report_run_t *r);

#endif
