/* src/plan: answers about a run that is not running: per-rank memory and
 * step time for a layout (dp x tp x pp x ep, ZeRO stage, offload, sequence
 * parallelism, recomputation) on a described machine, and the search over
 * layouts (docs/plan.md). Pure arithmetic on the config and a machine file:
 * nothing here allocates a model or talks to MPI, so a 10,000-GPU layout is
 * planned on a laptop. The types shared by plan_memory.c, plan_time.c,
 * plan_machine.c and plan_layout.c live here. */
#ifndef FABULA_PLAN_H
#define FABULA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

typedef enum { PLAN_RECOMPUTE_NONE = 0, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL } plan_recompute_t;

/* One layout, Megatron-Core's order (DESIGN.md "Process groups"): world =
 * pp * dp * tp, tp innermost; ep divides dp (expert-parallel ranks are
 * data-parallel ranks for the dense weights, as train forms them today),
 * and dp / ep ranks hold the same experts. plan_layout_check says which
 * division fails. */
typedef struct plan_layout {
    int world;
    int dp, tp, pp, ep;
    int zero;                   /* ZeRO stage 0..3 */
    int offload_optimizer;      /* optimizer state (and the update) in host memory */
    int offload_param;          /* stage 3: parameters in host memory */
    int sequence_parallel;      /* needs tp > 1 */
    plan_recompute_t recompute;
    int virtual_stages;         /* interleaved 1F1B chunks per stage (1 = plain 1F1B) */
    int micro_batch_tokens;     /* tokens of one packed micro-batch (loader.max_tokens_per_batch) */
    int grad_accum;             /* micro-batches per data-parallel rank per step */
    int act_bytes;              /* bytes of one stored activation: 4 (cpu fp32) or 2 (cuda bf16/fp16) */
} plan_layout_t;

/* Per-rank bytes. Device and host are kept apart; on the CPU backend both
 * are the same memory, and `device_total + host_total` is what one rank
 * holds. */
typedef struct plan_memory {
    size_t params, grads, optimizer;    /* device-resident model states */
    size_t host_params, host_optimizer; /* offloaded model states */
    size_t workspace;                   /* ZeRO gather/reduce buffers and buckets */
    size_t activations;                 /* one micro-batch in flight */
    size_t inflight_microbatches;       /* micro-batches whose activations are held at once (1F1B: up to pp) */
    size_t activations_peak;            /* activations x in-flight, plus what recomputation keeps */
    size_t moe_buffers;                 /* expert-parallel dispatch/compute buffers at the configured capacity */
    size_t device_total, host_total;
    /* under pp, the largest device_total and host_total of any stage (the two
     * may be different stages' figures); equal to them with one stage */
    size_t stage_device_max, stage_host_max;
    /* added by plan_memory.c */
    size_t weight_copy;                 /* 16-bit weights (cuda, cpu16): whole at ZeRO 0-2, the shard at 3 */
    size_t host_weight_copy;            /* their host-resident part (ZeRO-3 offload_param) */
    size_t host_grads;                  /* fp32 gradient shard on the host (16-bit, offload_optimizer) */
    size_t host_staging;                /* offload: host copies of the owned parameters and gradients */
    size_t workspace_zero;              /* the part of `workspace` train's "memory bytes" line reports */
    size_t comm_buckets;                /* transient reduction buffers at most in flight (in `workspace`) */
    size_t moe_buffers_capacity;        /* `moe_buffers` grown to the most rows the capacity lets a rank receive
                                         * (what device_total counts) */
    int stage;                          /* the pipeline stage these bytes are of (the fullest one) */
    int predicted;                      /* 1: tp/pp/sp figures of the Megatron-style rules (issue 17) */
} plan_memory_t;

/* A machine file (inputs/machines/NAME.json, docs/plan.md): what one node has
 * and how fast its links are. Every figure's source is stated in the file. */
typedef struct plan_link {
    double latency_s;           /* alpha: seconds per message */
    double bandwidth;           /* beta^-1: bytes/s per rank (bus bandwidth of a ring step) */
} plan_link_t;

typedef struct plan_machine {
    char name[128];
    int devices_per_node;       /* ranks per node */
    double flops;               /* sustained dense GEMM FLOP/s of one rank's device at the config's dtype */
    double attention_flops;     /* sustained FLOP/s of the attention core (0: use flops) */
    double expert_flops;        /* sustained FLOP/s of the experts' matmuls, per kept assignment (0: use flops) */
    double device_memory;       /* bytes per device (CPU: the node's memory / devices_per_node) */
    double host_memory;         /* bytes per node */
    double host_link_bandwidth; /* bytes/s device <-> host per device (offload); 0 = same memory */
    plan_link_t intra, inter;   /* inside a node, between nodes */
    double memory_bandwidth;    /* bytes/s one rank streams through the AdamW update (0: not modelled) */
    double gemm_flops;          /* the plain GEMM's FLOP/s, for reference (calibrate: the ops table's sgemm) */
    double step_overhead_s;     /* fixed seconds per step outside the model (loader, logging) */
    double microbatch_overhead_s; /* fixed seconds per micro-batch (loss, packing, kernel launches) */
    /* Waiting for the slowest rank at synchronisations (docs/plan.md,
     * "Synchronisation waits"): the slowest of sync_ranks ranks over their
     * mean, less 1, when the ranks meet once per micro-batch and when they
     * meet at every block forward and backward; sync_ranks 0: not measured
     * (no waits modelled). */
    int sync_ranks;
    double sync_wait_pass, sync_wait_block;
    double ranks_per_cpu;       /* ranks per node over the CPUs they run on (> 1: oversubscribed); 0: not given */
    /* the share of a non-blocking collective that completes while its rank
     * computes without calling the library (docs/plan.md, "Overlap"):
     * what overlap_comm and moe_a2a_chunks can hide is scaled by it; 1
     * when the file does not say (a device library progressing on its own
     * stream, as NCCL does) */
    double overlap;
} plan_machine_t;

/* What a step's data looks like to the time model: per micro-batch tokens
 * and the sum over its packed samples of len^2 (attention), and the
 * sampler's expected imbalance (max/mean - 1 of a step's cost over ranks). */
typedef struct plan_workload {
    double tokens_per_microbatch;
    double sum_len_sq_per_microbatch;
    double imbalance;
    double microbatches_per_rank; /* 0: the layout's grad_accum */
    /* the share of the top-k expert assignments capacity drops (0:
     * dropless; docs/plan.md "Capacity drops"): no expert computes them */
    double dropped;
    /* the experts' loads of a run (docs/plan.md "Routing imbalance"):
     * routing_steps records of routing_layers x routing_experts rows each
     * expert computed (train's metrics.jsonl "expert_tokens"), row-major;
     * NULL: none, no routing imbalance */
    int routing_steps, routing_layers, routing_experts;
    const double *routing_loads;
    /* the routing spread (docs/plan.md "Routing spread"): the standard
     * deviation, over a step's micro-batches, of the share of a
     * micro-batch's assignments capacity keeps at an MoE layer, over its
     * mean (train's metrics.jsonl "kept_share_sd" / "kept_share_mean",
     * pooled over layers and steps), measured at micro-batches of
     * routing_spread_tokens tokens; 0: not known, no spread */
    double routing_spread, routing_spread_tokens;
} plan_workload_t;

/* The collectives of one step, by role, as plan_time counts them. */
typedef enum {
    PLAN_COMM_DP_GRAD = 0,      /* ZeRO 0: all-reduce; 1-3: reduce-scatter of the gradient (dense, over dp) */
    PLAN_COMM_EDP_GRAD,         /* the same of the expert gradient, over dp / ep */
    PLAN_COMM_DP_PARAM,         /* ZeRO 1/2: all-gather of the updated parameters */
    PLAN_COMM_ZERO3_GATHER,     /* ZeRO 3: every block's parameters all-gathered, forward and backward */
    PLAN_COMM_EP_ALLTOALL,      /* expert dispatch and return, forward and backward */
    PLAN_COMM_TP,               /* tensor-parallel all-reduce (or reduce-scatter + all-gather with sp) */
    PLAN_COMM_PP,               /* pipeline activations and their gradients, point to point */
    PLAN_COMM_NORM,             /* the gradient norm's all-reduce (one double) */
    PLAN_COMM_N
} plan_comm_role_t;

typedef struct plan_comm {
    double calls;               /* collective calls per step (pieces: buckets, chunks) */
    double bytes;               /* bytes per rank per step (each call's full buffer, summed) */
    double seconds;             /* alpha-beta time of those calls */
    double exposed_s;           /* the part not hidden under compute */
    int group;                  /* ranks in the group */
    int inter;                  /* 1 when the group spans nodes (the inter link) */
} plan_comm_t;

typedef struct plan_time {
    double compute_s;           /* forward + backward + optimizer of one rank's step */
    double comm_s;              /* all communication of the step */
    double comm_exposed_s;      /* the part not hidden under compute */
    double bubble_s;            /* pipeline bubble */
    double imbalance_s;         /* waiting for the slowest data-parallel rank */
    double sync_s;              /* waiting at synchronisations for the rank the machine slowed most */
    double routing_s;           /* waiting at the expert exchanges for the ep rank whose experts the router loads most */
    double routing_excess;      /* that rank's expert rows over the ep ranks' mean, less 1, mean over MoE layers */
    double spread_s;            /* waiting for the data-parallel rank whose micro-batches kept the most expert rows */
    double spread;              /* the routing spread at this layout's micro-batch tokens */
    double step_s;
    double tokens_per_s;        /* global */
    double bubble_fraction;     /* (p - 1) / (v m + p - 1) for 1F1B */
    double forward_s, backward_s, optimizer_s, recompute_s, overhead_s; /* parts of compute_s */
    double offload_s;           /* host <-> device copies of offloaded states (part of compute_s) */
    double flops;               /* model FLOPs of one rank's step */
    double tokens;              /* global tokens per step */
    plan_comm_t comm[PLAN_COMM_N];
} plan_time_t;

/* plan_collectives.c: the alpha-beta time of one collective over n ranks
 * on a link; `bytes` is the full buffer (all-reduce: the buffer;
 * reduce-scatter: its input; all-gather: its output; all-to-all: what one
 * rank sends in all; point to point: the message). docs/plan.md, "Time". */
typedef enum {
    PLAN_COLL_ALLREDUCE_RING = 0,
    PLAN_COLL_ALLREDUCE_TREE,
    PLAN_COLL_ALLREDUCE,        /* the faster of ring and tree, as MPI and NCCL choose by size */
    PLAN_COLL_REDUCE_SCATTER,
    PLAN_COLL_ALLGATHER,
    PLAN_COLL_ALLTOALL,
    PLAN_COLL_P2P
} plan_coll_t;
double plan_coll_time(plan_coll_t c, int n, double bytes, const plan_link_t *link);
const char *plan_comm_role_name(plan_comm_role_t r);
/* The link a group of n ranks at rank stride `stride` uses: intra when the
 * group fits in one node (stride x n <= devices_per_node), else inter. */
const plan_link_t *plan_group_link(const plan_machine_t *m, int stride, int n, int *inter);

/* The expert rows of the most loaded of ep ranks (each holding E / ep
 * consecutive experts) over the ep ranks' mean, less 1, averaged over the
 * workload's records and MoE layers; 0 without loads or with ep 1. */
double plan_routing_excess(const plan_workload_t *w, int ep);

/* plan_workload.c: the workload of a step from sample lengths: the step
 * plan (sampler, packer, balancer) run for `steps` steps on dp ranks as
 * train runs it (the config's micro-batch capacity and accumulation). */
void plan_workload_from_lengths(const config_t *cfg, const int64_t *lens, int64_t n, int dp, long steps,
                                plan_workload_t *w);
/* Every sample `len` tokens long: a step's `samples` samples spread evenly
 * over dp ranks x `microbatches` micro-batches each, no imbalance. */
void plan_workload_uniform(double len, double samples, int dp, int microbatches, plan_workload_t *w);

/* plan_layout.c */
/* The layout the config and a world of `world` ranks give (tp = pp = 1 today
 * unless the config asks; ep, ZeRO, offload, micro-batch tokens and
 * accumulation from the config). */
void plan_layout_from_config(const config_t *cfg, int world, plan_layout_t *lay);
/* The layout a plan command plans: spec parsed over cfg (NULL: cfg's own
 * on `world` ranks, as train lays them out), then checked; a spec or
 * layout that fails ends the process, exit 2, its message after `what`
 * (the command, "fabula plan time"). */
void plan_layout_resolve(const config_t *cfg, const char *spec, int world, const char *what, plan_layout_t *lay);
/* The ranks a config is validated for before a spec is parsed over it
 * (config_load_plan): dp x tp x pp ("world=W" when given), and the dp the
 * batch identity counts (a malformed part counts 1 here and gets its
 * message from plan_layout_parse). */
void plan_layout_spec_ranks(const char *spec, config_plan_ranks_t *r);
/* 1 when the spec has part `key` ("tokens", "sp"). */
int plan_layout_spec_has(const char *spec, const char *key);
/* A spec giving one of tokens= and accum=: the other is the global batch
 * of `global_tokens` (named `batch_name` in the message) over dp and it; 0,
 * or -1 with a message when it does not divide. Both or neither: as they
 * are. */
int plan_layout_batch(plan_layout_t *lay, const char *spec, long long global_tokens, const char *batch_name,
                      char *err, size_t errlen);
/* Parses "dp=8,tp=8,pp=16,ep=1,zero=1[,offload=optimizer|param|both][,sp]
 * [,recompute=none|selective|full][,vpp=V][,tokens=T][,accum=G]" over the
 * config's defaults; 0 ok, -1 with a message in err. "world=W" may stand
 * for dp (dp = W / (tp pp)) or accompany it (plan_layout_check then checks
 * W = dp tp pp). */
int plan_layout_parse(const char *spec, const config_t *cfg, plan_layout_t *lay, char *err, size_t errlen);
/* 0 when the layout divides the world, heads, kv heads, intermediate size,
 * vocab, layers and experts; else -1 and err names the first failure. */
int plan_layout_check(const config_t *cfg, const plan_layout_t *lay, char *err, size_t errlen);

/* plan_memory.c: per-rank bytes of the layout (docs/plan.md). */
void plan_memory(const config_t *cfg, const plan_layout_t *lay, plan_memory_t *out);
/* The same for pipeline stage `stage` (plan_memory: the fullest stage's). */
void plan_memory_stage(const config_t *cfg, const plan_layout_t *lay, int stage, plan_memory_t *out);
/* 1 when plan_memory sizes the layout with the functions train allocates
 * by (the figures are train's start-up lines), 0 when they are predictions
 * by Megatron's rules (sequence parallelism, kv heads replicated below
 * tp, more than train's 64 pipeline chunks). */
int plan_memory_exact(const config_t *cfg, const plan_layout_t *lay);

/* plan_machine.c: a machine file in and out (docs/plan.md, "Machine files"). */
int plan_machine_load(const char *path, plan_machine_t *m, char *err, size_t errlen);
/* The same from JSON text (`what` names it in messages). */
int plan_machine_parse(const char *text, const char *what, plan_machine_t *m, char *err, size_t errlen);

/* plan_time.c: one step's time of the layout on the machine. */
void plan_time(const config_t *cfg, const plan_layout_t *lay, const plan_machine_t *mach, const plan_workload_t *w,
               plan_time_t *out);

#endif
