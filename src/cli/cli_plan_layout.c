/* `fabula plan layout`: the layout search (src/plan/plan_search.c) on a
 * config and a machine file, its top layouts as a table or JSON, and why
 * the first beats the second. */
#include "cli/cli_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "config/config.h"
#include "plan/plan.h"
#include "plan/plan_search.h"
#include "model/config_resolve.h"
#include "util/error.h"

static void layout_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula plan layout --gpus N --machine M.json [options] MODEL.json [DS_CONFIG.json ...]\n"
            "\n"
            "Enumerates the layouts of N ranks: tp (dividing a node's devices), pp\n"
            "(dividing the layers), dp = N / (tp pp), ep (dividing dp and the experts),\n"
            "interleaved stages (divisors of a stage's layers up to 8), ZeRO stage 0-3,\n"
            "optimizer/parameter offload, sequence parallelism, recomputation and\n"
            "micro-batches of 1, 2, 4, 8 samples; drops those the model does not\n"
            "divide, the global batch does not divide, or whose per-rank memory\n"
            "(`fabula plan memory`) does not fit the machine; ranks the rest by\n"
            "predicted tokens/s (`fabula plan time`) and prints the top K with their\n"
            "memory and time breakdown, and why #1 beats #2 (docs/plan.md, \"Layout\n"
            "search\").\n"
            "\n"
            "  --gpus N                ranks (1..1000000)\n"
            "  --machine FILE          machine file (inputs/machines/*.json)\n"
            "  --top K                 layouts printed (default 10, at most 100)\n"
            "  --headroom F            fraction of device memory kept free (default 0.1)\n"
            "  --global-batch-tokens T tokens per optimizer step, the same for every layout\n"
            "                          (default: train_batch_size x data.seq_len; without\n"
            "                          train_batch_size the config's per-GPU micro-batch x\n"
            "                          accumulation x N / (tp pp), which grows with N: warned)\n"
            "  --keep-zero             keep the config's ZeRO stage and offload; search the rest\n"
            "  --set KEY=VALUE         config override, as for train\n"
            "  --compare SPEC          also evaluate this layout (`plan memory --layout` syntax,\n"
            "                          e.g. dp=8,tp=8,pp=16,zero=1; accum from the global batch\n"
            "                          unless given): its rank and why #1 beats it\n"
            "  --json                  one JSON object on stdout instead of the table\n"
            "  -h, --help              this help\n"
            "\n"
            "exit codes: 0 ok, 2 usage, config, machine file, or no layout fits\n");
}

static void put_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static double gib(size_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static void print_stats_json(const plan_search_stats_t *st)
{
    printf("\"stats\": {\"evaluated\": %lld, \"invalid\": %lld, \"batch\": %lld, \"device\": %lld, \"host\": %lld, "
           "\"pruned\": %lld, \"feasible\": %lld}",
           st->evaluated, st->invalid, st->batch, st->device, st->host, st->pruned, st->feasible);
}

static void print_candidate_json(const plan_candidate_t *c)
{
    const plan_layout_t *l = &c->lay;
    const plan_memory_t *mm = &c->mem;
    const plan_time_t *t = &c->time;
    char spec[256];
    plan_search_layout_spec(l, spec, sizeof spec);
    printf("{\"layout\": ");
    put_json_string(spec);
    printf(", \"dp\": %d, \"tp\": %d, \"pp\": %d, \"ep\": %d, \"zero\": %d, \"offload_optimizer\": %d, "
           "\"offload_param\": %d, \"sequence_parallel\": %d, \"recompute\": %d, \"virtual_stages\": %d, "
           "\"micro_batch_tokens\": %d, \"grad_accum\": %d, \"memory_free\": %.17g,\n  \"memory\": {\"params\": %zu, "
           "\"grads\": %zu, \"optimizer\": %zu, \"host_params\": %zu, \"host_optimizer\": %zu, \"workspace\": %zu, "
           "\"activations\": %zu, \"activations_peak\": %zu, \"moe_buffers\": %zu, \"device_total\": %zu, "
           "\"host_total\": %zu},\n  \"time\": {\"compute_s\": %.17g, \"comm_s\": %.17g, \"comm_exposed_s\": %.17g, "
           "\"bubble_s\": %.17g, \"imbalance_s\": %.17g, \"sync_s\": %.17g, \"step_s\": %.17g, \"tokens_per_s\": %.17g, "
           "\"bubble_fraction\": %.17g}",
           l->dp, l->tp, l->pp, l->ep, l->zero, l->offload_optimizer, l->offload_param, l->sequence_parallel,
           (int)l->recompute, l->virtual_stages, l->micro_batch_tokens, l->grad_accum, c->headroom, mm->params,
           mm->grads, mm->optimizer, mm->host_params, mm->host_optimizer, mm->workspace, mm->activations,
           mm->activations_peak, mm->moe_buffers, mm->device_total, mm->host_total, t->compute_s, t->comm_s,
           t->comm_exposed_s, t->bubble_s, t->imbalance_s, t->sync_s, t->step_s, t->tokens_per_s, t->bubble_fraction);
    printf(",\n  \"comm\": {");
    for (int r = 0; r < PLAN_COMM_N; r++)
        printf("%s\"%s\": {\"seconds\": %.17g, \"exposed_s\": %.17g}", r ? ", " : "",
               plan_comm_role_name((plan_comm_role_t)r), t->comm[r].seconds, t->comm[r].exposed_s);
    printf("}}");
}

static void print_json(const plan_search_opts_t *o, const plan_machine_t *m, const plan_search_stats_t *st,
                       const plan_candidate_t *c, int n, const char *explain, const plan_candidate_t *ref,
                       int ref_fit, const char *cmp)
{
    printf("{\"world\": %d, \"machine\": ", o->world);
    put_json_string(m->name);
    printf(", \"global_batch_tokens\": %lld, \"headroom\": %.17g, ", o->global_batch_tokens, o->headroom);
    print_stats_json(st);
    printf(", \"layouts\": [");
    for (int i = 0; i < n; i++) {
        printf("%s\n ", i ? "," : "");
        print_candidate_json(&c[i]);
    }
    printf("],\n \"explain\": ");
    put_json_string(explain);
    if (ref) {
        printf(",\n \"compare\": {\"fits\": %s, \"rank\": %lld, \"candidate\": ", ref_fit == 0 ? "true" : "false",
               ref_fit == 0 ? st->ref_beaten_by + 1 : 0);
        print_candidate_json(ref);
        printf(", \"explain\": ");
        put_json_string(cmp);
        printf("}");
    }
    printf("}\n");
}

/* The "imbal" column holds both waits for the slowest rank: the step
 * plan's imbalance and the synchronisation waits of a calibrated machine. */
static void print_row(const char *label, const plan_candidate_t *c)
{
    const plan_memory_t *mm = &c->mem;
    const plan_time_t *t = &c->time;
    char spec[256];
    plan_search_layout_spec(&c->lay, spec, sizeof spec);
    printf("%4s %12.6g %9.4g | %9.4g %9.4g %9.4g %9.4g | %9.2f %9.2f %9.2f %9.2f %5.1f%% | %s\n", label,
           t->tokens_per_s, t->step_s, t->compute_s, t->comm_exposed_s, t->bubble_s, t->imbalance_s + t->sync_s,
           gib(mm->params + mm->grads + mm->optimizer), gib(mm->activations_peak), gib(mm->device_total),
           gib(mm->host_total), 100 * c->headroom, spec);
}

static void print_table(const plan_search_opts_t *o, const plan_machine_t *m, const plan_search_stats_t *st,
                        const plan_candidate_t *c, int n, const char *explain, const plan_candidate_t *ref,
                        const char *cmp)
{
    printf("plan layout: %d ranks of %s (%d per node), global batch %lld tokens, %.0f%% of %.1f GiB device "
           "memory kept free\n",
           o->world, m->name, m->devices_per_node, o->global_batch_tokens, 100 * o->headroom,
           m->device_memory / (1024.0 * 1024 * 1024));
    printf("searched %lld layouts: %lld refused by the model's divisions, %lld do not divide the batch, %lld over "
           "device memory (and %lld skipped: larger micro-batches, less recomputation or less offload of those, or "
           "every ZeRO stage of a split whose weight copy and activations alone are over), %lld over host "
           "memory, %lld fit\n",
           st->evaluated, st->invalid, st->batch, st->device, st->pruned, st->host, st->feasible);
    printf("%4s %12s %9s | %9s %9s %9s %9s | %9s %9s %9s %9s %6s | %s\n", "rank", "tokens/s", "step s", "compute",
           "comm exp", "bubble", "imbal", "states", "activ", "device", "host", "free", "layout");
    printf("%4s %12s %9s | %9s %9s %9s %9s | %9s %9s %9s %9s %6s |\n", "", "", "", "s", "s", "s", "s", "GiB", "GiB",
           "GiB", "GiB", "");
    for (int i = 0; i < n; i++) {
        char label[16];
        snprintf(label, sizeof label, "%d", i + 1);
        print_row(label, &c[i]);
    }
    if (ref)
        print_row("cmp", ref);
    if (explain[0])
        printf("%s\n", explain);
    if (cmp[0])
        printf("%s\n", cmp);
}

/* Where the --compare layout stands, and why #1 beats it. */
static void describe_ref(const plan_candidate_t *ref, int fit, const plan_candidate_t *best,
                         const plan_search_stats_t *st, const plan_machine_t *m, double headroom, char *buf, size_t n)
{
    char spec[256], why[1024];
    plan_search_layout_spec(&ref->lay, spec, sizeof spec);
    if (fit == 1) {
        double dev = m->host_link_bandwidth > 0 ? (double)ref->mem.stage_device_max
                                                : (double)ref->mem.device_total + (double)ref->mem.host_total;
        snprintf(buf, n, "cmp (%s) does not fit: %.2f GiB per device, more than the %.2f GiB allowed.", spec,
                 dev / (1024.0 * 1024 * 1024), m->device_memory * (1 - headroom) / (1024.0 * 1024 * 1024));
        return;
    }
    if (fit == 2) {
        snprintf(buf, n, "cmp (%s) does not fit: %.2f GiB of host memory per device, more than %.2f GiB.", spec,
                 (double)ref->mem.stage_host_max / (1024.0 * 1024 * 1024),
                 m->host_memory / m->devices_per_node / (1024.0 * 1024 * 1024));
        return;
    }
    if (st->ref_beaten_by == 0) {
        snprintf(buf, n, "cmp (%s) fits and ranks #1 of %lld.", spec, st->feasible);
        return;
    }
    plan_search_explain(best, "#1", ref, "cmp", why, sizeof why);
    snprintf(buf, n, "cmp (%s) fits and ranks #%lld of %lld. %s", spec, st->ref_beaten_by + 1, st->feasible, why);
}

int cli_plan_layout(int argc, char **argv)
{
    enum { OPT_GPUS = 1, OPT_MACHINE, OPT_TOP, OPT_HEADROOM, OPT_GBT, OPT_KEEP_ZERO, OPT_SET, OPT_JSON, OPT_COMPARE };
    static const cli_option_t options[] = {
        {"gpus", 0, 1, OPT_GPUS},
        {"machine", 0, 1, OPT_MACHINE},
        {"top", 0, 1, OPT_TOP},
        {"headroom", 0, 1, OPT_HEADROOM},
        {"global-batch-tokens", 0, 1, OPT_GBT},
        {"keep-zero", 0, 0, OPT_KEEP_ZERO},
        {"set", 0, 1, OPT_SET},
        {"json", 0, 0, OPT_JSON},
        {"compare", 0, 1, OPT_COMPARE},
        {0, 0, 0, 0},
    };
    plan_search_opts_t o = {.headroom = 0.1, .top = 10};
    const char *machine_path = NULL, *compare = NULL;
    int json = 0, opt_gbt = 0;
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    int nsets = 0, opt;
    cli_args_t args;
    cli_args_init(&args, "plan layout", layout_usage, options, 0, &argc, &argv);
    while ((opt = cli_args_next(&args)) != 0) {
        switch (opt) {
        case OPT_GPUS: o.world = (int)cli_args_int(&args, 1, 1000000); break;
        case OPT_MACHINE: machine_path = args.value; break;
        case OPT_TOP: o.top = (int)cli_args_int(&args, 1, PLAN_SEARCH_MAX_TOP); break;
        case OPT_HEADROOM: o.headroom = cli_args_real(&args, 0.0, 1.0, 1); break;
        case OPT_GBT: o.global_batch_tokens = cli_args_int(&args, 1, 1LL << 50); opt_gbt = 1; break;
        case OPT_KEEP_ZERO: o.keep_zero = 1; break;
        case OPT_SET: sets[nsets++] = args.value; break;
        case OPT_JSON: json = 1; break;
        case OPT_COMPARE: compare = args.value; break;
        }
    }
    if (o.world == 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --gpus N is required");
    if (!machine_path)
        fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --machine FILE is required");
    if (args.npositional == 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan layout: give the model's config (MODEL.json [DS_CONFIG.json ...])");

    plan_machine_t mach;
    char err[512];
    if (plan_machine_load(machine_path, &mach, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan layout: %s", err);
    config_t cfg;
    /* validated for the whole world, each layout choosing its dp: a given
     * train_batch_size is the global batch of every layout; without one
     * the batch rule (DeepSpeed's) makes it for N / (tp pp) data-parallel
     * ranks of the config's tp and pp */
    const config_plan_ranks_t ranks = {.world = o.world, .dp = CONFIG_PLAN_ANY_DP};
    config_load_plan(&cfg, (const char *const *)args.positional, args.npositional, (const char *const *)sets, nsets,
                     &ranks, !json);
    model_config_resolve(&cfg, !json);
    free(sets);
    cli_args_free(&args);
    if (o.global_batch_tokens == 0) {
        o.global_batch_tokens = (long long)cfg.train_batch_size * cfg.data.seq_len;
        /* a per-GPU micro-batch makes a batch that grows with --gpus: the
         * layouts of another N are not of the same run */
        if (cfg.batch_per_rank)
            fprintf(stderr,
                    "fabula: warning: plan layout: the global batch, %lld tokens, is train_micro_batch_size_per_gpu "
                    "%d x gradient_accumulation_steps %d x %d data-parallel ranks x data.seq_len %d, so it grows with "
                    "--gpus; give --global-batch-tokens (or train_batch_size) to plan one batch\n",
                    o.global_batch_tokens, cfg.micro_batch, cfg.grad_accum,
                    cfg.train_batch_size / (cfg.micro_batch * cfg.grad_accum), cfg.data.seq_len);
    }

    plan_candidate_t ref;
    int ref_fit = -1;
    if (compare) {
        plan_layout_t lay;
        if (plan_layout_parse(compare, &cfg, &lay, err, sizeof err) != 0)
            fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --compare '%s': %s", compare, err);
        if (lay.world != o.world)
            fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --compare '%s' is a layout of %d ranks, not --gpus %d",
                     compare, lay.world, o.world);
        /* the same global batch as every searched layout, unless the spec
         * gives both tokens= and accum= (neither: the config's micro-batch
         * tokens, the accumulation made from the batch) */
        if (!plan_layout_spec_has(compare, "tokens") && !plan_layout_spec_has(compare, "accum")) {
            long long per_step = (long long)lay.dp * lay.micro_batch_tokens;
            if (o.global_batch_tokens % per_step != 0)
                fb_fatal(FB_EXIT_USAGE,
                         "fabula plan layout: --compare '%s': dp %d x %d tokens a micro-batch does not divide the "
                         "global batch of %lld tokens",
                         compare, lay.dp, lay.micro_batch_tokens, o.global_batch_tokens);
            lay.grad_accum = (int)(o.global_batch_tokens / per_step);
        } else if (plan_layout_batch(&lay, compare, o.global_batch_tokens,
                                     opt_gbt ? "--global-batch-tokens" : "train_batch_size x data.seq_len", err,
                                     sizeof err) != 0) {
            fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --compare: %s", err);
        }
        if (plan_layout_check(&cfg, &lay, err, sizeof err) != 0)
            fb_fatal(FB_EXIT_USAGE, "fabula plan layout: --compare '%s': %s", compare, err);
        ref_fit = plan_search_evaluate(&cfg, &mach, o.headroom, &lay, &ref);
        if (ref_fit == 0)
            o.ref = &ref;
    }
    /* the table compares #1 with #2, so two are kept even for --top 1 */
    int cap = o.top < 2 ? 2 : o.top;
    plan_search_opts_t so = o;
    so.top = cap;
    plan_candidate_t *best = fb_calloc((size_t)cap, sizeof *best);
    plan_search_stats_t st;
    int n = plan_search(&cfg, &mach, &so, best, &st);
    if (n == 0) {
        fprintf(stderr,
                "fabula: error: plan layout: no layout of %d ranks fits %s with %.0f%% headroom: of %lld evaluated, "
                "%lld are refused by the model's divisions, %lld do not divide the global batch of %lld tokens, "
                "%lld are over device memory, %lld over host memory\n",
                o.world, mach.name, 100 * o.headroom, st.evaluated, st.invalid, st.batch, o.global_batch_tokens,
                st.device, st.host);
        free(best);
        config_free(&cfg);
        return FB_EXIT_USAGE;
    }
    char explain[1024] = "";
    if (n >= 2)
        plan_search_explain(&best[0], "#1", &best[1], "#2", explain, sizeof explain);
    else
        snprintf(explain, sizeof explain, "only one layout fits.");
    int shown = n < o.top ? n : o.top;
    char cmp[1400] = "";
    if (compare)
        describe_ref(&ref, ref_fit, &best[0], &st, &mach, o.headroom, cmp, sizeof cmp);
    if (json)
        print_json(&o, &mach, &st, best, shown, explain, compare ? &ref : NULL, ref_fit, cmp);
    else
        print_table(&o, &mach, &st, best, shown, explain, compare ? &ref : NULL, cmp);
    free(best);
    config_free(&cfg);
    return FB_EXIT_OK;
}
