/* The line charts one run's page and a comparison share: with one run the
 * series are that run's fields, with several each run is a series. */
#ifndef FABULA_REPORT_REPORT_CHARTS_H
#define FABULA_REPORT_REPORT_CHARTS_H

#include "report/run_data.h"
#include "util/strbuf.h"
#include "report/svg.h"

/* With one run, marks on ax where it resumed (report_resumes): a new array
 * for the caller to free once the chart is drawn. NULL with several runs. */
double *charts_mark_resumes(svg_axes_t *ax, const report_run_t *const *runs, size_t n);

/* Training loss and validation loss; validation loss per genre. */
void charts_losses(strbuf_t *b, const report_run_t *const *runs, size_t n);
/* Why there is no training loss per genre. */
void charts_loss_note(strbuf_t *b);
/* The number at `path` over steps (a note when no run has it). */
void charts_metric(strbuf_t *b, const report_run_t *const *runs, size_t n, const char *path, const char *title,
                   const char *ylabel, int y_from_0);
/* "mfu" as a percentage. */
void charts_mfu(strbuf_t *b, const report_run_t *const *runs, size_t n);
/* ranks.step_time_min / mean / max of the gather steps. */
void charts_rank_spread(strbuf_t *b, const report_run_t *r);

#endif
