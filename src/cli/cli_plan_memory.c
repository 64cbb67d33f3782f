/* fabula plan memory: per-rank bytes of a layout, without a model or MPI
 * (src/plan/plan_memory.c, docs/plan.md "Memory"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/cli_plan.h"
#include "config/config.h"
#include "plan/plan.h"
#include "model/config_resolve.h"
#include "util/error.h"

static void memory_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula plan memory (--layout SPEC | --world N) [options] [CONFIG.json ...]\n"
            "\n"
            "Per-rank bytes of parameters, gradients and optimizer state (device and\n"
            "host apart, by ZeRO stage and offload), ZeRO workspaces, activations of a\n"
            "micro-batch and of the micro-batches a pipeline holds, and the\n"
            "expert-parallel dispatch buffers, for the config's model and precision.\n"
            "For the layouts `fabula train` sizes alike (any dp, ep, ZeRO, tp with kv\n"
            "heads split or replicated, sequence parallelism, pp and interleaved stages,\n"
            "any recompute) the figures are the ones train prints at start (\"memory\n"
            "bytes:\", under pp one \"memory bytes stage S:\" line a stage); a layout whose\n"
            "sizes do not divide the model is a prediction by Megatron's rules\n"
            "(docs/plan.md).\n"
            "\n"
            "  --world N          N ranks laid out as train would: dp = N, tp = pp = 1,\n"
            "                     the config's ZeRO stage, offload and expert parallelism\n"
            "  --layout SPEC      [world=W,]dp=D,tp=T,pp=P[,ep=E][,zero=Z][,offload=none|optimizer|\n"
            "                     param|both][,sp][,recompute=none|selective|full][,vpp=V]\n"
            "                     [,tokens=TOKENS][,accum=G]; unset parts from the config\n"
            "                     (recompute: model.recompute)\n"
            "                     (world=W alone: dp = W / (tp pp))\n"
            "  --set KEY=VALUE    config override, as for train\n"
            "  --json             one JSON object instead of the table\n"
            "\n"
            "exit codes: 0 ok, 2 usage, config or a layout that does not divide the model\n");
}

static double mib(size_t b) { return b / 1048576.0; }

static void row(const char *what, size_t dev, size_t host)
{
    printf("  %-34s %12.2f %12.2f   %zu / %zu\n", what, mib(dev), mib(host), dev, host);
}

static const char *recompute_name(plan_recompute_t r)
{
    return r == PLAN_RECOMPUTE_FULL ? "full" : r == PLAN_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* Under pp, each stage's figures as train prints them ("memory bytes stage
 * S:" lines; JSON: "stage_lines", one object a stage). */
static void stage_lines(const config_t *cfg, const plan_layout_t *lay, int json)
{
    if (json)
        printf(",\"stage_lines\":[");
    for (int s = 0; s < lay->pp; s++) {
        plan_memory_t m;
        plan_memory_stage(cfg, lay, s, &m);
        const size_t params = m.params + m.host_params, optimizer = m.optimizer + m.host_optimizer;
        const size_t acts = m.activations_peak + m.moe_buffers;
        if (json)
            printf("%s{\"stage\":%d,\"params\":%zu,\"grads\":%zu,\"optimizer\":%zu,\"workspace\":%zu,"
                   "\"activations\":%zu,\"inflight_microbatches\":%zu,\"predicted\":%s,\"device_total\":%zu,"
                   "\"host_total\":%zu}",
                   s ? "," : "", s, params, m.grads + m.host_grads, optimizer, m.workspace_zero, acts, m.inflight_microbatches,
                   m.predicted ? "true" : "false", m.device_total, m.host_total);
        else
            printf("memory bytes stage %d: params=%zu grads=%zu optimizer=%zu workspace=%zu activations=%zu\n", s,
                   params, m.grads + m.host_grads, optimizer, m.workspace_zero, acts);
    }
    if (json)
        printf("]");
}

int cli_plan_memory(int argc, char **argv)
{
    enum { OPT_LAYOUT = 1, OPT_WORLD, OPT_SET, OPT_JSON };
    static const cli_option_t options[] = {
        {"layout", 0, 1, OPT_LAYOUT}, {"world", 0, 1, OPT_WORLD}, {"set", 0, 1, OPT_SET},
        {"json", 0, 0, OPT_JSON},     {0, 0, 0, 0},
    };
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    const char *spec = NULL;
    int nsets = 0, opt, world = 0, json = 0;
    cli_args_t args;
    cli_args_init(&args, "plan memory", memory_usage, options, 0, &argc, &argv);
    while ((opt = cli_args_next(&args)) != 0) {
        switch (opt) {
        case OPT_LAYOUT: spec = args.value; break;
        case OPT_WORLD: world = (int)cli_args_int(&args, 1, 1 << 24); break;
        case OPT_SET: sets[nsets++] = args.value; break;
        case OPT_JSON: json = 1; break;
        }
    }
    if (!spec == !world)
        cli_args_fail(&args, 1, "give exactly one of --layout SPEC and --world N");

    config_t cfg;
    config_plan_ranks_t ranks = {.world = world, .dp = 0};
    if (spec)
        plan_layout_spec_ranks(spec, &ranks);
    config_load_plan(&cfg, (const char *const *)args.positional, args.npositional, (const char *const *)sets, nsets,
                     &ranks, 1);
    model_config_resolve(&cfg, 0);
    free(sets);
    plan_layout_t lay;
    plan_layout_resolve(&cfg, spec, world, "fabula plan memory", &lay);
    cli_args_free(&args);

    plan_memory_t m;
    plan_memory(&cfg, &lay, &m);
    /* bf16/fp16 asked for, but the CPU backend computes in fp32 (as train
     * says at start): the plan is of that fp32 run, and says so */
    const char *asked = cfg.bf16_enabled ? "bf16" : cfg.fp16.enabled ? "fp16" : NULL;
    const int fp32_instead = asked && lay.act_bytes == 4;
    /* train's line: params and optimizer include their offloaded parts,
     * activations the expert-parallel buffers */
    const size_t params = m.params + m.host_params, optimizer = m.optimizer + m.host_optimizer;
    const size_t grads = m.grads + m.host_grads, weights16 = m.weight_copy + m.host_weight_copy;
    const size_t acts = m.activations_peak + m.moe_buffers;
    if (json) {
        printf("{\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"ep\":%d,\"zero\":%d,\"offload_optimizer\":%s,"
               "\"offload_param\":%s,\"sequence_parallel\":%s,\"recompute\":\"%s\",\"vpp\":%d,"
               "\"micro_batch_tokens\":%d,\"grad_accum\":%d,\"act_bytes\":%d,\"compute_dtype\":\"%s\","
               "\"stage\":%d,\"predicted\":%s,"
               "\"params\":%zu,\"grads\":%zu,\"optimizer\":%zu,\"host_params\":%zu,\"host_optimizer\":%zu,"
               "\"host_staging\":%zu,\"workspace\":%zu,\"comm_buckets\":%zu,\"weight_copy\":%zu,\"host_grads\":%zu,"
               "\"host_weight_copy\":%zu,\"activations\":%zu,"
               "\"inflight_microbatches\":%zu,\"activations_peak\":%zu,\"moe_buffers\":%zu,"
               "\"moe_buffers_capacity\":%zu,"
               "\"device_total\":%zu,\"host_total\":%zu,\"stage_device_max\":%zu,\"stage_host_max\":%zu,"
               "\"train_line\":{\"params\":%zu,\"grads\":%zu,\"optimizer\":%zu,\"workspace\":%zu,"
               "\"activations\":%zu,\"weights16\":%zu}",
               lay.world, lay.dp, lay.tp, lay.pp, lay.ep, lay.zero, lay.offload_optimizer ? "true" : "false",
               lay.offload_param ? "true" : "false", lay.sequence_parallel ? "true" : "false",
               recompute_name(lay.recompute), lay.virtual_stages, lay.micro_batch_tokens, lay.grad_accum,
               lay.act_bytes, lay.act_bytes == 4 ? "fp32" : cfg.fp16.enabled ? "fp16" : "bf16", m.stage,
               m.predicted ? "true" : "false", m.params, m.grads, m.optimizer,
               m.host_params, m.host_optimizer, m.host_staging, m.workspace_zero, m.comm_buckets, m.weight_copy,
               m.host_grads, m.host_weight_copy, m.activations, m.inflight_microbatches, m.activations_peak, m.moe_buffers, m.moe_buffers_capacity,
               m.device_total, m.host_total, m.stage_device_max, m.stage_host_max, params, grads, optimizer,
               m.workspace_zero, acts, weights16);
        if (lay.pp > 1)
            stage_lines(&cfg, &lay, 1);
        printf("}\n");
    } else {
        printf("fabula plan memory: world %d = dp %d x tp %d x pp %d, ep %d, ZeRO %d%s%s%s, recompute %s, vpp %d; "
               "micro-batches of %d tokens, %d accumulated, activations %d bytes an element\n",
               lay.world, lay.dp, lay.tp, lay.pp, lay.ep, lay.zero,
               lay.offload_optimizer ? ", optimizer offloaded" : "", lay.offload_param ? ", parameters offloaded" : "",
               lay.sequence_parallel ? ", sequence parallel" : "",
               recompute_name(lay.recompute), lay.virtual_stages, lay.micro_batch_tokens, lay.grad_accum,
               lay.act_bytes);
        if (fp32_instead)
            printf("note: %s.enabled, but run.backend \"%s\" computes in fp32 (as `fabula train` says at start): "
                   "planned as that fp32 run, 4 bytes an activation and no 16-bit weight copy; run.backend \"cuda\" "
                   "(or \"cpu16\") plans the 16-bit run\n",
                   asked, cfg.run.backend == RUN_BACKEND_AUTO ? "auto" : "cpu");
        printf("per rank%s:\n", lay.pp > 1 ? " (the fullest pipeline stage)" : "");
        if (lay.pp > 1)
            printf("  pipeline stage %d\n", m.stage);
        printf("  %-34s %12s %12s   %s\n", "", "device MiB", "host MiB", "bytes device / host");
        row("parameters (fp32)", m.params, m.host_params);
        row("gradients (fp32)", m.grads, m.host_grads);
        row("optimizer state (Adam m, v)", m.optimizer, m.host_optimizer);
        row("offload staging", 0, m.host_staging);
        row("ZeRO workspaces", m.workspace_zero, 0);
        row("reduction buckets in flight", m.comm_buckets, 0);
        row("16-bit weights", m.weight_copy, m.host_weight_copy);
        row("activations, one micro-batch", m.activations, 0);
        printf("  %-34s %12zu\n", "micro-batches in flight", m.inflight_microbatches);
        row("activations held at peak", m.activations_peak, 0);
        row("expert-parallel buffers at start", m.moe_buffers, 0);
        row("  grown to the configured capacity", m.moe_buffers_capacity, 0);
        row("total", m.device_total, m.host_total);
        if (m.predicted)
            printf("note: a layout train cannot build: these figures are predictions of the "
                   "Megatron-style implementation, not train's own sizing (docs/plan.md)\n");
        printf("memory bytes: params=%zu grads=%zu optimizer=%zu workspace=%zu activations=%zu weights16=%zu\n", params,
               grads, optimizer, m.workspace_zero, acts, weights16);
        if (lay.pp > 1)
            stage_lines(&cfg, &lay, 0);
    }
    config_free(&cfg);
    return 0;
}
