/* What the trainer prints about the run: its model, layout and memory
 * before the first step, and at its end the checks and measurements of the
 * whole run (fp16's skipped steps, tensor-parallel traffic, the pipeline's
 * bubble). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/stages.h"
#include "parallel/comm.h"
#include "parallel/group_nodes.h"
#include "parallel/world.h"
#include "train/trainer_impl.h"
#include "util/error.h"

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
    printf("fabula: memory bytes: params=%zu grads=%zu optimizer=%zu workspace=%zu parameters=%zu activations=%zu "
           "weights16=%zu\n",
           mem.params, mem.grads, mem.optimizer, mem.workspace, param_table_total(t), acts, mem.weights16);
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

/* Which groups stay inside a node: a tp group that spans nodes sends its
 * every-layer all-reduces over the network (collective). */
static void report_nodes(const trainer_t *tr)
{
    if (tr->groups.world_size == 1)
        return;
    group_nodes_t n;
    group_nodes_find(&tr->groups, &n);
    if (tr->rank != 0)
        return;
    char line[512];
    group_nodes_text(&n, line, sizeof line);
    printf("fabula: nodes: %s\n", line);
    if (n.nodes > 1 && n.inside[GROUP_NODES_TP] == 0)
        fb_warn("tp groups span nodes: their all-reduces, every layer, cross the network; give each node a multiple "
                "of parallel.tensor_parallel_size (%d) ranks, placed in order (docs/parallel.md \"Groups and nodes\")",
                tr->groups.tp_size);
    fflush(stdout);
}

void trainer_report_setup(trainer_t *tr)
{
    int64_t stage_mem[PARALLEL_MAX_STAGES][7];
    if (tr->pipe)
        stage_memory(tr, stage_mem);
    if (tr->rank == 0)
        print_setup(tr, stage_mem);
    report_nodes(tr);
}

/* fp16: every rank must have skipped the same steps (the overflow flag is
 * the finiteness of the norm summed over every group, src/zero): a rank
 * that disagreed would have applied an update the others dropped. Checked
 * over the world at the end of the run and reported, so a test sees the
 * agreement of every rank, not only rank 0's log. */
void trainer_report_skipped(trainer_t *tr)
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
               "rank(s)\n", tr->skipped, tr->prog.step, tr->world);
}

/* What rank 0 handed to its tp group's all-reduces over the run's steps
 * (the counters are reset before the first), for bench/tp_step.sh to set
 * beside the formulas of docs/parallel.md. The host group carries all of
 * them on the CPU backends; a GPU run's activation sums go through the
 * device twin (tp_dev) and are not in this count. */
void trainer_report_tp_comm(const trainer_t *tr)
{
    if (tr->groups.tp_size <= 1 || tr->rank != 0)
        return;
    const long steps = tr->prog.step - tr->first_step;
    const comm_stats_t *s = comm_stats(tr->groups.tp, COMM_KIND_ALLREDUCE);
    printf("fabula: tensor-parallel comm of rank 0: %llu all-reduces, %llu bytes over %ld steps\n",
           (unsigned long long)s->calls, (unsigned long long)s->bytes, steps);
}

/* The measured bubble: every stage's share of the run's step time spent
 * waiting on the pipeline, against the 1F1B idle share (p - 1) / (m + p - 1)
 * of p stages and m micro-batches of equal cost, interleaved over v chunks
 * (p - 1) / (v m + p - 1) (docs/parallel.md). */
void trainer_report_pipeline(trainer_t *tr)
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
