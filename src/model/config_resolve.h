/* The config values that need the model: config_load leaves them pending
 * (src/config is below src/model), and whoever has both a config and a
 * model, the training job or `fabula plan`, resolves them here before the
 * effective config is shown or anything reads them. */
#ifndef FABULA_MODEL_CONFIG_RESOLVE_H
#define FABULA_MODEL_CONFIG_RESOLVE_H

#include "config/config.h"

/* data.attention_cost "auto" (or absent): model_attention_cost of the
 * config's model. Notes a written "auto" when `verbose`. */
void model_config_resolve(config_t *cfg, int verbose);

#endif
