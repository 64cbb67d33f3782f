#include "train/train_log.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "model/params.h"
#include "util/error.h"

void train_log_open(train_log_t *log, const config_t *cfg, int active)
{
    memset(log, 0, sizeof *log);
    log->cfg = cfg;
    log->active = active;
    if (active)
        log->metrics = metrics_open(cfg->run.run_dir);
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
    json_object_set_new(j, "lr", json_real(r->lr));
    json_object_set_new(j, "grad_norm", json_real(r->grad_norm));
    json_object_set_new(j, "tokens", json_integer(r->tokens));
    json_object_set_new(j, "tokens_per_s", json_real(tps));
    json_object_set_new(j, "step_time", json_real(r->step_time));
    json_object_set_new(j, "elapsed", json_real(r->elapsed));
    if (cfg->model.num_local_experts > 1) {
        json_object_set_new(j, "dropped", json_integer(r->dropped));
        json_object_set_new(j, "expert_tokens", expert_tokens_json(cfg, r->expert_tokens));
    }
    metrics_write(log->metrics, j);
    json_decref(j);

    const long steps = cfg->run.steps;
    if (r->step == 1 || r->step % cfg->run.steps_per_print == 0 || r->step == steps) {
        char eta[32];
        format_eta(eta, sizeof eta, (double)(steps - r->step) * (r->elapsed / (double)r->step));
        printf("step %*ld/%ld | loss %.4f (lm %.4f aux %.3f z %.3f) | lr %.3e | grad norm %.3f | "
               "%.0f tok/s | %.3f s/step | ETA %s\n",
               (int)snprintf(NULL, 0, "%ld", steps), r->step, steps, r->loss, r->lm_loss, r->aux_loss,
               r->z_loss, r->lr, r->grad_norm, tps, r->step_time, eta);
        fflush(stdout);
    }
}

void train_log_close(train_log_t *log, int exit_code)
{
    if (!log->active)
        return;
    if (log->steps_logged > 0)
        printf("fabula: %s after %ld steps: loss %.4f -> %.4f, %.0f tokens/s on average, %.1f s\n",
               exit_code == 0 ? "done" : "stopped", log->steps_logged, log->first_loss, log->last_loss,
               log->tokens_total / (log->time_total > 0 ? log->time_total : 1e-9), log->time_total);
    fflush(stdout);
    metrics_close(log->metrics);
    log->metrics = NULL;
}
