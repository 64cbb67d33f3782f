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

/* A key read and, here, without effect: listed in the note. */
static void mark_inert(cj_ctx_t *c, const char *path)
{
    if (!cj_strs_has(&c->inert, path))
        cj_strs_push(&c->inert, path);
}

#define PART "activation_checkpointing.partition_activations"
#define CPU_CKPT "activation_checkpointing.cpu_checkpointing"

/* partition_activations keeps each tensor-parallel rank's part of the
 * layers' saved inputs only, gathered again for the backward: what
 * fabula's sequence parallelism does to them (the residual stream on
 * token shards), which it turns on. With one tensor-parallel rank there is
 * nothing to split. cpu_checkpointing keeps the saved activations in host
 * memory: where they are already on the CPU backends. */
static void read_activation_checkpointing(cj_ctx_t *c, config_t *cfg)
{
    if (!cj_section(c, "activation_checkpointing"))
        return;
    const int tp = cfg->parallel.tensor_parallel_size;
    if (cj_bool(c, PART, 0) && tp <= 1) {
        mark_inert(c, PART);
    } else if (cj_bool(c, PART, 0)) {
        if (cj_given(c, c->user, "parallel.sequence_parallel") && !cfg->parallel.sequence_parallel)
            cj_invalid(c, PART, "false with parallel.sequence_parallel false (fabula partitions the saved "
                                "activations by sequence parallelism)");
        else if (cfg->bf16_enabled || cfg->fp16.enabled)
            cj_invalid(c, PART, "false with %s (fabula partitions the saved activations by sequence parallelism, "
                                "which is fp32 only)", cfg->bf16_enabled ? "bf16.enabled" : "fp16.enabled");
        else {
            cfg->parallel.sequence_parallel = cfg->model.sequence_parallel = 1;
            cj_put(c, "parallel.sequence_parallel", json_true()); /* the effective config says so */
        }
    }
    if (cj_bool(c, CPU_CKPT, 0)) {
        if (cfg->run.backend == RUN_BACKEND_CPU || cfg->run.backend == RUN_BACKEND_CPU16)
            mark_inert(c, CPU_CKPT);
        else
            cj_invalid(c, CPU_CKPT, "false unless run.backend is \"cpu\" or \"cpu16\" (activations in host "
                                    "memory are the CPU backends' own; the GPU backend keeps them on the device, "
                                    "and model.recompute keeps fewer of them)");
    }
    cj_accept_inert(c, "activation_checkpointing", checkpointing_inert,
                    sizeof checkpointing_inert / sizeof *checkpointing_inert);
}

void config_read_compat(cj_ctx_t *c, config_t *cfg)
{
    read_activation_checkpointing(c, cfg);
    cj_accept_inert(c, NULL, top_inert, sizeof top_inert / sizeof *top_inert);
    refuse_if_enabled(c, "amp", "Apex AMP is not supported; use \"bf16\" or \"fp16\"");
    refuse_if_enabled(c, "elasticity", "elastic batch sizes are not supported; set the batch keys");
}
