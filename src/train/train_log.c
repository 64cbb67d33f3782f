#include "train/train_log.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/bytetok.h"
#include "model/params.h"
#include "util/error.h"

void train_log_open(train_log_t *log, const config_t *cfg, int active)
{
    memset(log, 0, sizeof *log);
    log->cfg = cfg;
    log->active = active;
    if (active)
        log->metrics = metrics_open(cfg->run.run_dir);
    train_tboard_open(&log->tb, cfg, active);
}

static void format_eta(char *buf, size_t n, double seconds)
{
    long s = (long)(seconds + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
}

static json_t *expert_tokens_json(const config_t *cfg, const long *counts)
{
    const model_config_t *mc = &cfg->model;
    json_t *layers = json_array();
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        if (!model_layer_is_moe(mc, l))
            continue;
        json_t *row = json_array();
        for (int e = 0; e < mc->num_local_experts; e++)
            json_array_append_new(row, json_integer(counts[(size_t)l * mc->num_local_experts + e]));
        json_array_append_new(layers, row);
    }
    return layers;
}

/* [{"tokens_min":..,"tokens_mean":..,"tokens_max":..,"dropped":..,"aux":..,"z":..}]
 * per MoE layer, expert loads from the kept tokens of the step. */
static json_t *moe_layers_json(const config_t *cfg, const long *counts, const moe_metrics_t *mm)
{
    const model_config_t *mc = &cfg->model;
    const int E = mc->num_local_experts;
    json_t *layers = json_array();
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        if (!model_layer_is_moe(mc, l))
            continue;
        const long *c = counts + (size_t)l * E;
        long lo = c[0], hi = c[0], sum = 0;
        for (int e = 0; e < E; e++) {
            lo = c[e] < lo ? c[e] : lo;
            hi = c[e] > hi ? c[e] : hi;
            sum += c[e];
        }
        json_t *o = json_object();
        json_object_set_new(o, "tokens_min", json_integer(lo));
        json_object_set_new(o, "tokens_mean", json_real((double)sum / E));
        json_object_set_new(o, "tokens_max", json_integer(hi));
        json_object_set_new(o, "dropped", json_integer(mm->dropped[l]));
        json_object_set_new(o, "aux", json_real(mm->aux[l]));
        json_object_set_new(o, "z", json_real(mm->z[l]));
        json_array_append_new(layers, o);
    }
    return layers;
}

/* {"romance": [[per expert] per MoE layer], ...}: the genres present in the
 * step only, so the line stays short. */
static json_t *genre_experts_json(const config_t *cfg, const moe_metrics_t *mm)
{
    const model_config_t *mc = &cfg->model;
    json_t *genres = json_object();
    for (int g = 0; g < mm->ntags; g++) {
        const long *base = mm->tag_tokens + (size_t)g * mm->L * mm->E;
        long any = 0;
        for (size_t i = 0; i < (size_t)mm->L * mm->E; i++)
            any |= base[i];
        const char *name = bytetok_genre_name(g);
        if (!any || !name)
            continue;
        json_t *layers = json_array();
        for (int l = 0; l < mm->L; l++) {
            if (!model_layer_is_moe(mc, l))
                continue;
            json_t *row = json_array();
            for (int e = 0; e < mm->E; e++)
                json_array_append_new(row, json_integer(base[(size_t)l * mm->E + e]));
            json_array_append_new(layers, row);
        }
        json_object_set_new(genres, name, layers);
    }
    return genres;
}

void train_log_step(train_log_t *log, const step_record_t *r)
{
    if (!log->active)
        return;
    const config_t *cfg = log->cfg;
    if (log->steps_logged == 0)
        log->first_loss = r->loss;
    log->last_loss = r->loss;
    log->steps_logged++;
    log->tokens_total += (double)r->tokens;
    log->time_total += r->step_time;
    const double tps = r->tokens / (r->step_time > 0 ? r->step_time : 1e-9);

    json_t *j = json_object();
    json_object_set_new(j, "step", json_integer(r->step));
    json_object_set_new(j, "loss", json_real(r->loss));
    json_object_set_new(j, "lm_loss", json_real(r->lm_loss));
    json_object_set_new(j, "aux_loss", json_real(r->aux_loss));
    json_object_set_new(j, "z_loss", json_real(r->z_loss));
    if (!isnan(r->valid_lm_loss))
        json_object_set_new(j, "valid_lm_loss", json_real(r->valid_lm_loss));
    json_object_set_new(j, "lr", json_real(r->lr));
    /* JSON has no inf: an overflowed fp16 step's norm is null */
    json_object_set_new(j, "grad_norm", isfinite(r->grad_norm) ? json_real(r->grad_norm) : json_null());
    if (log->cfg->fp16.enabled) {
        json_object_set_new(j, "loss_scale", json_real(r->loss_scale));
        json_object_set_new(j, "skipped", json_boolean(r->skipped));
    }
    json_object_set_new(j, "tokens", json_integer(r->tokens));
    json_object_set_new(j, "samples", json_integer(r->samples));
    json_object_set_new(j, "imbalance", json_real(r->imbalance));
    json_object_set_new(j, "packing", json_real(r->packing));
    json_object_set_new(j, "max_len", json_integer(r->max_len));
    json_object_set_new(j, "tokens_per_s", json_real(tps));
    json_object_set_new(j, "step_time", json_real(r->step_time));
    json_object_set_new(j, "elapsed", json_real(r->elapsed));
    if (cfg->model.num_local_experts > 1) {
        json_object_set_new(j, "dropped", json_integer(r->dropped));
        json_object_set_new(j, "expert_tokens", expert_tokens_json(cfg, r->expert_tokens));
        if (r->moe && r->moe->E > 0) {
            json_object_set_new(j, "moe_layers", moe_layers_json(cfg, r->expert_tokens, r->moe));
            json_object_set_new(j, "genre_expert_tokens", genre_experts_json(cfg, r->moe));
        }
        if (r->moe && r->moe->ep_size > 1) {
            json_t *a = json_object();
            json_object_set_new(a, "calls", json_integer(r->moe->a2a_calls));
            json_object_set_new(a, "bytes", json_real(r->moe->a2a_bytes));
            json_object_set_new(a, "seconds", json_real(r->moe->a2a_seconds));
            json_object_set_new(j, "ep_alltoall", a);
        }
    }
    metrics_write(log->metrics, j);
    /* last: whatever the record holds by now becomes a scalar */
    train_tboard_scalars(&log->tb, j, r->step);
    json_decref(j);

    const long steps = cfg->run.steps;
    if (r->step == 1 || r->step % cfg->run.steps_per_print == 0 || r->step == steps) {
        char eta[32];
        /* a resumed run starts at a later step: rate from this run's steps */
        const double done = (double)log->steps_logged;
        format_eta(eta, sizeof eta, (double)(steps - r->step) * (r->elapsed / done));
        printf("step %*ld/%ld | loss %.4f (lm %.4f aux %.3f z %.3f) | lr %.3e | grad norm %.3f | "
               "%.0f tok/s | %.3f s/step | ETA %s\n",
               (int)snprintf(NULL, 0, "%ld", steps), r->step, steps, r->loss, r->lm_loss, r->aux_loss,
               r->z_loss, r->lr, r->grad_norm, tps, r->step_time, eta);
        fflush(stdout);
    }
    if (!isnan(r->valid_lm_loss)) {
        printf("step %ld | validation lm loss %.4f\n", r->step, r->valid_lm_loss);
        fflush(stdout);
    }
}

void train_log_close(train_log_t *log, int exit_code)
{
    if (!log->active) {
        train_tboard_close(&log->tb);
        return;
    }
    if (log->steps_logged > 0)
        printf("fabula: %s after %ld steps: loss %.4f -> %.4f, %.0f tokens/s on average, %.1f s\n",
               exit_code == 0 ? "done" : "stopped", log->steps_logged, log->first_loss, log->last_loss,
               log->tokens_total / (log->time_total > 0 ? log->time_total : 1e-9), log->time_total);
    fflush(stdout);
    metrics_close(log->metrics);
    log->metrics = NULL;
    train_tboard_close(&log->tb);
}
