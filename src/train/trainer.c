/* One rank's training run: opening it (data, model, optimizer state, run
 * dir), its steps (the micro-batches, the update, the logs, checkpoints and
 * preemption) and its end. The micro-batches of a step are
 * trainer_micro_batch.c's; trainer_impl.h names the other parts. */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf_import.h"
#include "monitor/counters.h"
#include "util/timer.h"
#include "parallel/comm.h"
#include "parallel/heartbeat.h"
#include "parallel/world.h"
#include "tokenizer/bytetok.h"
#include "train/job_log.h"
#include "train/preempt.h"
#include "train/trainer_impl.h"
#include "util/error.h"
#include "zero/schedule.h"

/* The model's weights: model.init_from's, else the seed's. */
static void model_open(trainer_t *tr)
{
    const config_t *cfg = tr->cfg;
    hf_weights_t *hfw = NULL;
    if (cfg->init_from) {
        char why[1024];
        int hcode = hf_weights_open(&hfw, cfg->init_from, &cfg->model, why, sizeof why);
        if (hcode)
            fb_fatal_all(hcode, "model.init_from: %s", why);
    }
    /* after the input checks, so that a refused input leaves no run dir */
    trainer_lock_run_dir(tr);
    job_log_open(cfg->run.run_dir, tr->rank, tr->world);

    groups_create_pp(&tr->groups, cfg->parallel.pipeline_parallel_size, cfg->parallel.tensor_parallel_size,
                     cfg->parallel.expert_parallel_size, cfg->model.num_local_experts);
    tr->dp_rank = tr->groups.dp_rank;
    tr->dp_size = tr->groups.dp_size;
    backend_open(&tr->be, cfg);
    if (tr->be.ops->device_memory)
        groups_attach_device(&tr->groups);
    zero_init_source_t hsrc = hfw ? hf_weights_source(hfw) : (zero_init_source_t){0};
    const double t_import = timer_now();
    tr->zero = zero_create_from(cfg, &tr->groups, tr->be.ops, cfg->loader.max_tokens_per_batch, cfg->run.seed,
                                hfw ? &hsrc : NULL);
    if (hfw && tr->rank == 0)
        printf("fabula: model.init_from: %s: model built and weights read in %.3f s (each rank its own part)\n",
               cfg->init_from, timer_now() - t_import);
    hf_weights_close(hfw);
    tr->model = zero_model(tr->zero);
}

trainer_t *trainer_open(const config_t *cfg)
{
    trainer_t *tr = fb_calloc(1, sizeof *tr);
    tr->cfg = cfg;
    tr->rank = parallel_rank();
    tr->world = parallel_size();
    tr->threads = train_choose_threads();
    /* again for a caller that did not (fabula validate, the benchmarks) */
    preempt_install(cfg->run.preempt_signals, cfg->run.n_preempt_signals);
    counters_init(tr->rank == 0);
    trainer_data_open(tr);
    /* model.init_from: the tokenizer's appended specials may need more
     * vocabulary rows than the imported model has (docs/init-from.md) */
    trainer_grow_vocab(tr);
    cfg = tr->cfg;
    model_open(tr);
    step_plan_init(&tr->plan, cfg, tr->data.lens, tr->data.n, tr->dp_size, tr->dp_rank);
    if (tr->groups.pp_size > 1)
        tr->pipe = pipeline_create(tr->model, tr->groups.pp, cfg->loader.max_tokens_per_batch, tr->plan.nmicro);
    const size_t nexp = (size_t)cfg->model.num_hidden_layers *
                        (size_t)config_model_experts(&cfg->model);
    tr->routed = fb_calloc(nexp, sizeof *tr->routed);
    tr->aux_freq = fb_calloc(nexp, sizeof *tr->aux_freq);
    moe_metrics_init(&tr->moe, &cfg->model, BYTETOK_NGENRES, tr->groups.ep_size);
    trainer_report_setup(tr);
    trainer_outputs_prepare(tr);
    /* parameters, moments, step count and data position from a checkpoint
     * (docs/checkpoint.md); before the metrics log opens, which it trims */
    ckpt_target_t target = {cfg, tr->zero, model_ops(tr->model), &tr->plan, &tr->groups,
                            cfg->fp16.enabled ? zero_loss_scaler(tr->zero) : NULL};
    ckpt_policy_init(&tr->ckpt, &target);
    ckpt_policy_resume(&tr->ckpt, &tr->prog);
    job_log_start(tr->prog.step, cfg->run.steps, parallel_local_size(), comm_node_cpus(), tr->threads);
    job_log_progress(tr->prog.step, tr->ckpt.last_saved);
    train_log_open(&tr->log, cfg, tr->rank == 0, tr->data.lens, tr->data.n);
    step_monitor_open(&tr->mon, cfg, &tr->be, tr->threads, &tr->groups);
    tr->watchdog = watchdog_start(&cfg->monitor, cfg->run.run_dir, tr->rank, tr->world);

    tr->code = FB_EXIT_OK;
    tr->t_start = timer_now();
    tr->first_step = tr->prog.step;
    if (tr->groups.tp_size > 1)
        comm_stats_reset(tr->groups.tp);
    /* a signal during the start-up (loading, resuming): nothing trained yet,
     * so nothing new to save; the run ends before its first step */
    if (tr->prog.step < cfg->run.steps && (tr->sig = preempt_agree()) != 0) {
        if (tr->rank == 0)
            printf("fabula: preempted (%s) before step %ld: nothing new to save (%s), exit %d\n",
                   preempt_signal_name(tr->sig), tr->prog.step + 1,
                   tr->prog.step > 0 ? "the checkpoint of that step stands" : "no step was trained",
                   FB_EXIT_PREEMPTED);
        tr->code = FB_EXIT_PREEMPTED;
    }
    return tr;
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

/* fp16: the scaler skipped this step; every rank counts the same ones
 * (trainer_report_skipped). */
static void step_skipped(trainer_t *tr, const step_record_t *rec, double scale)
{
    tr->skipped++;
    /* kept below 2^62 so that its negation fits (trainer_report_skipped) */
    tr->skip_hash = (int64_t)(((uint64_t)tr->skip_hash * 1000003u + (uint64_t)rec->step) & ((1ULL << 62) - 1));
    if (tr->rank == 0)
        printf("fabula: step %ld: gradient overflow at loss scale %g: step skipped, scale now %g\n", rec->step,
               scale, loss_scale_value(zero_loss_scaler(tr->zero)));
}

int trainer_step(trainer_t *tr, step_record_t *rec)
{
    const config_t *cfg = tr->cfg;
    if (tr->code != FB_EXIT_OK || tr->prog.step >= cfg->run.steps)
        return 0;
    const long step = tr->prog.step;
    memset(rec, 0, sizeof *rec);
    rec->step = step + 1;
    const double t0 = timer_now(), c0 = timer_process_cpu();
    heartbeat_step_begin(rec->step);
    step_monitor_begin(&tr->mon);
    zero_begin_step(tr->zero);
    trainer_forward_backward(tr, step, rec);
    TIMED(tr, PHASE_BACKWARD, zero_end_backward(tr->zero));
    rec->lr = schedule_lr(&cfg->sched, &cfg->optim, zero_step_count(tr->zero));
    zero_step_report_t zs;
    TIMED(tr, PHASE_OPTIMIZER, zs = zero_step(tr->zero, rec->lr, rec->loss));
    rec->grad_norm = zs.grad_norm;
    rec->loss_scale = zs.loss_scale;
    if (zs.status == ZERO_STEP_DIVERGED) {
        snprintf(tr->message, sizeof tr->message, "step %ld: loss %g, gradient norm %g: training diverged",
                 rec->step, rec->loss, rec->grad_norm);
        if (tr->rank == 0)
            fprintf(stderr, "fabula: error: %s\n", tr->message);
        tr->code = FB_EXIT_DIVERGED;
        return 0;
    }
    if (zs.status == ZERO_STEP_SKIPPED) {
        rec->skipped = 1;
        step_skipped(tr, rec, zs.loss_scale);
    }
    rec->step_time = timer_now() - t0;
    rec->step_cpu_time = timer_process_cpu() - c0;
    if (tr->pipe) {
        tr->pipe_wait += pipeline_take_wait(tr->pipe);
        tr->pipe_time += rec->step_time;
    }
    const step_monitor_step_t ms = {rec->step, rec->step_time, rec->step_cpu_time, rec->model_flops, rec->imbalance,
                                    (long)tr->plan.bins, tr->plan.nbins_max, tr->plan.max_len};
    step_monitor_end(&tr->mon, &ms, &tr->mrep);
    heartbeat_step_end();
    watchdog_step_done(tr->watchdog, timer_now() - t0);
    rec->mon = &tr->mrep;
    rec->valid_lm_loss = NAN;
    if (cfg->run.eval_interval > 0 && (rec->step % cfg->run.eval_interval == 0 || rec->step == cfg->run.steps)) {
        evaluate(tr, &tr->valid_result);
        rec->valid_lm_loss = tr->valid_result.lm_loss;
        rec->valid = &tr->valid_result;
    }
    rec->elapsed = timer_now() - tr->t_start;
    train_log_step(&tr->log, rec);
    train_tboard_histograms(&tr->log.tb, tr->zero, rec->step, !rec->skipped);
    tr->prog.step = step + 1;
    tr->prog.tokens_seen += rec->tokens;
    job_log_progress(tr->prog.step, tr->ckpt.last_saved);
    tr->sig = preempt_agree();
    if (tr->sig) {
        ckpt_policy_save(&tr->ckpt, &tr->prog);
        job_log_progress(tr->prog.step, tr->ckpt.last_saved);
        if (tr->rank == 0)
            printf("fabula: preempted (%s): checkpoint of step %ld written, exit %d\n", preempt_signal_name(tr->sig),
                   tr->prog.step, FB_EXIT_PREEMPTED);
        tr->code = FB_EXIT_PREEMPTED;
        return 1;
    }
    PHASE_BEGIN(PHASE_CHECKPOINT);
    ckpt_policy_step_done(&tr->ckpt, &tr->prog);
    PHASE_END(PHASE_CHECKPOINT);
    job_log_progress(tr->prog.step, tr->ckpt.last_saved);
    return 1;
}

int trainer_close(trainer_t *tr)
{
    const config_t *cfg = tr->cfg;
    const int code = tr->code;
    if (code == FB_EXIT_OK) {
        ckpt_policy_save_final(&tr->ckpt, &tr->prog);
        job_log_progress(tr->prog.step, tr->ckpt.last_saved);
    }
    trainer_report_skipped(tr);
    trainer_report_tp_comm(tr);
    train_log_close(&tr->log, code);
    step_monitor_close(&tr->mon);
    watchdog_stop(&tr->watchdog);
    job_log_end(code, tr->sig, tr->message[0] ? tr->message : NULL);
    if (tr->pipe)
        trainer_report_pipeline(tr);
    pipeline_free(tr->pipe);
    free(tr->mb_tokens);

    free(tr->routed);
    free(tr->aux_freq);
    moe_metrics_free(&tr->moe);
    step_plan_free(&tr->plan);
    batch_free(&tr->batch);
    zero_free(tr->zero);
    groups_free(&tr->groups);
    backend_close(&tr->be);
    data_source_close(&tr->data);
    if (cfg->run.eval_interval > 0)
        data_source_close(&tr->valid);
    if (cfg == &tr->grown)
        free(tr->grown.effective_json);
    free(tr);
    return code;
}

int trainer_run(const config_t *cfg) { return trainer_run_losses(cfg, NULL); }

int trainer_run_losses(const config_t *cfg, double *losses)
{
    trainer_t *tr = trainer_open(cfg);
    step_record_t rec;
    while (trainer_step(tr, &rec))
        if (losses)
            losses[rec.step - 1] = rec.loss;
    return trainer_close(tr);
}
