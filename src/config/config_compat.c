/* Top-level DeepSpeed keys fabula accepts without effect (so that an
 * unchanged ds_config.json runs), and the features it refuses. */
#include <stdio.h>

#include "config/config_internal.h"

static const cj_inert_t top_inert[] = {
    {"prescale_gradients", CJ_BOOL},            /* the loss is divided by the global token count */
    {"gradient_predivide_factor", CJ_NUMBER},   /* same */
    {"zero_allow_untested_optimizer", CJ_BOOL}, /* fabula's ZeRO runs its own Adam */
    {"zero_force_ds_cpu_optimizer", CJ_BOOL},
    {"cuda_visible_devices", CJ_ANY},           /* devices come from the launcher */
    {"dump_state", CJ_BOOL},
    {"memory_breakdown", CJ_BOOL},
    {"sparse_gradients", CJ_BOOL},
    {"fp32_allreduce", CJ_BOOL},                /* gradients are reduced in fp32 */
    {"communication_data_type", CJ_ANY},
    {"seq_parallel_communication_data_type", CJ_ANY},
    {"disable_allgather", CJ_BOOL},
    {"dataloader_drop_last", CJ_BOOL},
    {"flops_profiler", CJ_OBJECT},              /* fabula reports MFU itself */
    {"wandb", CJ_OBJECT},
    {"comet", CJ_OBJECT},
    {"comms_logger", CJ_OBJECT},
    {"activation_checkpointing", CJ_OBJECT},
    {"aio", CJ_OBJECT},
    {"timers", CJ_OBJECT},
    {"autotuning", CJ_OBJECT},
    {"pipeline", CJ_OBJECT},
};

/* A DeepSpeed block fabula cannot honour: an error if enabled, else ignored. */
static void refuse_if_enabled(cj_ctx_t *c, const char *section, const char *why)
{
    if (!cj_section(c, section))
        return;
    char path[64];
    snprintf(path, sizeof path, "%s.enabled", section);
    if (cj_bool(c, path, 0))
        cj_invalid(c, path, "false (%s)", why);
    /* Its other keys only matter when enabled: none is reported unknown. */
    const char *key;
    json_t *val;
    json_object_foreach(cj_lookup(c, c->root, section), key, val) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.%s", section, key);
        if (!cj_strs_has(&c->known, sub))
            cj_strs_push(&c->known, sub);
    }
}

void config_read_compat(cj_ctx_t *c)
{
    cj_accept_inert(c, NULL, top_inert, sizeof top_inert / sizeof *top_inert);
    refuse_if_enabled(c, "amp", "Apex AMP is not supported; use \"bf16\" or \"fp16\"");
    refuse_if_enabled(c, "elasticity", "elastic batch sizes are not supported; set the batch keys");
}
