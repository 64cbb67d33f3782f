#include "train/train_log.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/bytetok.h"
#include "model/params.h"
#include "util/error.h"

void train_log_open(train_log_t *log, const config_t *cfg, int active, const int64_t *lens, int64_t n)
{
    memset(log, 0, sizeof *log);
    log->cfg = cfg;
    log->active = active;
    if (active) {
        log->metrics = metrics_open(cfg->run.run_dir);
        eta_init(&log->eta, cfg, lens, n);
    }
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

/* [{"tokens_min":..,"tokens_mean":..,"tokens_max":..,"dropped":..,"aux":..,"z":..,
 *   "microbatches":..,"kept_share_mean":..,"kept_share_sd":..}]
 * per MoE layer, expert loads from the kept tokens of the step. */
static json_t *moe_layers_json(const config_t *cfg, const moe_metrics_t *mm)
{
    const long *counts = mm->expert_tokens;
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
        /* the spread over the step's micro-batches of the share of their
         * assignments kept (the sample standard deviation) */
        const double n = mm->kept_share[3 * l], ks = mm->kept_share[3 * l + 1], sq = mm->kept_share[3 * l + 2];
        if (n >= 1) {
            json_object_set_new(o, "microbatches", json_integer((json_int_t)n));
            json_object_set_new(o, "kept_share_mean", json_real(ks / n));
        }
        if (n >= 2)
            json_object_set_new(o, "kept_share_sd", json_real(sqrt(fmax(0.0, (sq - ks * ks / n) / (n - 1)))));
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

/* {"data": s, "forward": s, ...} in phase order. */
static json_t *phases_json(const double *v)
{
    json_t *o = json_object();
    for (int p = 0; p < PHASE_COUNT; p++)
        json_object_set_new(o, phase_name(p), json_real(v[p]));
    return o;
}

/* prefix + "instructions", "cycles", "ipc", and with `llc` "llc_misses"
 * and "llc_mpki" (LLC misses per thousand instructions). */
static void counters_json(json_t *e, const char *prefix, const double v[COUNTER_EVENTS], int llc)
{
    char key[48];
    snprintf(key, sizeof key, "%sinstructions", prefix);
    json_object_set_new(e, key, json_real(v[COUNTER_INS]));
    snprintf(key, sizeof key, "%scycles", prefix);
    json_object_set_new(e, key, json_real(v[COUNTER_CYC]));
    snprintf(key, sizeof key, "%sipc", prefix);
    json_object_set_new(e, key, json_real(counters_ipc(v[COUNTER_INS], v[COUNTER_CYC])));
    if (!llc)
        return;
    snprintf(key, sizeof key, "%sllc_misses", prefix);
    json_object_set_new(e, key, json_real(v[COUNTER_LLC]));
    snprintf(key, sizeof key, "%sllc_mpki", prefix);
    json_object_set_new(e, key, json_real(counters_per_kilo_ins(v[COUNTER_LLC], v[COUNTER_INS])));
}

static json_t *ranks_json(const monitor_report_t *m)
{
    const ranks_summary_t *rs = &m->ranks;
    const span_over_ranks_t *s = &rs->step;
    json_t *o = json_object();
    json_object_set_new(o, "world", json_integer(rs->world));
    json_object_set_new(o, "step_time_min", json_real(s->step_min));
    json_object_set_new(o, "step_time_mean", json_real(s->step_mean));
    json_object_set_new(o, "step_time_max", json_real(s->step_max));
    json_object_set_new(o, "busy_min", json_real(s->busy_min));
    json_object_set_new(o, "busy_mean", json_real(s->busy_mean));
    json_object_set_new(o, "busy_max", json_real(s->busy_max));
    json_object_set_new(o, "slowest_rank", json_integer(s->slowest_rank));
    if (s->cpu_share_min >= 0) {
        json_object_set_new(o, "cpu_share_min", json_real(s->cpu_share_min));
        json_object_set_new(o, "cpu_share_max", json_real(s->cpu_share_max));
        json_object_set_new(o, "cpu_share_min_rank", json_integer(s->cpu_share_min_rank));
    }
    json_t *wg = json_object();
    for (int g = 0; g < MONITOR_NGROUPS; g++)
        json_object_set_new(wg, monitor_group_name(g), json_real(s->group_wait_mean[g]));
    json_object_set_new(o, "wait_mean", wg);
    json_object_set_new(o, "rss_max_bytes", json_integer((json_int_t)rs->rss_max));
    if (m->device)
        json_object_set_new(o, "device_mem_max_bytes", json_integer((json_int_t)rs->device_max));
    json_object_set_new(o, "time_min", phases_json(s->min));
    json_object_set_new(o, "time_median", phases_json(s->median));
    json_object_set_new(o, "time_mean", phases_json(s->mean));
    json_object_set_new(o, "time_max", phases_json(s->max));
    json_t *mr = json_object();
    for (int p = 0; p < PHASE_COUNT; p++)
        json_object_set_new(mr, phase_name(p), json_integer(s->max_rank[p]));
    json_object_set_new(o, "time_max_rank", mr);
    if (s->counted) {
        /* PAPI where the hardware counts: per phase, summed over ranks */
        json_t *c = json_object();
        for (int p = 0; p < PHASE_COUNT; p++) {
            const counter_sums_t *k = &s->ctr[p];
            if (k->main[COUNTER_CYC] <= 0)
                continue;
            json_t *e = json_object();
            counters_json(e, "", k->main, s->llc);
            if (s->team_threads > 0)
                counters_json(e, "team_", k->team, s->llc);
            json_object_set_new(c, phase_name(p), e);
        }
        json_object_set_new(o, "counters", c);
        if (s->team_threads > 0)
            json_object_set_new(o, "counters_team_threads", json_integer(s->team_threads));
    }
    if (rs->have_gpu) {
        json_t *g = json_object();
        json_object_set_new(g, "util_min", json_real(rs->gpu_util_min));
        json_object_set_new(g, "util_mean", json_real(rs->gpu_util_mean));
        json_object_set_new(g, "mem_used_max_bytes", json_integer((json_int_t)rs->gpu_mem_used_max));
        json_object_set_new(g, "mem_total_bytes", json_integer((json_int_t)rs->gpu_mem_total));
        json_object_set_new(g, "temp_max_c", json_real(rs->gpu_temp_max));
        json_object_set_new(g, "power_sum_w", json_real(rs->gpu_power_sum));
        json_object_set_new(g, "sm_clock_min_mhz", json_real(rs->gpu_sm_mhz_min));
        json_object_set_new(o, "gpu", g);
    }
    return o;
}

static json_t *bottleneck_json(const bottleneck_t *b)
{
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(b->verdict));
    json_object_set_new(o, "evidence", json_string(b->evidence));
    json_object_set_new(o, "advice", json_string(b->advice));
    return o;
}

static void monitor_json(json_t *j, const monitor_report_t *m)
{
    json_object_set_new(j, "time", phases_json(m->time));
    json_object_set_new(j, "model_flops", json_real(m->model_flops));
    json_object_set_new(j, "model_flops_per_s", json_real(m->flops_per_s));
    if (m->mfu >= 0)
        json_object_set_new(j, "mfu", json_real(m->mfu));
    json_object_set_new(j, "rss_bytes", json_integer((json_int_t)m->rss));
    json_object_set_new(j, "monitor_overhead_s", json_real(m->overhead));
    if (m->gathered) {
        json_object_set_new(j, "ranks", ranks_json(m));
        json_object_set_new(j, "bottleneck", bottleneck_json(&m->bottleneck));
    }
}

/* The breakdown line of a gathered step (monitor.verbose,
 * wall_clock_breakdown): the split of the step (mean over ranks) with the
 * spread over ranks. */
static void monitor_print_breakdown(const monitor_report_t *m)
{
    static const char *const shortname[PHASE_COUNT] = {"data", "fwd", "bwd", "comm", "opt", "ckpt", "imb"};
    const span_over_ranks_t *s = &m->ranks.step;
    const double iter = s->step_mean + s->mean[PHASE_CHECKPOINT];
    char split[256];
    size_t n = 0;
    for (int p = 0; p < PHASE_COUNT && n < sizeof split; p++)
        n += (size_t)snprintf(split + n, sizeof split - n, "%s%s %.1f%%", p ? " " : "", shortname[p],
                              iter > 0 ? 100.0 * s->mean[p] / iter : 0.0);
    char mfu[48] = "";
    if (m->mfu >= 0)
        snprintf(mfu, sizeof mfu, ", MFU %.1f%%", 100.0 * m->mfu);
    printf("  time %s | step min/mean/max %.3f/%.3f/%.3f s, slowest rank %d | %.3g GFLOP/s%s | rss %.0f MiB\n",
           split, s->step_min, s->step_mean, s->step_max, s->slowest_rank, m->flops_per_s / 1e9, mfu,
           m->ranks.rss_max / 1048576.0);
}

/* Whether two texts differ only in their numbers (digits and the points
 * between them): the same verdict with the same advice, measured again. */
static int same_but_numbers(const char *a, const char *b)
{
    for (;;) {
        const int da = (*a >= '0' && *a <= '9'), db = (*b >= '0' && *b <= '9');
        if (da && db) {
            while ((*a >= '0' && *a <= '9') || *a == '.')
                a++;
            while ((*b >= '0' && *b <= '9') || *b == '.')
                b++;
            continue;
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        a++;
        b++;
    }
}

/* The verdict line, in full: with monitor.verbose at every gather; else
 * once, and again whenever the verdict or its advice changes (the step
 * line carries the verdict's name every print step). */
static void monitor_print_verdict(train_log_t *log, const monitor_report_t *m, int verbose)
{
    char key[sizeof log->shown_verdict];
    snprintf(key, sizeof key, "%s; %s", m->bottleneck.verdict, m->bottleneck.advice);
    if (!verbose && log->shown_verdict[0] && same_but_numbers(key, log->shown_verdict))
        return;
    snprintf(log->shown_verdict, sizeof log->shown_verdict, "%s", key);
    printf("  bottleneck: %s (%s); %s\n", m->bottleneck.verdict, m->bottleneck.evidence, m->bottleneck.advice);
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
    /* the first step of a process allocates and faults in its memory: not
     * a step the rest of the run resembles */
    if (log->steps_logged > 1)
        eta_add(&log->eta, r->plan_cost, r->step_time);
    const double outside = (r->elapsed - log->time_total) / (double)log->steps_logged;
    double eta_s = eta_seconds(&log->eta, r->step, outside);
    if (log->steps_logged == 1) /* nothing to fit yet: this step's time per cost */
        eta_s = r->plan_cost > 0 ? r->elapsed / r->plan_cost * eta_cost_from(&log->eta, r->step)
                                 : (double)(cfg->run.steps - r->step) * r->elapsed;

    json_t *j = json_object();
    json_object_set_new(j, "step", json_integer(r->step));
    json_object_set_new(j, "loss", json_real(r->loss));
    json_object_set_new(j, "lm_loss", json_real(r->lm_loss));
    json_object_set_new(j, "aux_loss", json_real(r->aux_loss));
    json_object_set_new(j, "z_loss", json_real(r->z_loss));
    if (!isnan(r->valid_lm_loss))
        json_object_set_new(j, "valid_lm_loss", json_real(r->valid_lm_loss));
    if (r->valid)
        evaluate_json(j, r->valid);
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
    json_object_set_new(j, "step_cpu_time", json_real(r->step_cpu_time));
    json_object_set_new(j, "elapsed", json_real(r->elapsed));
    json_object_set_new(j, "eta_s", json_real(eta_s));
    if (config_model_is_moe(&cfg->model)) {
        json_object_set_new(j, "dropped", json_integer(r->dropped));
        if (r->moe && r->moe->E > 0) {
            json_object_set_new(j, "expert_tokens", expert_tokens_json(cfg, r->moe->expert_tokens));
            json_object_set_new(j, "moe_layers", moe_layers_json(cfg, r->moe));
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
    if (r->mon && r->mon->active)
        monitor_json(j, r->mon);
    metrics_write(log->metrics, j);
    /* last: whatever the record holds by now becomes a scalar */
    train_tboard_scalars(&log->tb, j, r->step);
    json_decref(j);

    const long steps = cfg->run.steps;
    const int verbose = cfg->monitor.verbose || cfg->monitor.wall_clock_breakdown;
    if (r->step == 1 || r->step % cfg->run.steps_per_print == 0 || r->step == steps) {
        char eta[32], parts[96] = "", mfu[32] = "", verdict[48] = "", scale[48] = "";
        format_eta(eta, sizeof eta, eta_s);
        if (verbose)
            snprintf(parts, sizeof parts, " (lm %.4f aux %.3f z %.3f)", r->lm_loss, r->aux_loss, r->z_loss);
        if (r->mon && r->mon->active && r->mon->mfu >= 0)
            snprintf(mfu, sizeof mfu, " | MFU %.1f%%", 100.0 * r->mon->mfu);
        if (r->mon && r->mon->gathered)
            snprintf(verdict, sizeof verdict, " | %s", r->mon->bottleneck.verdict);
        if (cfg->fp16.enabled)
            snprintf(scale, sizeof scale, " | scale %g%s", r->loss_scale, r->skipped ? " (skipped)" : "");
        printf("step %*ld/%ld | loss %.4f%s | lr %.3e | grad norm %.3f%s | %.0f tok/s | %.3f s/step%s%s | ETA %s\n",
               (int)snprintf(NULL, 0, "%ld", steps), r->step, steps, r->loss, parts, r->lr, r->grad_norm, scale, tps,
               r->step_time, mfu, verdict, eta);
        fflush(stdout);
    }
    if (r->mon && r->mon->gathered) {
        if (verbose)
            monitor_print_breakdown(r->mon);
        monitor_print_verdict(log, r->mon, verbose);
        fflush(stdout);
    }
    if (r->mon && r->mon->final) {
        log->final_mon = *r->mon;
        log->have_final = 1;
    }
    if (r->valid)
        evaluate_print(r->step, r->valid);
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
    if (log->have_final) {
        const monitor_report_t *m = &log->final_mon;
        const span_over_ranks_t *s = &m->ranks.total;
        const double iter = s->step_mean + s->mean[PHASE_CHECKPOINT];
        printf("fabula: monitor over the run:");
        for (int p = 0; p < PHASE_COUNT; p++)
            printf(" %s %.1f%%", phase_name(p), iter > 0 ? 100.0 * s->mean[p] / iter : 0.0);
        printf("; %.3g GFLOP/s", m->run_flops_per_s / 1e9);
        if (m->run_mfu >= 0)
            printf(", MFU %.1f%%", 100.0 * m->run_mfu);
        printf("\nfabula: bottleneck over the run: %s (%s); %s\n", m->run_bottleneck.verdict,
               m->run_bottleneck.evidence, m->run_bottleneck.advice);
    }
    fflush(stdout);
    metrics_close(log->metrics);
    log->metrics = NULL;
    eta_free(&log->eta);
    train_tboard_close(&log->tb);
}
