/* The section readers config_load runs over the merged tree, in this order
 * (later readers use earlier results: the scheduler needs run.steps and the
 * optimizer's lr). Internal to src/config. */
#ifndef FABULA_CONFIG_CONFIG_INTERNAL_H
#define FABULA_CONFIG_CONFIG_INTERNAL_H

#include "config/config.h"
#include "config/config_json.h"

/* config_load of one file a command made (config_load_object), not the
 * user: its missing keys take the default config's values, never
 * DeepSpeed's (config.c). */
void config_load_made(config_t *cfg, const char *path, const char *const *sets, int nsets, int world_size,
                      int verbose);
/* run.* and steps_per_print. */
void config_read_run(cj_ctx_t *c, config_t *cfg);
/* run.preempt_signals (config_preempt.c), called by config_read_run. */
void config_read_preempt(cj_ctx_t *c, config_t *cfg);
void config_read_model(cj_ctx_t *c, config_t *cfg);
/* model.init_from: merges DIR/config.json into the user's and the merged
 * tree (before any section is read); the absolute DIR, or NULL. */
char *config_init_from(cj_ctx_t *c);
/* The Hugging Face config.json keys of "model" (config_model_hf.c): the
 * mapping, before config_read_model reads the sizes, and the checks of the
 * keys that change the function, after. */
void config_read_model_hf(cj_ctx_t *c);
void config_check_model_hf(cj_ctx_t *c, const model_config_t *m);
/* data.*, checked against the model (vocabulary, positions). */
void config_read_data(cj_ctx_t *c, config_t *cfg);
/* The DeepSpeed batch triple for `dp` data-parallel ranks; `any_dp` (the
 * layout search, config_plan_ranks_t): a given train_batch_size is kept
 * unchecked against dp, the search choosing the rest. */
void config_read_batch(cj_ctx_t *c, config_t *cfg, int dp, int any_dp);
/* data.sampler, packing, max_tokens_per_batch, attention_cost, curriculum,
 * seq_len_warmup: after the batch (max_tokens_per_batch defaults to micro x seq_len). */
void config_read_loader(cj_ctx_t *c, config_t *cfg);
void config_read_optimizer(cj_ctx_t *c, config_t *cfg);
/* `linked`: the scheduler is the default's, whose total_num_steps and
 * warmup_max_lr follow run.steps and the optimizer's lr unless given. */
void config_read_scheduler(cj_ctx_t *c, config_t *cfg, int linked);
/* fp16, bf16, gradient_clipping. */
void config_read_precision(cj_ctx_t *c, config_t *cfg);
void config_read_zero(cj_ctx_t *c, config_t *cfg);
/* parallel.*, checked against the model and `world_size` (needs the model). */
void config_read_parallel(cj_ctx_t *c, config_t *cfg, int world_size);
/* parallel.tensor_parallel_size (after the model, before the batch keys,
 * whose world is the data-parallel world / tp): returns tp (1 when refused). */
int config_read_tensor_parallel(cj_ctx_t *c, config_t *cfg, int world_size);
/* parallel.pipeline_parallel_size and .pipeline_layers (after the model and
 * tp: the stages divide world / tp and split the layers); returns pp. */
int config_read_pipeline_parallel(cj_ctx_t *c, config_t *cfg, int world_size);
/* What pipeline-parallel training refuses, by name. */
void config_check_pipeline_parallel(cj_ctx_t *c, const config_t *cfg);
/* After every section: the features tensor parallelism refuses by name. */
void config_check_tensor_parallel(cj_ctx_t *c, const config_t *cfg);
/* checkpoint.* and run.resume (needs run.run_dir). */
void config_read_checkpoint(cj_ctx_t *c, config_t *cfg);
/* tensorboard.* and csv_monitor.* (needs run.run_dir). */
void config_read_tboard(cj_ctx_t *c, config_t *cfg);
/* The MPI-IO hints object at `path` (checkpoint.mpi_info, prep.mpi_info)
 * into *out (empty when absent); a non-object or a non-string value is an
 * error naming the key (config_mpi_info.c). */
void config_read_mpi_info(cj_ctx_t *c, const char *path, mpi_hints_t *out);
/* A lower bound on one rank's memory against what any rank has: absurd
 * sizes are refused naming the key (config_memory.c). Last, on a valid config. */
void config_check_memory(cj_ctx_t *c, const config_t *cfg, int world_size);
/* monitor.* and wall_clock_breakdown (config_monitor.c). */
void config_read_monitor(cj_ctx_t *c, config_t *cfg, int world_size);
/* After every section of a valid config: the warnings of a config whose
 * run depends on something it does not say (config_advise.c), on `dp`
 * data-parallel ranks (0: not one count, the layout search). */
void config_advise(cj_ctx_t *c, const config_t *cfg, int dp);
/* Top-level DeepSpeed keys accepted without effect, and the refused ones. */
void config_read_compat(cj_ctx_t *c, config_t *cfg);

#endif
