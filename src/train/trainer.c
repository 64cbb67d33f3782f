/* One rank's training loop. Every rank computes the same global step plan
 * (which samples, which rank, which micro-batch) and trains on its part, so
 * the step's loss normaliser (target tokens of the whole step) is known to
 * all ranks without communication (docs/model.md, "Losses"). */
#include "train/trainer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hf/hf_import.h"
#include "loader/batch.h"
#include "tokenizer/bytetok.h"
#include "train/ckpt_policy.h"
#include "io/rundir.h"
#include "model/model.h"
#include "model/stages.h"
#include "monitor/counters.h"
#include "monitor/phase.h"
#include "monitor/timer.h"
#include "ops.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "rng.h"
#include "train/backend.h"
#include "loader/data_source.h"
#include "zero/loss_scale.h"
#include "train/evaluate.h"
#include "train/job_log.h"
#include "train/moe_metrics.h"
#include "train/pipeline.h"
#include "train/preempt.h"
#include "train/step_monitor.h"
#include "zero/schedule.h"
#include "loader/step_plan.h"
#include "train/train_log.h"
#include "zero/zero.h"
#include "util/error.h"

/* A phase of the step: host timer and, on CUDA, device events. */
#define TIMED(tr, phase, stmt)                                                                                 \
    do {                                                                                                       \
        PHASE_BEGIN(phase);                                                                                    \
        step_monitor_device_begin(&(tr)->mon, phase);                                                          \
        stmt;                                                                                                  \
        step_monitor_device_end(&(tr)->mon, phase);                                                            \
        PHASE_END(phase);                                                                                      \
    } while (0)

typedef struct trainer {
    const config_t *cfg;
    int rank, world;        /* world rank and size */
    int dp_rank, dp_size;   /* data-parallel position: which micro-batches */
    groups_t groups;
    zero_t *zero;
    model_t *model;
    data_source_t data;
    data_source_t valid;    /* the validation split (run.eval_interval > 0) */
    step_plan_t plan;
    batch_t batch;
    long *routed;           /* [L * E] top-K choices of the step, the global-batch aux pass */
    double *aux_freq;       /* [L * E] routed / the step's tokens: the global-batch f_e */
    moe_metrics_t moe;      /* per-expert, per-layer and per-genre MoE statistics of the step */
    train_log_t log;
    int threads;
    ckpt_policy_t ckpt;
    backend_t be;
    long skipped;           /* steps skipped by the scaler in this process */
    int64_t skip_hash;      /* of the skipped steps' numbers, in order (skipped_agreement) */
    step_monitor_t mon;     /* phase times, MFU, the gather and the verdicts */
    pipeline_t *pipe;       /* pipeline parallelism; NULL without */
    /* the current step's pipeline figures (run_pipeline's micro-batch passes) */
    long step;
    double sums[5];
    step_record_t *rec;
    double pipe_wait, pipe_time; /* this stage's waits and step times, all steps */
    int *mb_tokens;         /* [mb_cap] each micro-batch's tokens, for its backward */
    int mb_cap;
} trainer_t;

/* Micro-batch mb of this rank's share of the step, in tr->batch, and how
 * its losses enter the step's objective. */
static void micro_batch_load(trainer_t *tr, long step, int mb, model_input_t *in, model_scales_t *sc)
{
    const config_t *cfg = tr->cfg;
    const int64_t *ids, *lens;
    int n;
    /* the step's micro-batch index, not (rank, mb): the same on every layout */
    const int gmb = step_plan_micro(&tr->plan, mb, &ids, &lens, &n);
    PHASE_BEGIN(PHASE_DATA);
    data_source_batch(&tr->data, &tr->batch, ids, lens, n);
    PHASE_END(PHASE_DATA);
    const batch_t *b = &tr->batch;
    *in = (model_input_t){b->tokens, b->positions, b->targets, b->cu_seqlens, b->T, b->nseq, b->genre,
                          BYTETOK_NGENRES};
    *sc = (model_scales_t){
        .lm_denominator = tr->plan.targets,
        .mb_weight = (double)b->T / tr->plan.tokens,
        .training = 1,
        .dropout_seed = fb_hash2(cfg->run.seed ^ 0x5eedd209ULL,
                                 (uint64_t)step * ((uint64_t)1 << 28) + (uint64_t)(gmb < 0 ? 0 : gmb)),
        .loss_scale = loss_scale_value(zero_loss_scaler(tr->zero)),
    };
}

/* The global-batch load-balancing loss needs the step's expert frequencies
 * before the first backward: a forward pass over every micro-batch (same
 * weights, same dropout seeds, hence the same routing as the pass that
 * follows) counts each expert's top-K choices, summed over all ranks as
 * integers, so f_e is exact and independent of the layout. It costs one
 * more forward per micro-batch (docs/model.md "Losses"). */
static void global_aux_freq(trainer_t *tr, long step)
{
    const model_config_t *mc = &tr->cfg->model;
    const size_t nexp = (size_t)mc->num_hidden_layers * (size_t)mc->num_local_experts;
    memset(tr->routed, 0, nexp * sizeof *tr->routed);
    pipeline_t *p = tr->pipe;
    const int nchunks = p ? pipeline_chunks(p) : 1;
    for (int mb = 0; mb < tr->plan.nmicro; mb++) {
        model_input_t in;
        model_scales_t sc;
        micro_batch_load(tr, step, mb, &in, &sc);
        /* under pp the micro-batches pass through the stages (and their
         * chunks) one after the other (the step's transfers; their order
         * per tag keeps them apart from the 1F1B pass that follows) */
        for (int c = 0; c < nchunks; c++) {
            model_stats_t st;
            if (p && pipeline_has_prev(p, c))
                pipeline_recv_input(p, mb, c, in.T);
            TIMED(tr, PHASE_FORWARD,
                  model_forward(p ? pipeline_chunk_model(p, mb, c) : tr->model, &in, &sc, &st));
            if (p && pipeline_has_next(p, c))
                pipeline_send_output(p, mb, c, in.T);
            for (size_t i = 0; i < nexp && in.T > 0; i++)
                tr->routed[i] += st.routed_per_expert[i];
        }
    }
    /* over the data-parallel ranks: the tp ranks of one share route alike */
    if (tr->dp_size > 1)
        comm_allreduce(tr->groups.dp, tr->routed, nexp, COMM_I64, COMM_SUM);
    /* each stage counted its own layers (the others' entries are 0) */
    if (p) {
        pipeline_end_step(p);
        comm_allreduce(tr->groups.pp, tr->routed, nexp, COMM_I64, COMM_SUM);
    }
    for (size_t i = 0; i < nexp; i++)
        tr->aux_freq[i] = (double)tr->routed[i] / tr->plan.tokens;
}

static int global_aux(const model_config_t *mc)
{
    return mc->router_aux_loss_scope == MODEL_AUX_SCOPE_GLOBAL_BATCH && mc->num_local_experts > 1;
}

/* The validation loss on run.eval_samples samples of the validation split,
 * the same stratified set every time (train/evaluate.h), with the weights
 * after the step. */
static void evaluate(trainer_t *tr, eval_result_t *out)
{
    if (tr->pipe)
        evaluate_split_pipeline(tr->pipe, tr->groups.pp, &tr->valid, &tr->batch, tr->cfg->run.eval_samples,
                                tr->groups.dp, out);
    else
        evaluate_split(tr->model, &tr->valid, &tr->batch, tr->cfg->run.eval_samples, tr->groups.dp, out);
}

/* Model FLOPs of the micro-batch in tr->batch, from its real sample
 * boundaries (docs/monitoring.md, "MFU"). */
static double batch_flops(const trainer_t *tr)
{
    const batch_t *b = &tr->batch;
    double sq = 0.0;
    for (int s = 0; s < b->nseq; s++) {
        const double len = (double)(b->cu_seqlens[s + 1] - b->cu_seqlens[s]);
        sq += len * len;
    }
    return b->T > 0 ? model_flops_packed(&tr->cfg->model, (double)b->T, sq) : 0.0;
}

/* monitor.debug_delay_*: a slow read on every rank, a slow rank's compute
 * (the verdict tests provoke input and imbalance with them). */
static void debug_delays(const trainer_t *tr)
{
    const monitor_config_t *mo = &tr->cfg->monitor;
    if (mo->debug_delay_data_s > 0) {
        PHASE_BEGIN(PHASE_DATA);
        phase_sleep(mo->debug_delay_data_s);
        PHASE_END(PHASE_DATA);
    }
    if (mo->debug_delay_s > 0 && (mo->debug_delay_rank < 0 || mo->debug_delay_rank == tr->rank)) {
        PHASE_BEGIN(PHASE_FORWARD);
        phase_sleep(mo->debug_delay_s);
        PHASE_END(PHASE_FORWARD);
    }
}

/* One micro-batch's forward on this pipeline stage, between its input's
 * arrival and its output's departure; the statistics of this stage's
 * layers (the loss: the last stage's) into tr->sums. */
static void pipe_forward(void *ctx, int mb, int chunk)
{
    trainer_t *tr = ctx;
    const model_config_t *mc = &tr->cfg->model;
    pipeline_t *p = tr->pipe;
    model_input_t in;
    model_scales_t sc;
    micro_batch_load(tr, tr->step, mb, &in, &sc);
    sc.aux_freq = global_aux(mc) ? tr->aux_freq : NULL;
    tr->mb_tokens[mb] = in.T;
    if (pipeline_has_prev(p, chunk))
        pipeline_recv_input(p, mb, chunk, in.T);
    model_stats_t st;
    TIMED(tr, PHASE_FORWARD, model_forward(pipeline_chunk_model(p, mb, chunk), &in, &sc, &st));
    if (pipeline_has_next(p, chunk))
        pipeline_send_output(p, mb, chunk, in.T);
    /* the micro-batch's FLOPs once, on the first stage's first chunk */
    if (pipeline_stage(p) == 0 && chunk == 0)
        tr->sums[4] += batch_flops(tr);
    tr->sums[0] += st.lm_sum;
    tr->sums[1] += st.aux * sc.mb_weight;
    tr->sums[2] += st.z * sc.mb_weight;
    tr->sums[3] += (double)st.dropped;
    moe_metrics_add(&tr->moe, &st, sc.mb_weight);
}

static void pipe_backward(void *ctx, int mb, int chunk)
{
    trainer_t *tr = ctx;
    pipeline_t *p = tr->pipe;
    const int T = tr->mb_tokens[mb];
    /* the last backward of each chunk's layers is the last micro-batch's on
     * every stage */
    zero_begin_micro(tr->zero, mb, tr->plan.nmicro);
    if (pipeline_has_next(p, chunk))
        pipeline_recv_grad(p, mb, chunk, T);
    TIMED(tr, PHASE_BACKWARD, model_backward(pipeline_chunk_model(p, mb, chunk)));
    if (pipeline_has_prev(p, chunk))
        pipeline_send_grad(p, mb, chunk, T);
}

/* Forward and backward over this rank's micro-batches of the global batch. */
static void run_micro_batches(trainer_t *tr, long step, step_record_t *rec)
{
    const config_t *cfg = tr->cfg;
    const model_config_t *mc = &cfg->model;
    step_plan_next(&tr->plan, step);
    const double targets = tr->plan.targets, tokens = tr->plan.tokens;
    moe_metrics_begin_step(&tr->moe, tr->groups.ep_size > 1 ? tr->groups.ep : NULL);
    double sums[5] = {0.0, 0.0, 0.0, 0.0, 0.0}; /* lm_sum, aux, z, dropped, model FLOPs */
    debug_delays(tr);
    if (global_aux(mc))
        global_aux_freq(tr, step);
    if (tr->pipe) {
        tr->step = step;
        memset(tr->sums, 0, sizeof tr->sums);
        if (tr->plan.nmicro > tr->mb_cap) {
            tr->mb_cap = tr->plan.nmicro;
            tr->mb_tokens = fb_realloc(tr->mb_tokens, (size_t)tr->mb_cap * sizeof *tr->mb_tokens);
        }
        pipeline_run(tr->pipe, tr->plan.nmicro, pipe_forward, pipe_backward, tr);
        pipeline_end_step(tr->pipe);
        memcpy(sums, tr->sums, sizeof sums);
    }
    for (int mb = 0; mb < tr->plan.nmicro && !tr->pipe; mb++) {
        model_input_t in;
        model_scales_t sc;
        micro_batch_load(tr, step, mb, &in, &sc);
        sc.aux_freq = global_aux(mc) ? tr->aux_freq : NULL;
        model_stats_t st;
        zero_begin_micro(tr->zero, mb, tr->plan.nmicro);
        TIMED(tr, PHASE_FORWARD, model_forward(tr->model, &in, &sc, &st));
        TIMED(tr, PHASE_BACKWARD, model_backward(tr->model));
        sums[4] += batch_flops(tr);
        sums[0] += st.lm_sum;
        sums[1] += st.aux * sc.mb_weight;
        sums[2] += st.z * sc.mb_weight;
        sums[3] += (double)st.dropped;
        moe_metrics_add(&tr->moe, &st, sc.mb_weight);
    }
    /* the tp ranks of one data-parallel share hold the same figures: each
     * counts once, summed over the data-parallel group */
    comm_allreduce(tr->groups.dp, sums, 5, COMM_F64, COMM_SUM);
    /* each stage measured its own layers (the loss: the last stage) */
    if (tr->pipe)
        comm_allreduce(tr->groups.pp, sums, 5, COMM_F64, COMM_SUM);
    rec->lm_loss = sums[0] / targets;
    rec->aux_loss = sums[1];
    rec->z_loss = sums[2];
    rec->loss = model_loss_total(mc, rec->lm_loss, rec->aux_loss, rec->z_loss);
    rec->dropped = (long)sums[3];
    rec->model_flops = sums[4];
    rec->tokens = (long)tokens;
    rec->samples = tr->plan.used;
    rec->imbalance = tr->plan.imbalance;
    rec->packing = tr->plan.packing;
    rec->max_len = tr->plan.max_len;
    for (int64_t b = 0; b < tr->plan.bins; b++)
        rec->plan_cost += tr->plan.bin_cost[b];
    moe_metrics_end_step(&tr->moe, tr->groups.ep_size > 1 ? tr->groups.ep : NULL, tr->groups.dp);
    if (tr->pipe)
        moe_metrics_end_step(&tr->moe, NULL, tr->groups.pp);
    rec->moe = &tr->moe;
}

/* Under pp, every stage's figures of the "memory bytes" line, as rank
 * (dp 0, tp 0) of the stage holds them (the largest ZeRO shards), its
 * activations those of the micro-batches its order keeps in flight there
 * (one model each, pipeline_slots: min(pp - s, m) under 1F1B). Collective over the
 * world. */
static void stage_memory(trainer_t *tr, int64_t rows[][7])
{
    const int pp = tr->groups.pp_size;
    memset(rows, 0, (size_t)pp * sizeof *rows);
    if (tr->groups.dp_rank == 0 && tr->groups.tp_rank == 0) {
        const zero_memory_t mem = zero_memory(tr->zero);
        int64_t *r = rows[tr->groups.pp_rank];
        r[0] = (int64_t)mem.params;
        r[1] = (int64_t)mem.grads;
        r[2] = (int64_t)mem.optimizer;
        r[3] = (int64_t)mem.workspace;
        r[4] = (int64_t)param_table_total(model_params_table(tr->model));
        r[5] = (int64_t)(model_activation_bytes(tr->model) * (size_t)pipeline_slots(tr->pipe));
        r[6] = pipeline_slots(tr->pipe);
    }
    comm_allreduce(tr->groups.world, rows, (size_t)pp * 7, COMM_I64, COMM_SUM);
}

static void print_setup(const trainer_t *tr, const int64_t stage_mem[][7])
{
    const config_t *cfg = tr->cfg;
    const param_table_t *t = model_params_table(tr->model);
    printf("fabula: model: %d layers, hidden %d, %d heads (%d kv), %s; %.3fM parameters "
           "(dense %.3fM, experts %.3fM), %.3fM active per token\n",
           cfg->model.num_hidden_layers, cfg->model.hidden_size, cfg->model.num_attention_heads,
           cfg->model.num_key_value_heads,
           cfg->model.num_local_experts > 1 ? "MoE" : "dense", param_table_total(t) / 1e6,
           t->numel[PARAM_GROUP_DENSE] / 1e6, t->numel[PARAM_GROUP_EXPERT] / 1e6,
           model_active_params(&cfg->model) / 1e6);
    printf("fabula: run: %d rank(s) x %d thread(s), backend %s, MPI waits %s (%d rank(s) on %d CPU(s) of the node), batch %d samples offered per step (%d per "
           "micro-batch x %d accumulation x %d rank(s)), micro-batches of <= %d tokens, sampler %s, packing %s%s, "
           "%ld steps, run dir %s\n",
           tr->world, tr->threads, model_ops(tr->model)->name, comm_wait_mode() == COMM_WAIT_YIELD ? "yield" : "spin",
           parallel_local_size(), comm_node_cpus(), cfg->train_batch_size, cfg->micro_batch, cfg->grad_accum,
           tr->dp_size, cfg->loader.max_tokens_per_batch, config_sampler_name(cfg->loader.sampler),
           config_packing_name(cfg->loader.packing), cfg->loader.curriculum ? ", length curriculum" : "",
           cfg->run.steps, cfg->run.run_dir);
    /* OpenMP binds each rank's threads to the first cores of the rank's
     * mask: where the launcher gives every rank the whole node, every rank
     * lands on the same cores (resuming a 1.8 MB checkpoint took 3.6 s
     * instead of 0.01 s, every collective waiting out time slices) */
    const char *bind = getenv("OMP_PROC_BIND");
    if (bind && *bind && strcasecmp(bind, "false") != 0 && comm_node_cpus() > 0 &&
        comm_node_cpus() < parallel_local_size())
        fb_warn("%d ranks of this node run on %d CPU(s) with OMP_PROC_BIND=%s: where the launcher gives every rank "
                "the whole node, OpenMP binds all of them to the same first cores; bind the ranks to their own cores "
                "(mpiexec -bind-to core:%d, srun --cpu-bind=cores with Slurm's task/affinity or task/cgroup) or unset "
                "OMP_PROC_BIND (docs/cpu-threads.md)", parallel_local_size(), comm_node_cpus(), bind, tr->threads);
    if (tr->groups.tp_size > 1)
        printf("fabula: layout: tp %d x ep %d x dp %d (docs/parallel.md); the parameter counts above are one tp "
               "rank's share (%.3fM): vocabulary rows, heads, kv heads and FFN columns split %d ways, norms and "
               "routers replicated%s\n",
               tr->groups.tp_size, tr->groups.ep_size, tr->groups.dp_size / tr->groups.ep_size,
               param_table_total(t) / 1e6, tr->groups.tp_size,
               cfg->parallel.sequence_parallel ? "; sequence parallel: norms and residuals on token shards of each "
                                                 "micro-batch, all-gather and reduce-scatter around each "
                                                 "tensor-parallel region" : "");
    if (tr->groups.pp_size > 1) {
        const int pp = tr->groups.pp_size, v = pipeline_chunks(tr->pipe);
        printf("fabula: layout: pp %d x tp %d x ep %d x dp %d (docs/parallel.md), %s over %d micro-batches a "
               "step:", pp, tr->groups.tp_size, tr->groups.ep_size, tr->groups.dp_size / tr->groups.ep_size,
               v > 1 ? "interleaved 1F1B" : "1F1B", tr->plan.nmicro);
        for (int s = 0; s < pp; s++) {
            int lo[PARALLEL_MAX_STAGES], hi[PARALLEL_MAX_STAGES];
            model_stage_chunks(&cfg->model, &cfg->parallel, s, lo, hi);
            printf("%s stage %d layers", s ? "," : "", s);
            for (int c = 0; c < v; c++)
                printf("%s %d-%d", c ? " +" : "", lo[c], hi[c] - 1);
        }
        printf(" (the embedding on stage 0, the head and the loss on stage %d; stage s keeps the activations of "
               "%s micro-batches in flight); the counts above and the memory below are stage 0's (activations: "
               "its %d micro-batches in flight), then each stage's bytes\n", pp - 1,
               v > 1 ? "its interleaved order's" : "min(pp - s, m)", pipeline_slots(tr->pipe));
    }
    zero_memory_t mem = zero_memory(tr->zero);
    /* 1F1B: a model's activations for each micro-batch in flight */
    const size_t acts = model_activation_bytes(tr->model) * (size_t)(tr->pipe ? pipeline_slots(tr->pipe) : 1);
    printf("fabula: memory per rank (ZeRO stage %d over %d rank(s)%s%s): parameters %.2f MiB, gradients %.2f MiB, "
           "optimizer state %.2f MiB%s, workspaces %.2f MiB, activations %.2f MiB\n",
           cfg->zero.stage, tr->dp_size, cfg->zero.offload_optimizer ? ", optimizer offloaded" : "",
           cfg->zero.offload_param && cfg->zero.stage == 3 ? ", parameters offloaded" : "",
           mem.params / 1048576.0, mem.grads / 1048576.0, mem.optimizer / 1048576.0,
           mem.host_optimizer ? " (host)" : "", mem.workspace / 1048576.0, acts / 1048576.0);
    printf("fabula: memory bytes: params=%zu grads=%zu optimizer=%zu workspace=%zu parameters=%zu activations=%zu\n",
           mem.params, mem.grads, mem.optimizer, mem.workspace, param_table_total(t), acts);
    for (int s = 0; s < tr->groups.pp_size && tr->pipe; s++) {
        const int64_t *r = stage_mem[s];
        printf("fabula: memory bytes stage %d: params=%lld grads=%lld optimizer=%lld workspace=%lld parameters=%lld "
               "activations=%lld\n", s, (long long)r[0], (long long)r[1], (long long)r[2], (long long)r[3],
               (long long)r[4], (long long)r[5]);
    }
    const ops_t *ops = model_ops(tr->model);
    if (tr->be.cuda)
        printf("fabula: device: GPU %d of this node per rank %d%s; compute dtype %s, fp32 master weights, "
               "gradients and optimizer state\n",
               tr->be.device, tr->rank, tr->be.shared_device ? " (GPUs shared by several ranks: collectives "
                                                              "stage through host memory)" : "",
               ops->act_dtype == FB_DTYPE_F16 ? "fp16" : "bf16");
    else if (ops->act_dtype != FB_DTYPE_F32)
        printf("fabula: note: backend %s: the CPU kernels with %s storage of activations and the weights' compute "
               "copy (slow; for checking 16-bit numerics without a GPU)\n",
               ops->name, ops->act_dtype == FB_DTYPE_F16 ? "fp16" : "bf16");
    else if (cfg->fp16.enabled || cfg->bf16_enabled)
        printf("fabula: note: the CPU backend computes in fp32%s\n",
               cfg->fp16.enabled ? "; fp16's dynamic loss scaling still runs" : " (bf16 applies to run.backend cuda)");
    fflush(stdout);
}

/* One job per run directory: a second job on it would trim the first's
 * metrics and mix its checkpoints into the first's. Rank 0 holds the lock
 * (io/rundir.h) for the whole run; every rank learns the verdict, so all
 * exit cleanly after rank 0's message. */
typedef struct lock_try {
    const char *dir;
    char holder[256];
    int locked;
} lock_try_t;

static void lock_step(void *arg)
{
    lock_try_t *l = arg;
    l->locked = rundir_lock(l->dir, l->holder, sizeof l->holder);
}

static void lock_run_dir(const config_t *cfg, int rank)
{
    static char msg[1 << 12];
    lock_try_t l = {.dir = cfg->run.run_dir};
    /* a run dir that cannot be made: one message, no MPI_Abort (outputs_prepare) */
    parallel_agree_outcome(rank == 0 ? fb_catch(lock_step, &l, msg, sizeof msg) : 0, msg);
    int locked = l.locked;
    const char *holder = l.holder;
    comm_bcast(comm_world(), &locked, sizeof locked, 0);
    if (!locked)
        fb_fatal_all(FB_EXIT_USAGE, "run directory %s is in use by another fabula job (%s; lock file %s/.lock): "
                     "give this job its own --run-dir, or wait for that one to end", cfg->run.run_dir, holder,
                     cfg->run.run_dir);
}

static void data_open_step(void *arg)
{
    trainer_t *tr = arg;
    data_source_open(&tr->data, tr->cfg, tr->rank == 0);
    if (tr->cfg->run.eval_interval > 0) {
        char who[64];
        snprintf(who, sizeof who, "run.eval_interval = %ld", tr->cfg->run.eval_interval);
        data_source_open_valid(&tr->valid, tr->cfg, tr->rank == 0, who);
    }
}

/* Every rank reads the input alike; a missing or refused corpus is one
 * message and a clean exit, not a message per rank and MPI_Abort. */
static void data_open(trainer_t *tr)
{
    static char msg[1 << 14];
    int code = fb_catch(data_open_step, tr, msg, sizeof msg);
    parallel_agree_outcome(code, msg);
}

static void outputs_prepare_step(void *arg)
{
    const config_t *cfg = ((trainer_t *)arg)->cfg;
    rundir_prepare(cfg->run.run_dir, cfg->effective_json);
    train_tboard_make_dirs(cfg);
}

/* Rank 0 makes the run dir and the monitoring folders; a path that cannot
 * be made is one message and the same exit code on every rank. Found
 * lazily by rank 0 alone, it was an MPI_Abort while the others ran on, and
 * mpiexec's exit status then depended on which process it saw end first. */
static void outputs_prepare(trainer_t *tr)
{
    static char msg[1 << 12];
    const int code = tr->rank == 0 ? fb_catch(outputs_prepare_step, tr, msg, sizeof msg) : 0;
    parallel_agree_outcome(code, msg);
}

/* The effective config with model.vocab_size = V (a grown vocabulary),
 * so that the run dir and the checkpoints describe the model they hold
 * (a resume or `fabula eval` reads it back: docs/init-from.md). */
static char *with_vocab_size(const char *text, int V)
{
    json_error_t err;
    json_t *root = json_loads(text, JSON_PRESERVE_ORDER, &err);
    json_t *m = root ? json_object_get(root, "model") : NULL;
    FB_ASSERT(json_is_object(m) && json_object_set_new(m, "vocab_size", json_integer(V)) == 0);
    char *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(16));
    FB_ASSERT(out);
    json_decref(root);
    char *copy = fb_strdup(out);
    free(out);
    return copy;
}

/* fp16: every rank must have skipped the same steps (the overflow flag is
 * the finiteness of the norm summed over every group, src/zero): a rank
 * that disagreed would have applied an update the others dropped. Checked
 * over the world at the end of the run and reported, so a test sees the
 * agreement of every rank, not only rank 0's log. */
static void skipped_agreement(trainer_t *tr, long steps)
{
    if (!zero_loss_scaler(tr->zero)->enabled)
        return;
    int64_t v[4] = {tr->skip_hash, -tr->skip_hash, tr->skipped, -tr->skipped};
    comm_allreduce(tr->groups.world, v, 4, COMM_I64, COMM_MAX);
    if (v[0] != -v[1] || v[2] != -v[3])
        fb_fatal(FB_EXIT_INTERNAL, "fp16 loss scaling: the ranks skipped different steps (this rank %ld, between "
                                   "%lld and %lld over the world)", tr->skipped, (long long)-v[3], (long long)v[2]);
    if (tr->rank == 0)
        printf("fabula: fp16 loss scaling: %ld steps skipped by this run (to step %ld), the same steps on all %d "
               "rank(s)\n", tr->skipped, steps, tr->world);
}

/* What rank 0 handed to its tp group's all-reduces over the run's steps
 * (the counters are reset before the first), for bench/tp_step.sh to set
 * beside the formulas of docs/parallel.md. The host group carries all of
 * them on the CPU backends; a GPU run's activation sums go through the
 * device twin (tp_dev) and are not in this count. */
static void tp_comm_report(const trainer_t *tr, long steps)
{
    if (tr->groups.tp_size <= 1 || tr->rank != 0)
        return;
    const comm_stats_t *s = comm_stats(tr->groups.tp, COMM_KIND_ALLREDUCE);
    printf("fabula: tensor-parallel comm of rank 0: %llu all-reduces, %llu bytes over %ld steps\n",
           (unsigned long long)s->calls, (unsigned long long)s->bytes, steps);
}

/* The measured bubble: every stage's share of the run's step time spent
 * waiting on the pipeline, against the 1F1B idle share (p - 1) / (m + p - 1)
 * of p stages and m micro-batches of equal cost, interleaved over v chunks
 * (p - 1) / (v m + p - 1) (docs/parallel.md). */
static void pipeline_report(trainer_t *tr)
{
    const int p = tr->groups.pp_size, m = tr->plan.nmicro, v = pipeline_chunks(tr->pipe);
    double *idle = fb_calloc((size_t)p, sizeof *idle);
    idle[tr->groups.pp_rank] = tr->pipe_time > 0 ? tr->pipe_wait / tr->pipe_time : 0.0;
    comm_allreduce(tr->groups.pp, idle, (size_t)p, COMM_F64, COMM_SUM);
    if (tr->rank == 0) {
        double mean = 0.0;
        printf("fabula: pipeline: %d stages x %d micro-batches a step; idle share of the step time by stage:", p, m);
        for (int s = 0; s < p; s++) {
            printf(" %.3f", idle[s]);
            mean += idle[s] / p;
        }
        if (v > 1)
            printf("; mean %.3f, interleaved 1F1B theory (p-1)/(v m+p-1) = %.3f (v = %d)\n", mean,
                   (double)(p - 1) / (v * m + p - 1), v);
        else
            printf("; mean %.3f, 1F1B theory (p-1)/(m+p-1) = %.3f\n", mean, (double)(p - 1) / (m + p - 1));
        fflush(stdout);
    }
    free(idle);
}

int trainer_run(const config_t *cfg) { return trainer_run_losses(cfg, NULL); }

int trainer_run_losses(const config_t *cfg, double *losses)
{
    trainer_t tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = cfg;
    tr.rank = parallel_rank();
    tr.world = parallel_size();
    tr.threads = train_choose_threads();
    /* again for a caller that did not (fabula validate, the benchmarks) */
    preempt_install(cfg->run.preempt_signals, cfg->run.n_preempt_signals);
    counters_init(tr.rank == 0);
    data_open(&tr);
    /* model.init_from: the tokenizer's appended specials may need more
     * vocabulary rows than the imported model has (docs/init-from.md) */
    config_t grown;
    if (tr.data.vocab_grow > cfg->model.vocab_size) {
        grown = *cfg;
        grown.model.vocab_size = tr.data.vocab_grow;
        /* the tp ranks split the vocabulary rows, and it is not padded */
        if (tr.data.vocab_grow % cfg->parallel.tensor_parallel_size != 0)
            fb_fatal_all(FB_EXIT_USAGE, "model.init_from: the tokenizer's appended special tokens grow the vocabulary "
                         "from %d to %d rows, not a multiple of parallel.tensor_parallel_size = %d", cfg->model.vocab_size,
                         tr.data.vocab_grow, cfg->parallel.tensor_parallel_size);
        grown.effective_json = with_vocab_size(cfg->effective_json, grown.model.vocab_size);
        if (tr.rank == 0)
            printf("fabula: model.init_from: the vocabulary grows from %d to %d rows for the tokenizer's appended "
                   "special tokens (their rows start as the mean of the others)\n",
                   cfg->model.vocab_size, grown.model.vocab_size);
        cfg = tr.cfg = &grown;
    }
    hf_weights_t *hfw = NULL;
    if (cfg->init_from) {
        char why[1024];
        int hcode = hf_weights_open(&hfw, cfg->init_from, &cfg->model, why, sizeof why);
        if (hcode)
            fb_fatal_all(hcode, "model.init_from: %s", why);
    }
    /* after the input checks, so that a refused input leaves no run dir */
    lock_run_dir(cfg, tr.rank);
    job_log_open(cfg->run.run_dir, tr.rank, tr.world);

    groups_create_pp(&tr.groups, cfg->parallel.pipeline_parallel_size, cfg->parallel.tensor_parallel_size,
                     cfg->parallel.expert_parallel_size, cfg->model.num_local_experts);
    tr.dp_rank = tr.groups.dp_rank;
    tr.dp_size = tr.groups.dp_size;
    backend_open(&tr.be, cfg);
    if (tr.be.ops->device_memory)
        groups_attach_device(&tr.groups);
    zero_init_source_t hsrc = hfw ? hf_weights_source(hfw) : (zero_init_source_t){0};
    const double t_import = timer_now();
    tr.zero = zero_create_from(cfg, &tr.groups, tr.be.ops, cfg->loader.max_tokens_per_batch, cfg->run.seed,
                               hfw ? &hsrc : NULL);
    if (hfw && tr.rank == 0)
        printf("fabula: model.init_from: %s: model built and weights read in %.3f s (each rank its own part)\n", cfg->init_from,
               timer_now() - t_import);
    hf_weights_close(hfw);
    tr.model = zero_model(tr.zero);
    step_plan_init(&tr.plan, cfg, tr.data.lens, tr.data.n, tr.dp_size, tr.dp_rank);
    if (tr.groups.pp_size > 1)
        tr.pipe = pipeline_create(tr.model, tr.groups.pp, cfg->loader.max_tokens_per_batch, tr.plan.nmicro);
    const int E = cfg->model.num_local_experts > 1 ? cfg->model.num_local_experts : 1;
    tr.routed = fb_calloc((size_t)cfg->model.num_hidden_layers * E, sizeof *tr.routed);
    tr.aux_freq = fb_calloc((size_t)cfg->model.num_hidden_layers * E, sizeof *tr.aux_freq);
    moe_metrics_init(&tr.moe, &cfg->model, BYTETOK_NGENRES, tr.groups.ep_size);
    int64_t stage_mem[PARALLEL_MAX_STAGES][7];
    if (tr.pipe)
        stage_memory(&tr, stage_mem);
    if (tr.rank == 0)
        print_setup(&tr, stage_mem);
    outputs_prepare(&tr);
    /* parameters, moments, step count and data position from a checkpoint
     * (docs/checkpoint.md); before the metrics log opens, which it trims */
    ckpt_target_t target = {cfg, tr.zero, model_ops(tr.model), &tr.plan, &tr.groups,
                            cfg->fp16.enabled ? zero_loss_scaler(tr.zero) : NULL};
    ckpt_policy_init(&tr.ckpt, &target);
    ckpt_progress_t prog;
    ckpt_policy_resume(&tr.ckpt, &prog);
    job_log_start(prog.step, cfg->run.steps);
    job_log_progress(prog.step, tr.ckpt.last_saved);
    train_log_open(&tr.log, cfg, tr.rank == 0, tr.data.lens, tr.data.n);
    step_monitor_open(&tr.mon, cfg, &tr.be, tr.threads, &tr.groups);

    int code = FB_EXIT_OK, sig = 0;
    char message[256] = "";
    const double t_start = timer_now();
    const long first_step = prog.step;
    if (tr.groups.tp_size > 1)
        comm_stats_reset(tr.groups.tp);
    /* a signal during the start-up (loading, resuming): nothing trained yet,
     * so nothing new to save; the run ends before its first step */
    if (prog.step < cfg->run.steps && (sig = preempt_agree()) != 0) {
        if (tr.rank == 0)
            printf("fabula: preempted (%s) before step %ld: nothing new to save (%s), exit %d\n",
                   preempt_signal_name(sig), prog.step + 1,
                   prog.step > 0 ? "the checkpoint of that step stands" : "no step was trained", FB_EXIT_PREEMPTED);
        code = FB_EXIT_PREEMPTED;
    }
    for (long step = prog.step; code == FB_EXIT_OK && step < cfg->run.steps; step++) {
        step_record_t rec;
        memset(&rec, 0, sizeof rec);
        rec.step = step + 1;
        const double t0 = timer_now(), c0 = timer_process_cpu();
        step_monitor_begin(&tr.mon);
        zero_begin_step(tr.zero);
        run_micro_batches(&tr, step, &rec);
        TIMED(&tr, PHASE_BACKWARD, zero_end_backward(tr.zero));
        rec.lr = schedule_lr(&cfg->sched, &cfg->optim, zero_step_count(tr.zero));
        zero_step_report_t zs;
        TIMED(&tr, PHASE_OPTIMIZER, zs = zero_step(tr.zero, rec.lr, rec.loss));
        rec.grad_norm = zs.grad_norm;
        rec.loss_scale = zs.loss_scale;
        if (zs.status == ZERO_STEP_DIVERGED) {
            snprintf(message, sizeof message, "step %ld: loss %g, gradient norm %g: training diverged", rec.step,
                     rec.loss, rec.grad_norm);
            if (tr.rank == 0)
                fprintf(stderr, "fabula: error: %s\n", message);
            code = FB_EXIT_DIVERGED;
            break;
        }
        if (zs.status == ZERO_STEP_SKIPPED) {
            rec.skipped = 1;
            tr.skipped++;
            /* kept below 2^62 so that its negation fits (skipped_agreement) */
            tr.skip_hash = (int64_t)(((uint64_t)tr.skip_hash * 1000003u + (uint64_t)rec.step) & ((1ULL << 62) - 1));
            if (tr.rank == 0)
                printf("fabula: step %ld: gradient overflow at loss scale %g: step skipped, scale now %g\n",
                       rec.step, zs.loss_scale, loss_scale_value(zero_loss_scaler(tr.zero)));
        }
        rec.step_time = timer_now() - t0;
        rec.step_cpu_time = timer_process_cpu() - c0;
        if (tr.pipe) {
            tr.pipe_wait += pipeline_take_wait(tr.pipe);
            tr.pipe_time += rec.step_time;
        }
        monitor_report_t mrep;
        const step_monitor_step_t ms = {rec.step, rec.step_time, rec.step_cpu_time, rec.model_flops, rec.imbalance,
                                        (long)tr.plan.bins, tr.plan.nbins_max, tr.plan.max_len};
        step_monitor_end(&tr.mon, &ms, &mrep);
        rec.mon = &mrep;
        rec.valid_lm_loss = NAN;
        eval_result_t valid;
        if (cfg->run.eval_interval > 0 && (rec.step % cfg->run.eval_interval == 0 || rec.step == cfg->run.steps)) {
            evaluate(&tr, &valid);
            rec.valid_lm_loss = valid.lm_loss;
            rec.valid = &valid;
        }
        rec.elapsed = timer_now() - t_start;
        train_log_step(&tr.log, &rec);
        train_tboard_histograms(&tr.log.tb, tr.zero, rec.step, !rec.skipped);
        if (losses)
            losses[step] = rec.loss;
        prog.step = step + 1;
        prog.tokens_seen += rec.tokens;
        job_log_progress(prog.step, tr.ckpt.last_saved);
        sig = preempt_agree();
        if (sig) {
            ckpt_policy_save(&tr.ckpt, &prog);
            job_log_progress(prog.step, tr.ckpt.last_saved);
            if (tr.rank == 0)
                printf("fabula: preempted (%s): checkpoint of step %ld written, exit %d\n", preempt_signal_name(sig),
                       prog.step, FB_EXIT_PREEMPTED);
            code = FB_EXIT_PREEMPTED;
            break;
        }
        PHASE_BEGIN(PHASE_CHECKPOINT);
        ckpt_policy_step_done(&tr.ckpt, &prog);
        PHASE_END(PHASE_CHECKPOINT);
        job_log_progress(prog.step, tr.ckpt.last_saved);
    }
    if (code == FB_EXIT_OK) {
        ckpt_policy_save_final(&tr.ckpt, &prog);
        job_log_progress(prog.step, tr.ckpt.last_saved);
    }
    skipped_agreement(&tr, prog.step);
    tp_comm_report(&tr, prog.step - first_step);
    train_log_close(&tr.log, code);
    step_monitor_close(&tr.mon);
    job_log_end(code, sig, message[0] ? message : NULL);
    if (tr.pipe)
        pipeline_report(&tr);
    pipeline_free(tr.pipe);
    free(tr.mb_tokens);

    free(tr.routed);
    free(tr.aux_freq);
    moe_metrics_free(&tr.moe);
    step_plan_free(&tr.plan);
    batch_free(&tr.batch);
    zero_free(tr.zero);
    groups_free(&tr.groups);
    backend_close(&tr.be);
    data_source_close(&tr.data);
    if (cfg->run.eval_interval > 0)
        data_source_close(&tr.valid);
    if (cfg == &grown)
        free(grown.effective_json);
    return code;
}
