/* Other trainers' names for fabula's keys. Each entry was checked against
 * that trainer's own definition: Megatron-LM's arguments
 * (megatron/training/arguments.py), DeepSpeed-MoE's layer and
 * Megatron-DeepSpeed's MoE arguments, llm.c's train_gpt2 options and the
 * Hugging Face Trainer's TrainingArguments. `how` says where the meaning
 * differs; an entry without a key names a setting fabula does not have. */
#include "config/config_alias.h"

#include <stdio.h>
#include <string.h>

#define MEG "Megatron-LM"
#define DSM "DeepSpeed-MoE"
#define LLMC "llm.c"
#define HF "the Hugging Face Trainer"

static const config_alias_t table[] = {
    /* the model */
    {"num_layers", MEG, "model.num_hidden_layers", ""},
    {"hidden_size", MEG, "model.hidden_size", ""},
    {"ffn_hidden_size", MEG, "model.intermediate_size", ""},
    {"num_attention_heads", MEG, "model.num_attention_heads", ""},
    {"num_query_groups", MEG, "model.num_key_value_heads", ""},
    {"max_position_embeddings", MEG, "model.max_position_embeddings", ""},
    {"rotary_base", MEG, "model.rope_theta", ""},
    {"norm_epsilon", MEG, "model.rms_norm_eps", ""},
    {"init_method_std", MEG, "model.initializer_range", ""},
    {"untie_embeddings_and_output_weights", MEG, "model.tie_word_embeddings", "the opposite: false unties them"},
    {"recompute_granularity", MEG, "model.recompute", "\"none\", \"selective\" or \"full\""},
    {"gradient_checkpointing", HF, "model.recompute", "\"full\" for true, \"none\" for false"},
    {"num_experts", MEG " and " DSM, "model.num_local_experts", ""},
    {"moe_router_topk", MEG, "model.num_experts_per_tok", ""},
    {"topk", DSM, "model.num_experts_per_tok", ""},
    {"moe_aux_loss_coeff", MEG, "model.router_aux_loss_coef", ""},
    {"moe_loss_coeff", DSM, "model.router_aux_loss_coef", ""},
    {"moe_z_loss_coeff", MEG, "model.router_z_loss_coef", ""},
    {"moe_expert_capacity_factor", MEG, "model.capacity_factor", "0 for dropless (Megatron-LM: unset)"},
    {"drop_tokens", DSM, "model.capacity_factor", "0 for dropless (drop_tokens false), else the capacity factor"},
    {"eval_capacity_factor", DSM, "model.capacity_factor",
     "fabula has one capacity factor, for training; `fabula generate` and the export are dropless"},
    {"min_capacity", DSM, NULL, "an expert's capacity is ceil(model.capacity_factor x tokens x top-k / experts)"},
    {"noisy_gate_policy", DSM, NULL, "fabula's router adds no noise"},
    {"use_residual", DSM, NULL, "fabula has no residual MoE (PR-MoE)"},
    {"expert_interval", DSM, "model.moe_layer_freq", ""},
    /* the data */
    {"seq_length", MEG, "data.seq_len", ""},
    {"sequence_length", LLMC, "data.seq_len", ""},
    {"max_seq_len", "torchtune", "data.seq_len", ""},
    {"max_seq_length", HF, "data.seq_len", ""},
    {"model_max_length", HF, "data.seq_len", ""},
    {"data_path", MEG, "data.corpus", "a corpus file made by `fabula prep` (or data.train: novels as JSONL)"},
    {"train_path", "an older name in the docs", "data.train", "novels as JSONL (or data.corpus: a file from `fabula prep`)"},
    {"input_bin", LLMC, "data.corpus", "a corpus file made by `fabula prep`"},
    {"tokenizer_model", MEG, "data.tokenizer", ""},
    /* the batch */
    {"micro_batch_size", MEG, "train_micro_batch_size_per_gpu", ""},
    {"per_device_train_batch_size", HF, "train_micro_batch_size_per_gpu", ""},
    {"batch_size", LLMC, "train_micro_batch_size_per_gpu", ""},
    {"global_batch_size", MEG, "train_batch_size", ""},
    {"total_batch_size", LLMC, "train_batch_size", "samples, where llm.c counts tokens: total_batch_size / data.seq_len"},
    /* the run */
    {"train_iters", MEG, "run.steps", ""},
    {"num_iterations", LLMC, "run.steps", ""},
    {"max_steps", HF, "run.steps", ""},
    {"num_train_epochs", HF, "run.steps", "optimizer steps, not epochs"},
    {"seed", MEG " and " HF, "run.seed", ""},
    {"output_dir", HF " and " LLMC, "run.run_dir", ""},
    {"resume_from_checkpoint", HF, "run.resume", ""},
    {"eval_interval", MEG, "run.eval_interval", ""},
    {"eval_steps", HF, "run.eval_interval", ""},
    {"val_loss_every", LLMC, "run.eval_interval", ""},
    {"eval_iters", MEG, "run.eval_samples", "samples, not iterations"},
    {"val_max_steps", LLMC, "run.eval_samples", "samples, not batches"},
    {"log_interval", MEG, "steps_per_print", ""},
    {"logging_steps", HF, "steps_per_print", ""},
    {"save_interval", MEG, "checkpoint.save_interval", ""},
    {"save_steps", HF, "checkpoint.save_interval", ""},
    {"checkpoint_every", LLMC, "checkpoint.save_interval", ""},
    {"save_total_limit", HF, "checkpoint.keep_last", ""},
    {"deepspeed", HF, NULL, "give the DeepSpeed config file itself after `fabula train`"},
    /* the optimizer and the schedule */
    {"lr", MEG, "optimizer.params.lr", ""},
    {"learning_rate", HF " and " LLMC, "optimizer.params.lr", ""},
    {"weight_decay", MEG " and " HF, "optimizer.params.weight_decay", ""},
    {"adam_beta1", MEG " and " HF, "optimizer.params.betas", "[beta1, beta2] together"},
    {"adam_beta2", MEG " and " HF, "optimizer.params.betas", "[beta1, beta2] together"},
    {"adam_eps", MEG, "optimizer.params.eps", ""},
    {"adam_epsilon", HF, "optimizer.params.eps", ""},
    {"clip_grad", MEG, "gradient_clipping", ""},
    {"grad_clip", LLMC, "gradient_clipping", ""},
    {"max_grad_norm", HF, "gradient_clipping", ""},
    {"lr_warmup_iters", MEG, "scheduler.params.warmup_num_steps", ""},
    {"warmup_iters", LLMC, "scheduler.params.warmup_num_steps", ""},
    {"warmup_steps", HF, "scheduler.params.warmup_num_steps", ""},
    {"warmup_ratio", HF, "scheduler.params.warmup_num_steps", "a number of steps: the ratio times run.steps"},
    {"lr_decay_iters", MEG, "scheduler.params.total_num_steps", ""},
    {"min_lr", MEG, "scheduler.params.cos_min_ratio",
     "with scheduler.type \"WarmupCosineLR\": a ratio of optimizer.params.lr"},
    {"learning_rate_decay_frac", LLMC, "scheduler.params.cos_min_ratio",
     "with scheduler.type \"WarmupCosineLR\""},
    {"lr_scheduler_type", HF, "scheduler.type",
     "DeepSpeed's names: \"WarmupDecayLR\" (linear), \"WarmupCosineLR\" (cosine), \"WarmupLR\" (constant)"},
    {"zero_stage", LLMC, "zero_optimization.stage", ""},
    /* the layout */
    {"tensor_model_parallel_size", MEG, "parallel.tensor_parallel_size", ""},
    {"pipeline_model_parallel_size", MEG, "parallel.pipeline_parallel_size", ""},
    {"expert_model_parallel_size", MEG, "parallel.expert_parallel_size", ""},
    {"ep_size", DSM, "parallel.expert_parallel_size", ""},
    {"virtual_pipeline_model_parallel_size", MEG, "parallel.virtual_pipeline_stages", ""},
    {"sequence_parallel", MEG, "parallel.sequence_parallel", ""},
};

const config_alias_t *config_alias_find(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *name = dot ? dot + 1 : path;
    char norm[96];
    size_t n = strlen(name);
    if (n >= sizeof norm)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = name[i] == '-' ? '_' : name[i];
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(norm, table[i].name))
            return &table[i];
    return NULL;
}

const config_alias_t *config_alias_table(int *n)
{
    *n = (int)(sizeof table / sizeof *table);
    return table;
}
