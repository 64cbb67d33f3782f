/* The config and layout table (report/config_table.h). */
#include "report/config_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"

/* The keys shown, by what an engineer asks first: how the ranks are laid
 * out, how the optimizer steps, then the model and the data. */
static const char *const layout_keys[] = {
    "parallel.tensor_parallel_size", "parallel.pipeline_parallel_size", "parallel.virtual_pipeline_stages",
    "parallel.sequence_parallel", "parallel.expert_parallel_size", "zero_optimization.stage",
    "zero_optimization.offload_optimizer.device", "zero_optimization.overlap_comm"};
static const char *const optimizer_keys[] = {
    "optimizer.type", "optimizer.params.lr", "optimizer.params.betas", "optimizer.params.weight_decay",
    "scheduler.type", "scheduler.params.warmup_num_steps", "scheduler.params.warmup_min_lr",
    "scheduler.params.warmup_max_lr", "scheduler.params.total_num_steps", "gradient_clipping"};
static const char *const precision_keys[] = {"run.backend", "bf16.enabled", "fp16.enabled", "fp16.loss_scale",
                                             "fp16.initial_scale_power"};
static const char *const model_keys[] = {
    "model.num_hidden_layers", "model.hidden_size", "model.num_attention_heads", "model.num_key_value_heads",
    "model.intermediate_size", "model.num_local_experts", "model.num_experts_per_tok", "model.capacity_factor",
    "model.router_aux_loss_coef", "model.router_z_loss_coef", "model.vocab_size", "data.seq_len",
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "run.steps",
    "run.seed", "data.corpus", "data.train", "data.sampler", "data.packing"};

/* A number in the fewest significant digits that read back as the same
 * double: 0.003, not jansson's 0.0030000000000000001. */
static void put_real(strbuf_t *b, double v)
{
    char t[40];
    for (int p = 15; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v)
            break;
    }
    sb_printf(b, "%s", t);
}

static void put_value(strbuf_t *b, json_t *v)
{
    if (json_is_string(v)) {
        sb_xml(b, json_string_value(v));
    } else if (json_is_integer(v)) {
        sb_printf(b, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        put_real(b, json_real_value(v));
    } else if (json_is_boolean(v)) {
        sb_printf(b, "%s", json_is_true(v) ? "true" : "false");
    } else if (json_is_array(v)) {
        sb_printf(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            sb_printf(b, "%s", i ? ", " : "");
            put_value(b, json_array_get(v, i));
        }
        sb_printf(b, "]");
    } else {
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        sb_xml(b, text ? text : "?");
        free(text);
    }
}

static void rows(strbuf_t *b, json_t *cfg, const char *const *keys, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        json_t *v = report_get(cfg, keys[k]);
        if (!v || json_is_null(v))
            continue;
        sb_printf(b, "<tr><th>%s</th><td>", keys[k]);
        put_value(b, v);
        sb_printf(b, "</td></tr>\n");
    }
}

/* A heading row inside the table. */
static void group(strbuf_t *b, const char *name)
{
    sb_printf(b, "<tr><th colspan=\"2\" class=\"group\">%s</th></tr>\n", name);
}

static const char *str(json_t *cfg, const char *path)
{
    json_t *v = report_get(cfg, path);
    return v && json_is_string(v) ? json_string_value(v) : "";
}

static int on(json_t *cfg, const char *path) { return json_is_true(report_get(cfg, path)); }

/* The precision the run asked for and the dtype its kernels stored
 * (docs/mixed-precision.md): the CPU backend computes in fp32 whatever
 * the blocks say; CUDA and cpu16 in bf16 unless fp16 is enabled. */
static void precision_rows(strbuf_t *b, json_t *cfg)
{
    const char *backend = str(cfg, "run.backend");
    const int fp16 = on(cfg, "fp16.enabled"), bf16 = on(cfg, "bf16.enabled");
    const int gpu_like = !strcmp(backend, "cuda") || !strcmp(backend, "cpu16");
    double fixed = 0, power = 16;
    report_num(cfg, "fp16.loss_scale", &fixed);
    report_num(cfg, "fp16.initial_scale_power", &power);
    sb_printf(b, "<tr><th>precision</th><td>");
    if (fp16 && fixed > 0)
        sb_printf(b, "fp16, loss scale fixed at %g", fixed);
    else if (fp16)
        sb_printf(b, "fp16, dynamic loss scale from 2^%.0f", power);
    else if (bf16)
        sb_printf(b, "bf16");
    else if (gpu_like)
        sb_printf(b, "bf16 (run.backend's default)");
    else if (!strcmp(backend, "auto"))
        sb_printf(b, "bf16 on CUDA, fp32 on the CPU (run.backend auto)");
    else
        sb_printf(b, "fp32");
    sb_printf(b, "</td></tr>\n<tr><th>compute dtype</th><td>");
    if (gpu_like)
        sb_printf(b, "%s", fp16 ? "fp16" : "bf16");
    else if (!strcmp(backend, "auto"))
        sb_printf(b, "%s on CUDA, fp32 on the CPU", fp16 ? "fp16" : "bf16");
    else
        sb_printf(b, "fp32");
    sb_printf(b, "; master weights, gradients and optimizer state fp32</td></tr>\n");
}

void config_table(strbuf_t *b, const report_run_t *r)
{
    json_t *cfg = r->config;
    if (!cfg) {
        html_note(b, "No config.json in the run directory: no config or layout.");
        return;
    }
    sb_printf(b, "<table class=\"layout\">\n");
    const int world = report_world(r);
    double tp = 1, pp = 1;
    report_num(cfg, "parallel.tensor_parallel_size", &tp);
    report_num(cfg, "parallel.pipeline_parallel_size", &pp);
    group(b, "Layout");
    if (world > 0) {
        sb_printf(b, "<tr><th>ranks</th><td>%d</td></tr>\n", world);
        /* world = pp x dp x tp (docs/parallel.md) */
        if (tp >= 1 && pp >= 1)
            sb_printf(b, "<tr><th>dp</th><td>%.0f</td></tr>\n", world / (tp * pp));
    }
    rows(b, cfg, layout_keys, sizeof layout_keys / sizeof *layout_keys);
    group(b, "Optimizer");
    rows(b, cfg, optimizer_keys, sizeof optimizer_keys / sizeof *optimizer_keys);
    group(b, "Precision");
    precision_rows(b, cfg);
    rows(b, cfg, precision_keys, sizeof precision_keys / sizeof *precision_keys);
    group(b, "Model, batch and data");
    rows(b, cfg, model_keys, sizeof model_keys / sizeof *model_keys);
    sb_printf(b, "</table>\n");
    char *all = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    sb_printf(b, "<details><summary>config.json</summary>\n");
    html_pre(b, all ? all : "");
    sb_printf(b, "</details>\n");
    free(all);
}
