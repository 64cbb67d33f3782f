/* "zero_optimization" with DeepSpeed's keys and defaults
 * (deepspeed/runtime/zero/config.py and offload_config.py). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"
#include "util/error.h"

#define Z "zero_optimization."

/* Accepted and listed in the "accepted without effect" note. Among them
 * the keys of DeepSpeed's own buffer management (contiguous gradients,
 * round-robin gradients, allgather vs broadcast of partitions, the stage-3
 * parameter cache: persistence threshold, live parameters, reuse distance,
 * prefetch bucket), which fabula's ZeRO engine does differently (whole
 * blocks gathered one ahead, docs/zero.md); reduce_scatter false (allreduce
 * then slice) would give the same gradients, fabula always reduce-scatters;
 * and the gather-on-save keys, since fabula's checkpoints are always whole
 * and layout-free. */
static const cj_inert_t zero_inert[] = {
    {"contiguous_gradients", CJ_BOOL},
    {"reduce_scatter", CJ_BOOL},
    {"allgather_partitions", CJ_BOOL},
    {"round_robin_gradients", CJ_BOOL},
    {"stage3_prefetch_bucket_size", CJ_NUMBER},
    {"prefetch_bucket_size", CJ_NUMBER},
    {"stage3_param_persistence_threshold", CJ_NUMBER},
    {"param_persistence_threshold", CJ_NUMBER},
    {"stage3_max_live_parameters", CJ_NUMBER},
    {"max_live_parameters", CJ_NUMBER},
    {"stage3_max_reuse_distance", CJ_NUMBER},
    {"max_reuse_distance", CJ_NUMBER},
    {"stage3_gather_16bit_weights_on_model_save", CJ_BOOL},
    {"gather_16bit_weights_on_model_save", CJ_BOOL},
    {"load_from_fp32_weights", CJ_BOOL},
    {"elastic_checkpoint", CJ_BOOL},
    {"sub_group_size", CJ_NUMBER},
    {"ignore_unused_parameters", CJ_BOOL},
    {"legacy_stage1", CJ_BOOL},
    {"use_multi_rank_bucket_allreduce", CJ_BOOL},
    {"stage3_model_persistence_threshold", CJ_NUMBER},
    {"model_persistence_threshold", CJ_NUMBER},
    {"stage3_gather_fp16_weights_on_model_save", CJ_BOOL},
    {"cpu_offload_use_pin_memory", CJ_BOOL},
    {"zero_hpz_partition_size", CJ_NUMBER},
    {"zero_quantized_weights", CJ_BOOL},
    {"zero_quantized_nontrainable_weights", CJ_BOOL},
    {"zero_quantized_gradients", CJ_BOOL},
    {"mics_shard_size", CJ_NUMBER},
    {"mics_hierarchical_params_gather", CJ_BOOL},
    {"memory_efficient_linear", CJ_BOOL},
    {"pipeline_loading_checkpoint", CJ_BOOL},
    {"override_module_apply", CJ_BOOL},
    {"log_trace_cache_warnings", CJ_BOOL},
};

static const cj_inert_t offload_optimizer_inert[] = {
    {"pin_memory", CJ_BOOL},  {"buffer_count", CJ_NUMBER},  {"fast_init", CJ_BOOL}, {"pipeline_read", CJ_BOOL},
    {"pipeline_write", CJ_BOOL}, {"nvme_path", CJ_ANY}, {"ratio", CJ_NUMBER},
};

static const cj_inert_t offload_param_inert[] = {
    {"pin_memory", CJ_BOOL},      {"buffer_count", CJ_NUMBER}, {"buffer_size", CJ_NUMBER},
    {"max_in_cpu", CJ_NUMBER},    {"nvme_path", CJ_ANY},
};

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* DeepSpeed's deprecated boolean (cpu_offload, cpu_offload_param): true
 * means {"device": "cpu"} in its replacement; both together is an error. */
static void read_legacy_offload(cj_ctx_t *c, const char *old_key, const char *new_key)
{
    if (!cj_strs_has(&c->known, old_key))
        cj_strs_push(&c->known, old_key);
    if (!cj_given(c, c->root, old_key)) {
        cj_remove(c->root, old_key);
        return;
    }
    int on = cj_bool(c, old_key, 0);
    if (cj_given(c, c->root, new_key)) {
        cj_error(c, "config keys '%s' (deprecated) and '%s' cannot be given together (as in DeepSpeed)", old_key,
                 new_key);
        return;
    }
    cj_note(c, "%s (deprecated) read as %s.device = \"%s\"", old_key, new_key, on ? "cpu" : "none");
    cj_remove(c->root, old_key);
    json_t *dev = json_pack("{s:s}", "device", on ? "cpu" : "none");
    FB_ASSERT(dev);
    cj_put(c, new_key, dev);
}

/* Returns 1 for "cpu", 0 for "none". */
static int read_offload_device(cj_ctx_t *c, const char *section, const cj_inert_t *inert, size_t n)
{
    cj_section(c, section);
    char path[96];
    snprintf(path, sizeof path, "%s.device", section);
    const char *dev = cj_string(c, path, "none");
    cj_accept_inert(c, section, inert, n);
    if (strcmp(dev, "cpu") == 0)
        return 1;
    if (strcmp(dev, "none") == 0)
        return 0;
    if (strcmp(dev, "nvme") == 0)
        cj_invalid(c, path, "\"none\" or \"cpu\" (NVMe offload is not supported by fabula)");
    else
        cj_invalid(c, path, "\"none\" or \"cpu\"");
    return 0;
}

static double read_size(cj_ctx_t *c, const char *path, double def, int strictly_positive)
{
    double v = cj_real(c, path, def);
    if (strictly_positive ? !(v > 0) : !(v >= 0))
        cj_invalid(c, path, strictly_positive ? "a number of elements > 0" : "a number >= 0");
    /* Element counts: shown as integers in the effective config (5e8 -> 500000000). */
    if (v == floor(v) && v < 9.0e18)
        cj_put(c, path, json_integer((json_int_t)v));
    return v;
}

void config_read_zero(cj_ctx_t *c, config_t *cfg)
{
    zero_config_t *z = &cfg->zero;
    cj_section(c, "zero_optimization");
    z->stage = cj_int(c, Z "stage", 0);
    if (z->stage < 0 || z->stage > 3)
        cj_invalid(c, Z "stage", "0, 1, 2 or 3");
    read_legacy_offload(c, Z "cpu_offload", Z "offload_optimizer");
    read_legacy_offload(c, Z "cpu_offload_param", Z "offload_param");
    z->offload_optimizer = read_offload_device(c, Z "offload_optimizer", offload_optimizer_inert,
                                               N_OF(offload_optimizer_inert));
    z->offload_param = read_offload_device(c, Z "offload_param", offload_param_inert, N_OF(offload_param_inert));
    if (z->offload_param && z->stage != 3)
        cj_invalid(c, Z "offload_param.device", "\"none\" with zero_optimization.stage %d (parameter offload "
                   "needs stage 3)", z->stage);
    /* DeepSpeed: overlap_comm defaults to true for stage 3 only. */
    z->overlap_comm = cj_bool(c, Z "overlap_comm", z->stage == 3);
    z->reduce_bucket_size = read_size(c, Z "reduce_bucket_size", 5e8, 1);
    z->allgather_bucket_size = read_size(c, Z "allgather_bucket_size", 5e8, 1);
    cj_accept_inert(c, "zero_optimization", zero_inert, N_OF(zero_inert));
}
