#include "monitor/bottleneck.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PCT(x) (100.0 * (x))

/* Appends to a fixed buffer; what does not fit is cut. */
typedef struct text {
    char *p;
    size_t left;
    int items;                  /* clauses added by add_clause */
} text_t;

static void add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(t->p, t->left, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    const size_t n = (size_t)k < t->left ? (size_t)k : (t->left ? t->left - 1 : 0);
    t->p += n;
    t->left -= n;
}

static text_t text_of(char *buf, size_t n)
{
    buf[0] = '\0';
    return (text_t){buf, n, 0};
}

/* The data-parallel ranks of one model replica's stage: world / (tp x pp). */
static int dp_size(const config_t *cfg, int world)
{
    const int tp = cfg->parallel.tensor_parallel_size > 0 ? cfg->parallel.tensor_parallel_size : 1;
    const int pp = cfg->parallel.pipeline_parallel_size > 0 ? cfg->parallel.pipeline_parallel_size : 1;
    const int dp = world / (tp * pp);
    return dp > 0 ? dp : 1;
}

static void advise_imbalance(const config_t *cfg, const bottleneck_input_t *in, double spread, bottleneck_t *o)
{
    const span_over_ranks_t *s = in->span;
    text_t t = text_of(o->advice, sizeof o->advice);
    /* The plan predicts the spread of the ranks' work; a measured spread
     * well beyond it is one slow rank, not the data. */
    if (in->plan_imbalance >= 0.5 * spread) {
        /* A step whose samples fill fewer micro-batches than it has leaves
         * ranks without work whatever the balancer does (the seq-len
         * warm-up's short samples fit a whole step in one): the packer
         * must spread them. The uniform sampler is named first: it is the
         * baseline, imbalanced on any corpus. */
        const int empty = cfg->loader.packing != LOADER_PACK_BALANCED && in->micro_batches > 0 &&
                          in->plan_bins > 0 && in->plan_bins <= in->micro_batches - 0.5;
        if (cfg->loader.sampler == LOADER_SAMPLER_UNIFORM)
            add(&t, "data.sampler is \"uniform\" (plan imbalance %.1f%%): set data.sampler to \"lpt\", which "
                    "balances the ranks' cost (`fabula plan sampler` measures it on this corpus)%s",
                PCT(in->plan_imbalance), empty ? "; then " : "");
        if (empty) {
            add(&t, "data.packing is \"%s\": the step's samples fill %.1f of its %d micro-batches on average",
                config_packing_name(cfg->loader.packing), in->plan_bins, in->micro_batches);
            if (cfg->loader.warmup && in->max_len_min > 0 && in->max_len_min < cfg->data.seq_len)
                add(&t, " (data.seq_len_warmup cuts them to %d tokens)", in->max_len_min);
            add(&t, ", so ranks wait with nothing to compute: set data.packing to \"balanced\", which spreads a "
                    "step's samples over all its micro-batches (docs/loader.md)");
        } else if (cfg->loader.sampler != LOADER_SAMPLER_UNIFORM) {
            add(&t, "the %s plan is %.1f%% imbalanced: more samples per rank (train_batch_size), or a measured "
                    "data.attention_cost (`fabula plan calibrate`) so that the balancer's costs match the ranks' "
                    "times", config_sampler_name(cfg->loader.sampler), PCT(in->plan_imbalance));
        }
        return;
    }
    add(&t, "rank %d is a straggler: it computes %.1f%% longer than the mean while the plan predicts %.1f%%",
        s->slowest_rank, PCT(spread), PCT(in->plan_imbalance));
    if (!in->device && s->cpu_share_min >= 0 && s->cpu_share_min_rank == s->slowest_rank &&
        s->cpu_share_min < BOTTLENECK_CPU_SHARE)
        add(&t, ", and its process got %.0f%% of the CPU its threads could use while computing: other processes "
                "on its cores, more ranks x threads than its node has cores, or it sleeps",
            PCT(s->cpu_share_min));
    add(&t, ": look at that rank's node (other jobs, CPU frequency, OMP_NUM_THREADS, its GPU)");
}

/* The knobs for the waits of one process group. */
static void advise_group(const config_t *cfg, int dp, int g, text_t *t)
{
    const char *sep = t->items++ ? "; " : "";
    if (g == MONITOR_GROUP_TP) {
        add(t, "%slower parallel.tensor_parallel_size (now %d): its all-reduces block the forward and backward of "
               "every layer (keep a tp group inside one node)", sep, cfg->parallel.tensor_parallel_size);
    } else if (g == MONITOR_GROUP_EP) {
        add(t, "%slower parallel.expert_parallel_size (now %d) or raise parallel.moe_a2a_chunks (now %d)", sep,
            cfg->parallel.expert_parallel_size, cfg->parallel.moe_a2a_chunks);
    } else if (g == MONITOR_GROUP_DP) {
        int n = 0;
        if (!cfg->zero.overlap_comm)
            add(t, "%senable zero_optimization.overlap_comm", n++ ? "; " : sep);
        if (cfg->zero.reduce_bucket_size < 5e7)
            add(t, "%sraise zero_optimization.reduce_bucket_size (now %.0f elements)", n++ ? "; " : sep,
                cfg->zero.reduce_bucket_size);
        if (cfg->zero.stage == 3)
            add(t, "%sa lower zero_optimization.stage gathers no parameters", n++ ? "; " : sep);
        if (n == 0)
            add(t, "%sthe gradient reduction over %d data-parallel ranks is once a step: more tokens a step "
                   "(gradient_accumulation_steps, data.max_tokens_per_batch) or fewer data-parallel ranks", sep, dp);
    }
}

/* Communication: the knobs of the groups the waits were in; without a
 * measured split, of the groups this layout has. */
static void advise_comm(const config_t *cfg, const bottleneck_input_t *in, const double gshare[MONITOR_NGROUPS],
                        double comm, bottleneck_t *o)
{
    const int dp = dp_size(cfg, in->world);
    const int size[MONITOR_NGROUPS] = {dp, cfg->parallel.tensor_parallel_size,
                                       cfg->parallel.expert_parallel_size, 1};
    text_t t = text_of(o->advice, sizeof o->advice);
    double known = 0.0;
    for (int g = 0; g < MONITOR_GROUP_PP; g++)
        known += gshare[g];
    if (known > 0.0) {
        /* every group holding a quarter of the waits, the largest first */
        int done[MONITOR_NGROUPS] = {0};
        for (int k = 0; k < MONITOR_GROUP_PP; k++) {
            int best = -1;
            for (int g = 0; g < MONITOR_GROUP_PP; g++)
                if (!done[g] && (best < 0 || gshare[g] > gshare[best]))
                    best = g;
            done[best] = 1;
            if (gshare[best] >= 0.25 * known && size[best] > 1)
                advise_group(cfg, dp, best, &t);
        }
    } else {
        for (int g = 0; g < MONITOR_GROUP_PP; g++)
            if (size[g] > 1)
                advise_group(cfg, dp, g, &t);
    }
    if (t.items == 0)
        add(&t, "fewer, larger steps: more tokens per micro-batch (data.max_tokens_per_batch) or fewer ranks per "
                "model replica (comm_wait %.1f%% of the step)", PCT(comm));
}

static void advise_pipeline(const config_t *cfg, const bottleneck_input_t *in, bottleneck_t *o)
{
    const int p = cfg->parallel.pipeline_parallel_size, v = cfg->parallel.virtual_pipeline_stages;
    const int dp = dp_size(cfg, in->world);
    const int m = in->micro_batches > 0 ? in->micro_batches / dp : 0;
    text_t t = text_of(o->advice, sizeof o->advice);
    if (m > 0)
        add(&t, "the pipeline bubble: %d stages over %d micro-batch%s a step idle (p-1)/(%sm+p-1) = %.0f%% of it "
                "under %s1F1B: ", p, m, m == 1 ? "" : "es", v > 1 ? "v " : "",
            PCT((double)(p - 1) / ((v > 1 ? v : 1) * m + p - 1)), v > 1 ? "interleaved " : "");
    add(&t, "more micro-batches a step (gradient_accumulation_steps, with train_batch_size)");
    if (v <= 1)
        add(&t, ", parallel.virtual_pipeline_stages > 1 (interleaved 1F1B divides the bubble by it; the "
                "micro-batches a step a multiple of %d)", p);
    add(&t, ", or fewer stages (parallel.pipeline_parallel_size, now %d)", p);
}

static void advise_cpu(const bottleneck_input_t *in, bottleneck_t *o)
{
    const span_over_ranks_t *s = in->span;
    snprintf(o->evidence, sizeof o->evidence,
             "every rank's process got less than %.0f%% of the CPU its threads could use while computing (CPU "
             "seconds over forward+backward+optimizer seconds x threads): %.0f%% to %.0f%%, lowest on rank %d", PCT(BOTTLENECK_CPU_SHARE),
             PCT(s->cpu_share_min), PCT(s->cpu_share_max), s->cpu_share_min_rank);
    text_t t = text_of(o->advice, sizeof o->advice);
    add(&t, "the ranks wait for CPU time, not for work: other processes share their cores, or ranks x threads "
            "exceed the cores");
    if (in->ranks_per_node > 0 && in->node_cpus > 0 && in->threads > 0)
        add(&t, " (here %d rank(s) x %d thread(s) on %d CPU(s) of the node)", in->ranks_per_node, in->threads,
            in->node_cpus);
    add(&t, ": fewer ranks or a lower OMP_NUM_THREADS per node, each rank bound to cores of its own (mpiexec "
            "-bind-to core:N, srun --cpu-bind=cores), or the node's other work moved away (docs/cpu-threads.md)");
}

void bottleneck_classify(const config_t *cfg, const bottleneck_input_t *in, bottleneck_t *o)
{
    memset(o, 0, sizeof *o);
    const span_over_ranks_t *s = in->span;
    const double iter = s->step_mean + s->mean[PHASE_CHECKPOINT];
    double share[PHASE_COUNT];
    for (int p = 0; p < PHASE_COUNT; p++)
        share[p] = iter > 0 ? s->mean[p] / iter : 0.0;
    const double spread = s->busy_mean > 0 ? s->busy_max / s->busy_mean - 1.0 : 0.0;
    /* comm_wait split by the groups the ranks blocked in, in proportion to
     * their waits (which also hold the imbalance wait) */
    double gshare[MONITOR_NGROUPS];
    for (int g = 0; g < MONITOR_NGROUPS; g++)
        gshare[g] = s->blocked_mean > 0 ? share[PHASE_COMM_WAIT] * s->group_wait_mean[g] / s->blocked_mean : 0.0;
    const double pipe = cfg->parallel.pipeline_parallel_size > 1 ? gshare[MONITOR_GROUP_PP] : 0.0;
    const double comm = share[PHASE_COMM_WAIT] - pipe;

    if (in->memory_fraction >= BOTTLENECK_MEMORY_FRACTION) {
        o->verdict = "memory";
        snprintf(o->evidence, sizeof o->evidence, "%s high-water of rank %d is %.0f%% of what it may use",
                 in->memory_what ? in->memory_what : "memory", in->memory_rank, PCT(in->memory_fraction));
        snprintf(o->advice, sizeof o->advice,
                 "a higher zero_optimization.stage, zero_optimization.offload_optimizer, fewer ranks per node, or "
                 "a smaller data.max_tokens_per_batch");
        return;
    }
    /* A process that does not get its cores makes every other share look
     * like something it is not: compute above all, waits at the collectives */
    if (!in->device && s->cpu_share_max >= 0 && s->cpu_share_max < BOTTLENECK_CPU_SHARE) {
        o->verdict = "cpu";
        advise_cpu(in, o);
        return;
    }
    struct { const char *verdict; int phase; double share, threshold; } cls[] = {
        {"io", PHASE_CHECKPOINT, share[PHASE_CHECKPOINT], BOTTLENECK_IO_SHARE},
        {"input", PHASE_DATA, share[PHASE_DATA], BOTTLENECK_INPUT_SHARE},
        {"imbalance", PHASE_IMBALANCE, share[PHASE_IMBALANCE], BOTTLENECK_IMBALANCE_SHARE},
        {"pipeline", PHASE_COMM_WAIT, pipe, BOTTLENECK_PIPELINE_SHARE},
        {"communication", PHASE_COMM_WAIT, comm, BOTTLENECK_COMM_SHARE},
    };
    int best = -1;
    for (int i = 0; i < (int)(sizeof cls / sizeof *cls); i++)
        if (cls[i].share >= cls[i].threshold && (best < 0 || cls[i].share > cls[best].share))
            best = i;
    if (best < 0) {
        o->verdict = "compute";
        const double fb = share[PHASE_FORWARD] + share[PHASE_BACKWARD] + share[PHASE_OPTIMIZER];
        text_t e = text_of(o->evidence, sizeof o->evidence);
        add(&e, "forward+backward+optimizer %.1f%% of the step, no other share above its threshold", PCT(fb));
        if (in->mfu >= 0)
            add(&e, "; MFU %.1f%%", PCT(in->mfu));
        if (!in->device && s->cpu_share_min >= 0)
            add(&e, "; CPU share %.0f%% or more", PCT(s->cpu_share_min));
        snprintf(o->advice, sizeof o->advice,
                 "larger matrix products raise MFU: more tokens per micro-batch (train_micro_batch_size_per_gpu, "
                 "data.max_tokens_per_batch)%s", in->device ? "" : "; on CPUs OMP_NUM_THREADS = the cores per rank");
        return;
    }
    const int p = cls[best].phase;
    o->verdict = cls[best].verdict;
    text_t e = text_of(o->evidence, sizeof o->evidence);
    if (!strcmp(o->verdict, "pipeline") || !strcmp(o->verdict, "communication")) {
        add(&e, "%s %.1f%% of the step (mean over %d ranks, threshold %.0f%%; comm_wait max %.1f%% on rank %d)",
            !strcmp(o->verdict, "pipeline") ? "pipeline waits" : "comm_wait", PCT(cls[best].share), in->world,
            PCT(cls[best].threshold), iter > 0 ? PCT(s->max[p] / iter) : 0.0, s->max_rank[p]);
        if (s->blocked_mean > 0) {
            add(&e, "; the waits by group:");
            for (int g = 0; g < MONITOR_NGROUPS; g++)
                add(&e, " %s %.0f%%", monitor_group_name(g), PCT(s->group_wait_mean[g] / s->blocked_mean));
        }
    } else {
        add(&e, "%s %.1f%% of the step (mean over %d ranks, threshold %.0f%%; max %.1f%% on rank %d)", phase_name(p),
            PCT(share[p]), in->world, PCT(cls[best].threshold), iter > 0 ? PCT(s->max[p] / iter) : 0.0,
            s->max_rank[p]);
    }
    if (p == PHASE_IMBALANCE) {
        add(&e, "; slowest rank %d (busy %.3f s, mean %.3f s)", s->slowest_rank,
            s->busy_max / (s->steps > 0 ? s->steps : 1), s->busy_mean / (s->steps > 0 ? s->steps : 1));
        advise_imbalance(cfg, in, spread, o);
    } else if (!strcmp(o->verdict, "pipeline")) {
        advise_pipeline(cfg, in, o);
    } else if (p == PHASE_COMM_WAIT) {
        advise_comm(cfg, in, gshare, comm, o);
    } else if (p == PHASE_DATA) {
        snprintf(o->advice, sizeof o->advice,
                 "reading and packing the micro-batches stalls the step: a prepared corpus (data.corpus from "
                 "`fabula prep`) on a fast file system%s",
                 cfg->monitor.debug_delay_data_s > 0 ? " (here monitor.debug_delay_data_s adds the delay)" : "");
    } else {
        snprintf(o->advice, sizeof o->advice,
                 "raise checkpoint.save_interval (now %ld), or write checkpoint.dir to a faster file system",
                 cfg->checkpoint.save_interval);
    }
}
