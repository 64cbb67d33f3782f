/* A step's micro-batches on this rank. Every rank computes the same global
 * step plan (which samples, which rank, which micro-batch) and trains on
 * its part, so the step's loss normaliser (target tokens of the whole step)
 * is known to all ranks without communication (docs/model.md, "Losses").
 *
 * Megatron's split: forward_pass and backward_pass are the work of one
 * micro-batch (one chunk of it on an interleaved pipeline stage), and a
 * schedule only orders them; without a pipeline the schedule is 1F1B on a
 * single stage (each forward followed by its backward), so both layouts
 * share one body and one accumulation of the step's figures. */
#include <string.h>

#include "monitor/phase.h"
#include "rng.h"
#include "tokenizer/bytetok.h"
#include "train/trainer_impl.h"
#include "util/error.h"

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

/* The model a pass of micro-batch mb runs on: the pipeline's for the
 * micro-batch, set to chunk `chunk`, or the one model. */
static model_t *pass_model(trainer_t *tr, int mb, int chunk)
{
    return tr->pipe ? pipeline_chunk_model(tr->pipe, mb, chunk) : tr->model;
}

static int global_aux(const model_config_t *mc)
{
    return mc->router_aux_loss_scope == MODEL_AUX_SCOPE_GLOBAL_BATCH && config_model_is_moe(mc);
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
            TIMED(tr, PHASE_FORWARD, model_forward(pass_model(tr, mb, c), &in, &sc, &st));
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
    /* monitor.debug_hang_step: this rank never arrives (the watchdog's tests) */
    if (mo->debug_hang_step == tr->prog.step + 1 && mo->debug_delay_rank == tr->rank)
        for (;;)
            phase_sleep(3600.0);
    if (mo->debug_delay_s > 0 && (mo->debug_delay_rank < 0 || mo->debug_delay_rank == tr->rank)) {
        PHASE_BEGIN(PHASE_FORWARD);
        phase_sleep(mo->debug_delay_s);
        PHASE_END(PHASE_FORWARD);
    }
}

/* One micro-batch's forward (on a pipeline stage: of this stage's chunk
 * `chunk`, between its input's arrival and its output's departure), its
 * figures into the step's: this rank's layers' statistics (the loss: the
 * last stage's). */
static void forward_pass(void *ctx, int mb, int chunk)
{
    trainer_t *tr = ctx;
    const model_config_t *mc = &tr->cfg->model;
    pipeline_t *p = tr->pipe;
    model_input_t in;
    model_scales_t sc;
    micro_batch_load(tr, tr->step, mb, &in, &sc);
    sc.aux_freq = global_aux(mc) ? tr->aux_freq : NULL;
    tr->mb_tokens[mb] = in.T;
    if (p && pipeline_has_prev(p, chunk))
        pipeline_recv_input(p, mb, chunk, in.T);
    model_stats_t st;
    TIMED(tr, PHASE_FORWARD, model_forward(pass_model(tr, mb, chunk), &in, &sc, &st));
    if (p && pipeline_has_next(p, chunk))
        pipeline_send_output(p, mb, chunk, in.T);
    /* the micro-batch's FLOPs once: on the first stage's first chunk */
    const int first = !p || (pipeline_stage(p) == 0 && chunk == 0);
    step_stats_add(&tr->stats, &st, sc.mb_weight, first ? batch_flops(tr) : 0.0);
    moe_metrics_add(&tr->moe, &st, sc.mb_weight);
}

/* The same micro-batch's backward, its gradients into ZeRO's reduction
 * (on a pipeline stage: d(output) in, d(input) out). */
static void backward_pass(void *ctx, int mb, int chunk)
{
    trainer_t *tr = ctx;
    pipeline_t *p = tr->pipe;
    const int T = tr->mb_tokens[mb];
    /* the last backward of each chunk's layers is the last micro-batch's,
     * on every stage and in either schedule */
    zero_begin_micro(tr->zero, mb, tr->plan.nmicro);
    if (p && pipeline_has_next(p, chunk))
        pipeline_recv_grad(p, mb, chunk, T);
    TIMED(tr, PHASE_BACKWARD, model_backward(p ? pipeline_backward_model(p, mb, chunk) : tr->model));
    if (p && pipeline_has_prev(p, chunk))
        pipeline_send_grad(p, mb, chunk, T);
}

/* The order of the step's passes on this rank: the pipeline's (interleaved)
 * 1F1B, or on one stage each micro-batch's forward then its backward. */
static void schedule_run(trainer_t *tr)
{
    const int nmicro = tr->plan.nmicro;
    if (tr->pipe) {
        pipeline_run(tr->pipe, nmicro, forward_pass, backward_pass, tr);
        pipeline_end_step(tr->pipe);
        return;
    }
    for (int mb = 0; mb < nmicro; mb++) {
        forward_pass(tr, mb, 0);
        backward_pass(tr, mb, 0);
    }
}

void trainer_forward_backward(trainer_t *tr, long step, step_record_t *rec)
{
    const model_config_t *mc = &tr->cfg->model;
    comm_t *ep = tr->groups.ep_size > 1 ? tr->groups.ep : NULL;
    step_plan_next(&tr->plan, step);
    tr->step = step;
    step_stats_init(&tr->stats);
    moe_metrics_begin_step(&tr->moe, ep);
    debug_delays(tr);
    if (global_aux(mc))
        global_aux_freq(tr, step);
    if (tr->plan.nmicro > tr->mb_cap) {
        tr->mb_cap = tr->plan.nmicro;
        tr->mb_tokens = fb_realloc(tr->mb_tokens, (size_t)tr->mb_cap * sizeof *tr->mb_tokens);
    }
    schedule_run(tr);
    /* the tp ranks of one data-parallel share hold the same figures: each
     * counts once, summed over the data-parallel group; under pp each stage
     * measured its own layers (the loss: the last stage) */
    step_stats_reduce(&tr->stats, tr->groups.dp);
    if (tr->pipe)
        step_stats_reduce(&tr->stats, tr->groups.pp);
    moe_metrics_end_step(&tr->moe, ep, tr->groups.dp);
    if (tr->pipe)
        moe_metrics_end_step(&tr->moe, NULL, tr->groups.pp);

    const step_stats_t *s = &tr->stats;
    rec->lm_loss = s->lm_sum / tr->plan.targets;
    rec->aux_loss = s->aux;
    rec->z_loss = s->z;
    rec->loss = model_loss_total(mc, rec->lm_loss, rec->aux_loss, rec->z_loss);
    rec->dropped = (long)s->dropped;
    rec->model_flops = s->model_flops;
    rec->tokens = (long)tr->plan.tokens;
    rec->samples = tr->plan.used;
    rec->imbalance = tr->plan.imbalance;
    rec->packing = tr->plan.packing;
    rec->max_len = tr->plan.max_len;
    for (int64_t b = 0; b < tr->plan.bins; b++)
        rec->plan_cost += tr->plan.bin_cost[b];
    rec->moe = &tr->moe;
}
