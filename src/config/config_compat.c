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

/* DeepSpeed's activation_checkpointing configures deepspeed.checkpointing,
 * which only the model's own code turns on (Megatron's
 * --checkpoint-activations); fabula's switch is model.recompute, and of the
 * block's keys those that change what is computed are refused when set
 * (docs/config.md, "DeepSpeed's activation_checkpointing"). */
static const cj_inert_t checkpointing_inert[] = {
    {"contiguous_memory_optimization", CJ_BOOL},  /* the activations are one arena already */
    {"number_checkpoints", CJ_NUMBER},            /* sizes that contiguous buffer */
    {"synchronize_checkpoint_boundary", CJ_BOOL}, /* a device synchronize for timing */
    {"profile", CJ_BOOL},                         /* the step records time forward and backward */
};

static void read_activation_checkpointing(cj_ctx_t *c)
{
    if (!cj_section(c, "activation_checkpointing"))
        return;
    if (cj_bool(c, "activation_checkpointing.partition_activations", 0))
        cj_invalid(c, "activation_checkpointing.partition_activations",
                   "false (it splits the kept activations over the tensor-parallel ranks, and fabula has no "
                   "tensor parallelism yet)");
    if (cj_bool(c, "activation_checkpointing.cpu_checkpointing", 0))
        cj_invalid(c, "activation_checkpointing.cpu_checkpointing",
                   "false (kept activations offloaded to host memory are not implemented; model.recompute "
                   "keeps fewer of them on the device)");
    cj_accept_inert(c, "activation_checkpointing", checkpointing_inert,
                    sizeof checkpointing_inert / sizeof *checkpointing_inert);
}

void config_read_compat(cj_ctx_t *c)
{
    read_activation_checkpointing(c);
    cj_accept_inert(c, NULL, top_inert, sizeof top_inert / sizeof *top_inert);
    refuse_if_enabled(c, "amp", "Apex AMP is not supported; use \"bf16\" or \"fp16\"");
    refuse_if_enabled(c, "elasticity", "elastic batch sizes are not supported; set the batch keys");
}
