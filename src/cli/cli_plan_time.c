/* `fabula plan time`: one step's predicted time of a layout on a machine
 * file (src/plan/plan_time.c, docs/plan.md "Time"), broken down into
 * compute, each collective, the exposed communication, the pipeline bubble
 * and the imbalance the step plan leaves, from the sample lengths of a
 * corpus (the step plan run on them) or one given length. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/cli_plan.h"
#include "config/config.h"
#include "plan/plan.h"
#include "plan/plan_lengths.h"
#include "plan/plan_routing.h"
#include "model/config_resolve.h"
#include "util/error.h"

static void time_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula plan time [CONFIG.json ...] (--layout SPEC | --world N) --machine FILE\n"
            "                        [--jsonl FILE [--split windows|chapters] | --corpus-lengths FILE | --mean-len L]\n"
            "                        [--steps S] [--dropped F | --routing-from METRICS.jsonl] [--set K=V] [--json]\n"
            "\n"
            "Predicts one training step's time of the config's model in a layout (ZeRO\n"
            "stage, ep, overlap_comm, buckets and offload from the config unless the spec\n"
            "says) on the machine file (docs/plan.md, \"Machine files\"): compute from the\n"
            "model FLOPs of the packed micro-batches at the machine's sustained FLOP/s,\n"
            "every collective of the step at its alpha-beta time (intra- or inter-node\n"
            "link by the group's span), the part overlap_comm hides, the pipeline\n"
            "bubble and the wait for the slowest rank (docs/plan.md, \"Time\").\n"
            "\n"
            "  --world N              N ranks laid out as train would: dp = N, tp = pp = 1\n"
            "  --layout SPEC          [world=W,]dp=D,tp=T,pp=P[,ep=E][,zero=Z][,offload=none|\n"
            "                         optimizer|param|both][,sp][,recompute=none|selective|full]\n"
            "                         [,vpp=V][,tokens=C][,accum=G] (as plan memory)\n"
            "  --machine FILE         machine file (inputs/machines/*.json)\n"
            "  --jsonl FILE           sample lengths from novels (byte tokenizer), the step\n"
            "                         plan run on them for --steps steps\n"
            "  --split windows|chapters  with --jsonl (default windows, the training samples)\n"
            "  --corpus-lengths FILE  sample lengths, one integer a line\n"
            "  --mean-len L           every sample L tokens (default data.seq_len)\n"
            "  --steps S              steps of the step-plan simulation (default 20)\n"
            "  --dropped F            share (0-1) of the top-k expert assignments that\n"
            "                         capacity drops, left out of the expert compute\n"
            "                         (default 0: every assignment computed)\n"
            "  --routing-from FILE    a run's metrics.jsonl (a short pilot of the config):\n"
            "                         the dropped share (the sum of \"dropped\" over the sum\n"
            "                         of \"tokens\" x top-k x MoE layers, every line) and,\n"
            "                         with ep > 1, the wait for the ep rank whose experts\n"
            "                         the router loads most (each line's \"expert_tokens\"),\n"
            "                         and with dp > 1 and ep 1 the wait for the rank whose\n"
            "                         micro-batches kept the most rows (the spread of\n"
            "                         \"moe_layers\" \"kept_share_sd\" over \"kept_share_mean\")\n"
            "                         (docs/plan.md, \"Capacity drops\", \"Routing\n"
            "                         imbalance\", \"Routing spread\"); --dropped-from is\n"
            "                         its older name\n"
            "  --set KEY=VALUE        config override, as for train\n"
            "  --json                 one JSON object instead of the table\n"
            "\n"
            "exit codes: 0 ok, 2 usage, config or machine file, 3 input data, 4 I/O\n");
}

static void print_json(const plan_layout_t *lay, const plan_machine_t *m, const plan_workload_t *w,
                       const plan_time_t *t)
{
    json_t *o = json_object(), *comm = json_object();
    json_object_set_new(o, "machine", json_string(m->name));
    json_object_set_new(o, "world", json_integer(lay->world));
    json_object_set_new(o, "dp", json_integer(lay->dp));
    json_object_set_new(o, "tp", json_integer(lay->tp));
    json_object_set_new(o, "pp", json_integer(lay->pp));
    json_object_set_new(o, "ep", json_integer(lay->ep));
    json_object_set_new(o, "zero", json_integer(lay->zero));
    json_object_set_new(o, "microbatches_per_rank", json_real(w->microbatches_per_rank));
    json_object_set_new(o, "tokens_per_microbatch", json_real(w->tokens_per_microbatch));
    json_object_set_new(o, "sum_len_sq_per_microbatch", json_real(w->sum_len_sq_per_microbatch));
    json_object_set_new(o, "imbalance", json_real(w->imbalance));
    json_object_set_new(o, "dropped", json_real(w->dropped));
    json_object_set_new(o, "routing_spread", json_real(w->routing_spread));
    json_object_set_new(o, "routing_spread_tokens", json_real(w->routing_spread_tokens));
    const struct { const char *k; double v; } f[] = {
        {"forward_s", t->forward_s},     {"backward_s", t->backward_s}, {"recompute_s", t->recompute_s},
        {"optimizer_s", t->optimizer_s}, {"offload_s", t->offload_s}, {"overhead_s", t->overhead_s},
        {"compute_s", t->compute_s},
        {"comm_s", t->comm_s},           {"comm_exposed_s", t->comm_exposed_s}, {"bubble_s", t->bubble_s},
        {"bubble_fraction", t->bubble_fraction}, {"imbalance_s", t->imbalance_s}, {"sync_s", t->sync_s},
        {"routing_s", t->routing_s}, {"routing_excess", t->routing_excess}, {"spread_s", t->spread_s},
        {"spread", t->spread}, {"step_s", t->step_s},
        {"tokens", t->tokens},           {"tokens_per_s", t->tokens_per_s}, {"flops", t->flops},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        json_object_set_new(o, f[i].k, json_real(f[i].v));
    for (int r = 0; r < PLAN_COMM_N; r++) {
        const plan_comm_t *c = &t->comm[r];
        json_t *x = json_object();
        json_object_set_new(x, "calls", json_real(c->calls));
        json_object_set_new(x, "bytes", json_real(c->bytes));
        json_object_set_new(x, "seconds", json_real(c->seconds));
        json_object_set_new(x, "exposed_s", json_real(c->exposed_s));
        json_object_set_new(x, "group", json_integer(c->group));
        json_object_set_new(x, "link", json_string(c->inter ? "inter" : "intra"));
        json_object_set_new(comm, plan_comm_role_name((plan_comm_role_t)r), x);
    }
    json_object_set_new(o, "comm", comm);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!s)
        fb_fatal(FB_EXIT_INTERNAL, "fabula plan time: out of memory for the JSON output");
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static void print_table(const plan_layout_t *lay, const plan_machine_t *m, const plan_workload_t *w,
                        const plan_time_t *t, const char *source)
{
    printf("machine: %s (%d ranks a node, %.4g TFLOP/s sustained, attention %.4g TFLOP/s, experts %.4g TFLOP/s)\n",
           m->name, m->devices_per_node, m->flops / 1e12,
           (m->attention_flops > 0 ? m->attention_flops : m->flops) / 1e12,
           (m->expert_flops > 0 ? m->expert_flops : m->flops) / 1e12);
    printf("layout: world %d = dp %d x tp %d x pp %d, ep %d, ZeRO %d\n", lay->world, lay->dp, lay->tp, lay->pp,
           lay->ep, lay->zero);
    printf("workload (%s): %.4g micro-batches per rank of %.1f tokens (mean), sum len^2 %.4g, imbalance %.3f%%, "
           "expert assignments dropped %.3f%%\n",
           source, w->microbatches_per_rank, w->tokens_per_microbatch, w->sum_len_sq_per_microbatch,
           100 * w->imbalance, 100 * w->dropped);
    printf("compute: %.6f s (forward %.6f, backward %.6f, recompute %.6f, optimizer %.6f, offload %.6f, "
           "overhead %.6f; %.4g GFLOP)\n", t->compute_s, t->forward_s, t->backward_s, t->recompute_s,
           t->optimizer_s, t->offload_s, t->overhead_s, t->flops / 1e9);
    printf("%-16s %10s %12s %6s %6s %12s %12s\n", "collective", "calls", "MiB", "group", "link", "seconds",
           "exposed");
    for (int r = 0; r < PLAN_COMM_N; r++) {
        const plan_comm_t *c = &t->comm[r];
        if (c->calls <= 0)
            continue;
        printf("%-16s %10.0f %12.3f %6d %6s %12.6f %12.6f\n", plan_comm_role_name((plan_comm_role_t)r), c->calls,
               c->bytes / 1048576.0, c->group, c->inter ? "inter" : "intra", c->seconds, c->exposed_s);
    }
    printf("comm: %.6f s, exposed %.6f s\n", t->comm_s, t->comm_exposed_s);
    printf("bubble: %.6f s (%.2f%%)\n", t->bubble_s, 100 * t->bubble_fraction);
    printf("imbalance: %.6f s\n", t->imbalance_s);
    printf("sync waits: %.6f s\n", t->sync_s);
    if (w->routing_spread > 0 && lay->dp > 1 && lay->ep == 1)
        printf("routing spread: %.6f s (the share of a micro-batch's expert assignments kept varies by %.2f%% of its "
               "mean at %.0f tokens a micro-batch; %.2f%% at %.0f; the slowest of %d data-parallel ranks)\n",
               t->spread_s, 100 * w->routing_spread, w->routing_spread_tokens, 100 * t->spread,
               w->tokens_per_microbatch, lay->dp);
    if (w->routing_loads && lay->ep > 1)
        printf("routing imbalance: %.6f s (the most loaded of %d ep ranks computes %.2f%% more expert rows than "
               "their mean, over %d recorded steps)\n", t->routing_s, lay->ep, 100 * t->routing_excess,
               w->routing_steps);
    printf("step: %.6f s, %.1f tokens/s (%.0f tokens a step)\n", t->step_s, t->tokens_per_s, t->tokens);
}

int cli_plan_time(int argc, char **argv)
{
    enum { OPT_WORLD = 1, OPT_LAYOUT, OPT_MACHINE, OPT_JSONL, OPT_SPLIT, OPT_LENGTHS, OPT_MEANLEN, OPT_STEPS, OPT_SET, OPT_JSON,
           OPT_DROPPED, OPT_DROPPED_FROM, OPT_ROUTING_FROM };
    static const cli_option_t options[] = {
        {"world", 0, 1, OPT_WORLD},         {"layout", 0, 1, OPT_LAYOUT},   {"machine", 0, 1, OPT_MACHINE},
        {"jsonl", 0, 1, OPT_JSONL},
        {"split", 0, 1, OPT_SPLIT},         {"corpus-lengths", 0, 1, OPT_LENGTHS},
        {"mean-len", 0, 1, OPT_MEANLEN},    {"steps", 0, 1, OPT_STEPS}, {"set", 0, 1, OPT_SET},
        {"json", 0, 0, OPT_JSON},           {"dropped", 0, 1, OPT_DROPPED}, {"dropped-from", 0, 1, OPT_DROPPED_FROM},
        {"routing-from", 0, 1, OPT_ROUTING_FROM}, {0, 0, 0, 0},
    };
    const char *spec = NULL, *machine = NULL, *jsonl = NULL, *lengths = NULL, *split = "windows", *dropped_from = NULL,
               *dropped_flag = "--routing-from";
    int world = 0, json = 0, nsets = 0, opt;
    long steps = 20;
    double mean_len = 0, dropped = -1;
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    cli_args_t args;
    cli_args_init(&args, "plan time", time_usage, options, 0, &argc, &argv);
    while ((opt = cli_args_next(&args)) != 0) {
        switch (opt) {
        case OPT_WORLD: world = (int)cli_args_int(&args, 1, 1 << 24); break;
        case OPT_LAYOUT: spec = args.value; break;
        case OPT_MACHINE: machine = args.value; break;
        case OPT_JSONL: jsonl = args.value; break;
        case OPT_SPLIT: split = args.value; break;
        case OPT_LENGTHS: lengths = args.value; break;
        case OPT_MEANLEN: mean_len = cli_args_real(&args, 1.0, INFINITY, 0); break;
        case OPT_STEPS: steps = (long)cli_args_int(&args, 1, 1000000); break;
        case OPT_SET: sets[nsets++] = args.value; break;
        case OPT_JSON: json = 1; break;
        case OPT_DROPPED: dropped = cli_args_real(&args, 0.0, 1.0, 1); break;
        case OPT_DROPPED_FROM:
        case OPT_ROUTING_FROM:
            if (dropped_from)
                cli_args_fail(&args, 1, "give --routing-from (or its older name --dropped-from) once");
            dropped_from = args.value;
            dropped_flag = opt == OPT_DROPPED_FROM ? "--dropped-from" : "--routing-from";
            break;
        }
    }
    if (!spec == !world)
        cli_args_fail(&args, 1, "give exactly one of --layout SPEC and --world N");
    if (!machine)
        cli_args_fail(&args, 1, "--machine FILE is required");
    if ((jsonl != NULL) + (lengths != NULL) + (mean_len > 0) > 1)
        cli_args_fail(&args, 1, "give at most one of --jsonl, --corpus-lengths and --mean-len");
    if (dropped >= 0 && dropped_from)
        cli_args_fail(&args, 1, "give at most one of --dropped and %s", dropped_flag);
    if (strcmp(split, "windows") != 0 && strcmp(split, "chapters") != 0)
        cli_args_fail(&args, 0, "--split '%s': expected windows or chapters", split);

    plan_machine_t m;
    char err[768];
    if (plan_machine_load(machine, &m, err, sizeof err))
        fb_fatal(FB_EXIT_USAGE, "fabula plan time: %s", err);
    config_t cfg;
    config_plan_ranks_t ranks = {.world = world, .dp = 0};
    if (spec)
        plan_layout_spec_ranks(spec, &ranks);
    config_load_plan(&cfg, (const char *const *)args.positional, args.npositional, (const char *const *)sets, nsets,
                     &ranks, 1);
    model_config_resolve(&cfg, 0);
    free(sets);
    cli_args_free(&args);
    plan_layout_t lay;
    plan_layout_resolve(&cfg, spec, world, "fabula plan time", &lay);

    /* the step of the layout: its micro-batch and accumulation (a spec's
     * tokens= and accum=, the one not given made from the config's batch
     * by plan_layout_resolve; both given: the batch they make) */
    const int tokens_given = spec && plan_layout_spec_has(spec, "tokens");
    config_t step = cfg;
    step.loader.max_tokens_per_batch = lay.micro_batch_tokens;
    step.grad_accum = lay.grad_accum;
    if (tokens_given && spec && plan_layout_spec_has(spec, "accum")) {
        const long long samples = (long long)lay.dp * lay.grad_accum * lay.micro_batch_tokens / cfg.data.seq_len;
        step.train_batch_size = samples < lay.dp ? lay.dp : samples > INT_MAX ? INT_MAX : (int)samples;
    }
    plan_workload_t w;
    char source[600];
    if (jsonl || lengths) {
        int64_t *lens, cut;
        int64_t n = plan_lengths_read(jsonl, lengths, split, cfg.data.seq_len, &lens, &cut);
        plan_workload_from_lengths(&step, lens, n, lay.dp, steps, &w);
        snprintf(source, sizeof source, "step plan over %s, %ld steps", jsonl ? jsonl : lengths, steps);
        free(lens);
    } else {
        const double len = mean_len > 0 ? mean_len : cfg.data.seq_len;
        if (tokens_given && len > lay.micro_batch_tokens)
            fb_fatal(FB_EXIT_USAGE, "fabula plan time: --mean-len %g is longer than the layout's tokens=%d: a "
                     "micro-batch holds whole samples", len, lay.micro_batch_tokens);
        /* tokens= is the micro-batch, of samples len long; else the
         * batch's samples spread over the micro-batches */
        const double samples = tokens_given ? (double)lay.dp * lay.grad_accum * lay.micro_batch_tokens / len
                                            : (double)step.train_batch_size;
        plan_workload_uniform(len, samples, lay.dp, lay.grad_accum, &w);
        snprintf(source, sizeof source, "every sample %g tokens", len);
    }
    plan_routing_t rr = {0};
    if (dropped_from) {
        plan_routing_read(dropped_from, dropped_flag, &cfg.model, &rr);
        dropped = rr.dropped;
        plan_routing_apply(&rr, &w);
    }
    plan_routing_check_dropped(&cfg.model, dropped, dropped_from ? dropped_flag : "--dropped");
    w.dropped = dropped > 0 ? dropped : 0.0;
    plan_time_t t;
    plan_time(&cfg, &lay, &m, &w, &t);
    if (json)
        print_json(&lay, &m, &w, &t);
    else
        print_table(&lay, &m, &w, &t, source);
    free(rr.loads);
    config_free(&cfg);
    return FB_EXIT_OK;
}
