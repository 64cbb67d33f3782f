/* One rank's training loop. Every rank draws the same global batch from the
 * same seeded sampler and takes its own micro-batches of it, so the step's
 * loss normaliser (target tokens of the whole global batch) is known to all
 * ranks without communication (docs/model.md, "Losses"). */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/novels.h"
#include "data/path.h"
#include "data/sampler.h"
#include "data/windows.h"
#include "io/rundir.h"
#include "model/model.h"
#include "monitor/counters.h"
#include "monitor/timer.h"
#include "ops.h"
#include "parallel/world.h"
#include "rng.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/train_log.h"
#include "util/error.h"

typedef struct trainer {
    const config_t *cfg;
    int rank, world;
    model_t *model;
    optimizer_t opt;
    novel_set_t novels;
    sample_set_t samples;
    sampler_t sampler;
    batch_t batch;
    int64_t *ids;
    long *expert_tokens;    /* [L * E] summed over the step's micro-batches */
    train_log_t log;
} trainer_t;

static void load_data(trainer_t *tr)
{
    const data_config_t *d = &tr->cfg->data;
    char *path = data_path_resolve(d->train_path);
    novels_load(&tr->novels, path);
    windows_build(&tr->samples, &tr->novels, d->seq_len, d->overlap, d->min_seq_len);
    if (tr->samples.n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no sample of at least %d tokens (data.min_seq_len)", path, d->min_seq_len);
    if (tr->rank == 0) {
        printf("fabula: data: %s: %d novels, %lld samples of <= %d tokens (%lld tokens)\n", path,
               tr->novels.n, (long long)tr->samples.n, d->seq_len,
               (long long)tr->samples.offsets[tr->samples.n]);
    }
    free(path);
}

static int64_t sample_len(const trainer_t *tr, int64_t id)
{
    return tr->samples.offsets[id + 1] - tr->samples.offsets[id];
}

static void reduce_gradients(trainer_t *tr)
{
    if (tr->world == 1)
        return;
    const param_table_t *t = model_params_table(tr->model);
    for (int g = 0; g < PARAM_NGROUPS; g++)
        if (t->numel[g])
            parallel_allreduce_sum_f32(model_grads(tr->model, g), t->numel[g]);
}

/* Forward and backward over this rank's micro-batches of the global batch. */
static void run_micro_batches(trainer_t *tr, long step, step_record_t *rec)
{
    const config_t *cfg = tr->cfg;
    const model_config_t *mc = &cfg->model;
    const int E = mc->num_local_experts > 1 ? mc->num_local_experts : 1;
    const size_t nexp = (size_t)mc->num_hidden_layers * E;
    double targets = 0.0, tokens = 0.0;
    for (int i = 0; i < cfg->train_batch_size; i++) {
        int64_t len = sample_len(tr, tr->ids[i]);
        tokens += (double)len;
        targets += (double)(len - 1);
    }
    memset(tr->expert_tokens, 0, nexp * sizeof *tr->expert_tokens);
    double sums[4] = {0.0, 0.0, 0.0, 0.0}; /* lm_sum, aux, z, dropped */
    for (int mb = 0; mb < cfg->grad_accum; mb++) {
        const int64_t *ids = tr->ids + ((size_t)mb * tr->world + tr->rank) * cfg->micro_batch;
        batch_pack(&tr->batch, &tr->samples, ids, cfg->micro_batch);
        const batch_t *b = &tr->batch;
        model_input_t in = {b->tokens, b->positions, b->targets, b->cu_seqlens, b->T, b->nseq};
        model_scales_t sc = {
            .lm_denominator = targets,
            .mb_weight = (double)b->T / tokens,
            .training = 1,
            .dropout_seed = fb_hash2(cfg->run.seed ^ 0x5eedd209ULL, (uint64_t)step * 65536u + (uint64_t)mb),
        };
        model_stats_t st;
        model_forward(tr->model, &in, &sc, &st);
        model_backward(tr->model);
        sums[0] += st.lm_sum;
        sums[1] += st.aux * sc.mb_weight;
        sums[2] += st.z * sc.mb_weight;
        sums[3] += (double)st.dropped;
        for (size_t i = 0; i < nexp; i++)
            tr->expert_tokens[i] += st.tokens_per_expert[i];
    }
    parallel_allreduce_sum_f64(sums, 4);
    if (tr->world > 1)
        parallel_allreduce_sum_i64((long long *)tr->expert_tokens, nexp);
    rec->lm_loss = sums[0] / targets;
    rec->aux_loss = sums[1];
    rec->z_loss = sums[2];
    rec->loss = rec->lm_loss + mc->router_aux_loss_coef * rec->aux_loss + mc->router_z_loss_coef * rec->z_loss;
    rec->dropped = (long)sums[3];
    rec->tokens = (long)tokens;
    rec->expert_tokens = tr->expert_tokens;
}

static void print_setup(const trainer_t *tr)
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
    printf("fabula: run: %d rank(s), backend %s, batch %d samples = %d per micro-batch x %d accumulation x %d "
           "rank(s), %ld steps, run dir %s\n",
           tr->world, model_ops(tr->model)->name, cfg->train_batch_size, cfg->micro_batch, cfg->grad_accum,
           tr->world, cfg->run.steps, cfg->run.run_dir);
    if (cfg->zero.stage > 0)
        printf("fabula: note: zero_optimization.stage %d is validated; this version keeps the full "
               "optimizer state on every rank (plain data parallel)\n", cfg->zero.stage);
    if (cfg->fp16.enabled || cfg->bf16_enabled)
        printf("fabula: note: %s applies to the CUDA backend; the CPU backend computes in fp32\n",
               cfg->fp16.enabled ? "fp16" : "bf16");
    fflush(stdout);
}

int trainer_run(const config_t *cfg)
{
    trainer_t tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = cfg;
    tr.rank = parallel_rank();
    tr.world = parallel_size();
    counters_init(tr.rank == 0);
    load_data(&tr);

    tr.model = model_create(&cfg->model, ops_cpu(), cfg->micro_batch * cfg->data.seq_len);
    model_init_weights(tr.model, cfg->run.seed);
    optimizer_init(&tr.opt, &cfg->optim, tr.model);
    sampler_init(&tr.sampler, tr.samples.n, cfg->run.seed);
    tr.ids = fb_malloc((size_t)cfg->train_batch_size * sizeof *tr.ids);
    const int E = cfg->model.num_local_experts > 1 ? cfg->model.num_local_experts : 1;
    tr.expert_tokens = fb_calloc((size_t)cfg->model.num_hidden_layers * E, sizeof *tr.expert_tokens);
    if (tr.rank == 0) {
        print_setup(&tr);
        rundir_prepare(cfg->run.run_dir, cfg->effective_json);
    }
    train_log_open(&tr.log, cfg, tr.rank == 0);

    int code = FB_EXIT_OK;
    const double t_start = timer_now();
    for (long step = 0; step < cfg->run.steps; step++) {
        step_record_t rec;
        memset(&rec, 0, sizeof rec);
        rec.step = step + 1;
        const double t0 = timer_now();
        sampler_next(&tr.sampler, cfg->train_batch_size, tr.ids);
        model_zero_grads(tr.model);
        run_micro_batches(&tr, step, &rec);
        reduce_gradients(&tr);
        rec.grad_norm = grads_global_norm(tr.model);
        rec.lr = schedule_lr(&cfg->sched, &cfg->optim, step);
        if (!isfinite(rec.loss) || !isfinite(rec.grad_norm)) {
            if (tr.rank == 0)
                fprintf(stderr, "fabula: error: step %ld: loss %g, gradient norm %g: training diverged\n",
                        rec.step, rec.loss, rec.grad_norm);
            code = FB_EXIT_DIVERGED;
            break;
        }
        grads_clip(tr.model, rec.grad_norm, cfg->gradient_clipping);
        optimizer_step(&tr.opt, tr.model, rec.lr);
        rec.step_time = timer_now() - t0;
        rec.elapsed = timer_now() - t_start;
        train_log_step(&tr.log, &rec);
    }
    train_log_close(&tr.log, code);

    free(tr.ids);
    free(tr.expert_tokens);
    batch_free(&tr.batch);
    optimizer_free(&tr.opt);
    model_free(tr.model);
    sampler_free(&tr.sampler);
    sample_set_free(&tr.samples);
    novels_free(&tr.novels);
    return code;
}
