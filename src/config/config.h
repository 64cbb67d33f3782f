/* The run configuration: one JSON document (or several merged, later files
 * winning) plus --set overrides, validated into typed structs.
 *
 * Layout of the JSON (documented in docs/config.md):
 *   "model":  Hugging Face field names (hidden_size, num_local_experts, ...)
 *   "data":   corpus and tokenizer inputs, sequence length
 *   "run":    steps, seed, run directory, resume policy
 *   top level: DeepSpeed's keys with DeepSpeed's semantics (train_batch_size,
 *             optimizer, scheduler, fp16, bf16, zero_optimization, ...) so a
 *             user's ds_config.json is accepted unchanged.
 */
#ifndef FABULA_CONFIG_CONFIG_H
#define FABULA_CONFIG_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "parallel/mpi_io.h"

/* Smallest vocab_size the built-in byte tokenizer (data.tokenizer "bytes")
 * needs: 256 byte values + pad, bos, eos, <|chapter_sep|> + 9 genre tokens. */
#define FB_BYTES_VOCAB_MIN 269

typedef struct model_config {
    int vocab_size;
    int hidden_size;
    int intermediate_size;      /* dense FFN and each expert */
    int num_hidden_layers;
    int num_attention_heads;
    int num_key_value_heads;
    int num_local_experts;      /* 0 or 1: dense model */
    int num_experts_per_tok;
    int moe_layer_freq;         /* layer l is MoE iff num_local_experts > 1 and l % freq == 0 */
    double rope_theta;
    double rms_norm_eps;
    int tie_word_embeddings;
    double router_aux_loss_coef;
    /* where the load-balancing loss takes its expert frequencies f_e:
     * each micro-batch's own, or the whole step's (all micro-batches and
     * ranks; docs/model.md "Losses") */
    int router_aux_loss_scope;  /* MODEL_AUX_SCOPE_* */
    double router_z_loss_coef;
    double capacity_factor;     /* 0 = dropless */
    double expert_dropout;      /* dropout on the expert hidden activation */
    double initializer_range;   /* std of the normal init of weights */
    int max_position_embeddings;
    /* which activations the backward recomputes instead of keeping
     * (docs/model.md, "Recomputation"); no effect on the numbers */
    int recompute;              /* MODEL_RECOMPUTE_* */
    /* parallel.sequence_parallel, copied here by config_read_parallel so
     * that the model's buffers (and `fabula plan memory`'s sizing of them)
     * follow it; no effect without tensor parallelism, which it needs */
    int sequence_parallel;
} model_config_t;

/* A dense model is one expert: num_local_experts 0 and 1 both mean dense.
 * Every count of expert rows, routes and per-expert statistics goes through
 * these, not through its own "> 1 ? : 1". */
static inline int config_model_is_moe(const model_config_t *mc) { return mc->num_local_experts > 1; }
/* The experts of an MoE layer; 1 for a dense model. */
static inline int config_model_experts(const model_config_t *mc)
{
    return config_model_is_moe(mc) ? mc->num_local_experts : 1;
}
/* The experts a token is routed to; 1 for a dense model. */
static inline int config_model_experts_per_token(const model_config_t *mc)
{
    return config_model_is_moe(mc) ? mc->num_experts_per_tok : 1;
}

enum { MODEL_AUX_SCOPE_MICRO_BATCH = 0, MODEL_AUX_SCOPE_GLOBAL_BATCH = 1 };
enum { MODEL_RECOMPUTE_NONE = 0, MODEL_RECOMPUTE_SELECTIVE = 1, MODEL_RECOMPUTE_FULL = 2 };

typedef struct data_config {
    char *train_path;           /* corpus: .jsonl/.json text (byte tokenizer) */
    char *corpus_path;          /* corpus HDF5 from `fabula prep` ("": use train_path) */
    char *tokenizer;            /* "bytes" for the built-in byte-level tokenizer */
    int seq_len;                /* window length in tokens (== max sample length) */
    int overlap;                /* tokens shared by consecutive windows */
    int min_seq_len;            /* windows shorter than this are dropped */
} data_config_t;

/* data.sampler / packing / curriculum / seq_len_warmup (docs/loader.md):
 * how a step's samples are spread over ranks and packed into micro-batches. */
typedef enum { LOADER_SAMPLER_UNIFORM = 0, LOADER_SAMPLER_GREEDY, LOADER_SAMPLER_LPT } loader_sampler_t;
typedef enum { LOADER_PACK_SEQUENTIAL = 0, LOADER_PACK_BEST_FIT, LOADER_PACK_BALANCED } loader_packing_t;
enum { LOADER_SHORT = 0, LOADER_MEDIUM = 1, LOADER_LONG = 2, LOADER_NCLASSES = 3 };
#define LOADER_MAX_PHASES 16

/* data.attention_cost absent or "auto" means the model's L d / N_active,
 * which only src/model computes (model_attention_cost): config leaves it
 * pending, and the caller that has both resolves it with
 * config_resolve_attention_cost before anything reads the value. */
typedef enum { LOADER_COST_SET = 0, LOADER_COST_ABSENT, LOADER_COST_AUTO } loader_cost_source_t;

typedef struct loader_phase {
    double until;               /* the phase covers training fractions [previous until, until) */
    double mix[LOADER_NCLASSES]; /* share of short, medium, long samples; sums to 1 */
} loader_phase_t;

typedef struct loader_config {
    loader_sampler_t sampler;
    loader_packing_t packing;
    int max_tokens_per_batch;   /* token capacity of one micro-batch (>= data.seq_len) */
    double attention_cost;      /* c of cost(len) = len + c len^2 (once attention_cost_auto is LOADER_COST_SET) */
    int attention_cost_auto;    /* loader_cost_source_t */
    int curriculum;             /* curriculum.enabled */
    int short_threshold;        /* short < short_threshold <= medium < long_threshold <= long */
    int long_threshold;
    int nphases;
    loader_phase_t phases[LOADER_MAX_PHASES];
    int warmup;                 /* seq_len_warmup.enabled */
    int warmup_start;           /* max length at step 0 */
    long warmup_steps;          /* steps to reach data.seq_len */
} loader_config_t;

typedef enum { SCHED_CONSTANT = 0, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR } sched_type_t;
typedef enum { WARMUP_LOG = 0, WARMUP_LINEAR } warmup_type_t;

typedef struct optim_config {
    int adam_w_mode;            /* 1 = AdamW (decoupled decay); 0 = Adam + L2 */
    double lr, beta1, beta2, eps, weight_decay;
} optim_config_t;

typedef struct sched_config {
    sched_type_t type;
    double warmup_min_lr, warmup_max_lr;     /* WarmupLR, WarmupDecayLR (WarmupCosineLR: optim lr) */
    long warmup_num_steps;
    warmup_type_t warmup_type;
    long total_num_steps;                    /* WarmupDecayLR, WarmupCosineLR */
    /* total_num_steps was not given: it follows run.steps (the default's
     * schedule, "auto", or left out), so a resume with another --steps
     * moves it (train/resume_schedule.c says so) */
    int total_follows_steps;
    double warmup_min_ratio, cos_min_ratio;  /* WarmupCosineLR */
} sched_config_t;

typedef struct fp16_config {
    int enabled;
    double loss_scale;          /* 0 = dynamic */
    int initial_scale_power;
    int loss_scale_window;
    int hysteresis;
    double min_loss_scale;
    int consecutive_hysteresis;
} fp16_config_t;

typedef struct zero_config {
    int stage;                  /* 0..3 */
    int offload_optimizer;      /* device "cpu" */
    int offload_param;          /* device "cpu" (stage 3 only) */
    int overlap_comm;
    double reduce_bucket_size;  /* elements */
    double allgather_bucket_size;
} zero_config_t;

/* Process layout (src/parallel/groups.h): world = pp x dp x tp, dp = edp x ep. */
#define PARALLEL_MAX_STAGES 64
typedef struct parallel_config {
    int pipeline_parallel_size; /* stages, outermost; divides the world size, at most the layers */
    /* layers of each stage (parallel.pipeline_layers), summing to
     * model.num_hidden_layers; all 0: the cost-balanced split (model/pipeline.h) */
    int pipeline_layers[PARALLEL_MAX_STAGES];
    /* interleaved 1F1B: chunks of layers a stage holds (1: one contiguous run);
     * pp x virtual_pipeline_stages <= PARALLEL_MAX_STAGES */
    int virtual_pipeline_stages;
    int tensor_parallel_size;   /* consecutive ranks splitting each layer's matmuls; divides the world size */
    int expert_parallel_size;   /* ranks sharing one MoE layer's experts; divides world size and experts */
    int moe_a2a_chunks;         /* pieces of each MoE token exchange, overlapping the expert compute */
    int sequence_parallel;      /* token shards between the tensor-parallel regions; needs tp > 1 */
} parallel_config_t;

/* CPU16: the CPU kernels with 16-bit storage (ops_cpu16), for the 16-bit
 * paths without a GPU. */
typedef enum { RUN_BACKEND_CPU = 0, RUN_BACKEND_CUDA, RUN_BACKEND_AUTO, RUN_BACKEND_CPU16 } run_backend_t;

/* Distinct names run.preempt_signals accepts (config_preempt.c). */
#define RUN_MAX_PREEMPT_SIGNALS 8

typedef struct run_config {
    long steps;                 /* optimizer steps to run */
    uint64_t seed;
    char *run_dir;
    int steps_per_print;
    char *resume;               /* "auto", "none" or a checkpoint file (docs/checkpoint.md) */
    int backend;                /* RUN_BACKEND_* */
    long eval_interval;         /* steps between validation losses (and at the last step); 0 = none */
    long eval_samples;          /* the first N samples of the corpus's validation split */
    /* signal numbers that preempt (run.preempt_signals; SIGINT always does) */
    int preempt_signals[RUN_MAX_PREEMPT_SIGNALS];
    int n_preempt_signals;
} run_config_t;

/* "checkpoint" (docs/checkpoint.md). */
typedef struct checkpoint_config {
    long save_interval;         /* steps between saves; 0 = only at the end; -1 = only on preemption */
    int keep_last;              /* checkpoints kept in dir; 0 = all */
    char *dir;                  /* resolved: "" in the config means RUN_DIR/checkpoints */
    int collective_io;          /* collective "all": every tensor transfer collective; "shared": shared ones */
    mpi_hints_t mpi_info;       /* MPI-IO hints for the checkpoint files (checkpoint.mpi_info) */
} checkpoint_config_t;

/* "monitor" and the top-level wall_clock_breakdown (docs/monitoring.md). */
typedef struct monitor_config {
    int enabled;                /* 0: no phase timers, gathers, MFU or verdicts (bench/monitor.sh's "off") */
    int wall_clock_breakdown;   /* DeepSpeed key: the breakdown line every step, not every steps_per_print */
    int verbose;                /* the console's breakdown and verdict lines at every print step */
    double peak_flops;          /* FLOP/s of one rank's device; 0 = the backend's default (docs/monitoring.md) */
    int debug_delay_rank;       /* the rank debug_delay_s slows; -1 = every rank */
    double debug_delay_s;       /* seconds of sleep added to each step's compute (tests of the verdicts) */
    double debug_delay_data_s;  /* seconds of sleep added to each step's data phase, every rank */
    int hang_check;             /* the hang watchdog (docs/reliability.md, "Hangs") */
    double hang_factor;         /* a step is hung past hang_factor x the median step time ... */
    double hang_min_s;          /* ... and past at least this */
    double hang_first_s;        /* the bound before a step time is known (the first steps warm up) */
    long debug_hang_step;       /* tests: at this step debug_delay_rank sleeps until the watchdog ends it; 0 = never */
} monitor_config_t;
/* "tensorboard" and "csv_monitor" (DeepSpeed's blocks; docs/monitoring.md). */
typedef struct tboard_config {
    int enabled;
    char *dir;                  /* output_path/job_name; output_path "" means RUN_DIR/<block name> */
    long histogram_interval;    /* tensorboard only: steps between parameter and gradient histograms; 0 = none */
} tboard_config_t;
/* "prep" of a train config: how the corpus file is opened (docs/config.md). */
typedef struct prep_config {
    mpi_hints_t mpi_info;       /* MPI-IO hints for the corpus file (prep.mpi_info) */
} prep_config_t;

typedef struct config {
    model_config_t model;
    data_config_t data;
    loader_config_t loader;
    optim_config_t optim;
    sched_config_t sched;
    fp16_config_t fp16;
    int bf16_enabled;
    zero_config_t zero;
    parallel_config_t parallel;
    run_config_t run;
    checkpoint_config_t checkpoint;
    monitor_config_t monitor;
    tboard_config_t tensorboard, csv_monitor;
    prep_config_t prep;
    /* DeepSpeed batch triple, after the identity rule and inference:
     * train_batch_size = micro_batch * grad_accum * data-parallel ranks
     * (world / (tp pp)). */
    int train_batch_size;
    /* 1 when train_batch_size was not given but made by the rule from the
     * micro-batch and accumulation: it grows with the data-parallel ranks */
    int batch_per_rank;
    int micro_batch;            /* train_micro_batch_size_per_gpu: samples per micro-batch */
    int grad_accum;             /* gradient_accumulation_steps */
    double gradient_clipping;   /* 0 = off */
    char *effective_json;       /* the merged, completed config, pretty-printed */
    /* model.init_from: the absolute path of a transformers save_pretrained
     * directory whose config.json is the model section and whose weights
     * initialise the run (docs/init-from.md); NULL when not given */
    char *init_from;
} config_t;

/* Loads the embedded default, merges each file of `paths` over it in order,
 * applies `sets` ("a.b.c=value", JSON value or bare string), validates for a
 * world of `world_size` ranks and fills `cfg`. Any user error: message naming
 * the file/key and exit FB_EXIT_USAGE. Unknown keys: one warning each
 * (printed when `verbose`). */
void config_load(config_t *cfg, const char *const *paths, int npaths, const char *const *sets, int nsets,
                 int world_size, int verbose);
/* The ranks a plan (src/plan, `fabula plan`) reads a config for: `world`
 * ranks whose batch identity counts `dp` data-parallel ranks, those of the
 * planned layout. dp 0: world / (tp pp), tp and pp the layout's where not 0,
 * else the config's (train's count). CONFIG_PLAN_ANY_DP: the layout
 * search, whose layouts each pick their dp, micro-batch and accumulation,
 * so a given train_batch_size is the batch of all of them and is checked
 * against none (without it the batch is train's for world / (tp pp)). */
typedef struct config_plan_ranks {
    int world, dp, tp, pp;
} config_plan_ranks_t;
#define CONFIG_PLAN_ANY_DP (-1)

/* config_load as a plan reads it: validated as train is for the planned
 * ranks, less train's guard against sizes this machine's memory cannot
 * hold (config_memory.c): a plan is of another machine, and `plan memory`
 * says what a rank holds. */
void config_load_plan(config_t *cfg, const char *const *paths, int npaths, const char *const *sets, int nsets,
                      const config_plan_ranks_t *ranks, int verbose);
/* config_load of one JSON object (a config made by a command, or a
 * checkpoint's saved one) in place of the files. */
void config_load_object(config_t *cfg, json_t *root, const char *const *sets, int nsets, int world_size,
                        int verbose);

void config_free(config_t *cfg);

/* The MPI-IO hints object of JSON `text` (`fabula prep --mpi-info`), named
 * `path` in messages: 0, or -1 with the problem in *err (a new string)
 * when it is not an object of string values. */
int config_mpi_hints_parse(const char *text, const char *path, mpi_hints_t *out, char **err);

/* Sets a pending data.attention_cost (cfg->loader.attention_cost_auto not
 * LOADER_COST_SET) to c, in cfg->loader and in the effective config; a
 * written "auto" is noted (when `verbose`) as config_load notes the others. */
void config_resolve_attention_cost(config_t *cfg, double c, int verbose);

/* The names of data.sampler ("uniform", "greedy", "lpt") and data.packing
 * ("sequential", "best_fit") values. parse: 1, or 0 when the name is none. */
int config_sampler_parse(const char *name, loader_sampler_t *out);
const char *config_sampler_name(loader_sampler_t s);
int config_packing_parse(const char *name, loader_packing_t *out);
const char *config_packing_name(loader_packing_t s);

/* The config key a command-line word names ("lr", "max-steps",
 * "expert_parallel_size"), for the "did you mean --set KEY=VALUE" of an
 * unknown option: the key another trainer's name stands for
 * (docs/config.md, "Names from other trainers"), else the one key whose
 * last part the word is. NULL: none (or a name several keys share). Points
 * to static storage. */
const char *config_key_for_word(const char *word);

/* The built-in default run (tiny MoE on the bundled sample), as JSON text. */
const char *config_default_json(void);

#endif
