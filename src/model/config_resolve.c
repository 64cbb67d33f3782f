#include "model/config_resolve.h"

#include "model/model.h"

void model_config_resolve(config_t *cfg, int verbose)
{
    if (cfg->loader.attention_cost_auto != LOADER_COST_SET)
        config_resolve_attention_cost(cfg, model_attention_cost(&cfg->model), verbose);
}
