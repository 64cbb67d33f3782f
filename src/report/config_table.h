/* The run's config as the report's "Config and layout" table: the layout
 * (ranks, dp, tp, pp, sp, ep, ZeRO stage), the optimizer, learning rate,
 * scheduler and clipping, the precision and compute dtype, the model and
 * data keys, then the whole config.json folded. */
#ifndef FABULA_REPORT_CONFIG_TABLE_H
#define FABULA_REPORT_CONFIG_TABLE_H

#include "report/run_data.h"
#include "util/strbuf.h"

/* Rows <tr><th>KEY</th><td>VALUE</td></tr>: KEY a config.json path and
 * VALUE its value (strings bare, numbers in the fewest digits that read
 * back the same), or KEY one of the derived rows "ranks", "dp", "precision",
 * "compute dtype" (docs/monitoring.md says how each is derived). A note
 * when the run directory has no config.json. */
void config_table(strbuf_t *b, const report_run_t *r);

#endif
