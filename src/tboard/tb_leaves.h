/* The numeric leaves of a metrics record (one step of metrics.jsonl), each
 * under its key path joined with "/" (array elements by index), so that
 * every metric anyone adds to the record becomes a scalar without a list
 * to keep up to date: {"loss":..,"time":{"forward":..},"moe_layers":[{"aux":..}]}
 * gives loss/loss, time/forward, moe_layers/0/aux. A number at the top of
 * the record goes under its group (tb_leaves_group), so that every tag is
 * in a TensorBoard section. */
#ifndef FABULA_TBOARD_TB_LEAVES_H
#define FABULA_TBOARD_TB_LEAVES_H

#include <jansson.h>

/* Called once per leaf that is a number or a boolean (true 1, false 0);
 * strings and nulls (a non-finite value) are no scalars. `leaf` tells an
 * integer from a real. */
typedef void (*tb_leaf_fn)(void *ctx, const char *tag, const json_t *leaf, double value);

/* The group of a top-level scalar of the record: "loss" (loss, lm_loss,
 * aux_loss, z_loss), "valid", "optimizer", "throughput", "data", "moe",
 * "monitor" (docs/monitoring.md lists them); "other" for any key not in
 * the table. */
const char *tb_leaves_group(const char *key);

/* Every leaf of `record` but its top-level "step" (the x axis of them all),
 * in the record's key order. */
void tb_leaves(const json_t *record, tb_leaf_fn fn, void *ctx);

#endif
