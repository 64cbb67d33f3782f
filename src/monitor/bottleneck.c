#include "monitor/bottleneck.h"

#include <stdio.h>
#include <string.h>

#define PCT(x) (100.0 * (x))

static void advise_imbalance(const config_t *cfg, const bottleneck_input_t *in, double spread, bottleneck_t *o)
{
    const span_over_ranks_t *s = in->span;
    /* The plan predicts the spread of the ranks' work; a measured spread
     * well beyond it is one slow rank, not the data. */
    if (in->plan_imbalance >= 0.5 * spread) {
        if (cfg->loader.sampler == LOADER_SAMPLER_UNIFORM)
            snprintf(o->advice, sizeof o->advice,
                     "data.sampler is \"uniform\" (plan imbalance %.1f%%): set data.sampler to \"lpt\", which "
                     "balances the ranks' cost (`fabula plan sampler` measures it on this corpus)",
                     PCT(in->plan_imbalance));
        else
            snprintf(o->advice, sizeof o->advice,
                     "the %s plan is %.1f%% imbalanced: more samples per rank (train_batch_size), or a measured "
                     "data.attention_cost (`fabula plan calibrate`) so that the balancer's costs match the ranks' "
                     "times", config_sampler_name(cfg->loader.sampler), PCT(in->plan_imbalance));
    } else {
        snprintf(o->advice, sizeof o->advice,
                 "rank %d is a straggler: it computes %.1f%% longer than the mean while the plan predicts "
                 "%.1f%%: look at that rank's node (other jobs, CPU frequency, OMP_NUM_THREADS, its GPU)",
                 s->slowest_rank, PCT(spread), PCT(in->plan_imbalance));
    }
}

static void advise_comm(const config_t *cfg, bottleneck_t *o)
{
    char *p = o->advice;
    size_t left = sizeof o->advice;
    int n = 0;
    const char *sep = "";
#define ADD(...)                                                                                               \
    do {                                                                                                       \
        int k = snprintf(p, left, __VA_ARGS__);                                                                \
        if (k > 0 && (size_t)k < left) {                                                                       \
            p += k;                                                                                            \
            left -= (size_t)k;                                                                                 \
        }                                                                                                      \
        sep = "; ";                                                                                            \
        n++;                                                                                                   \
    } while (0)
    if (!cfg->zero.overlap_comm)
        ADD("%senable zero_optimization.overlap_comm", sep);
    if (cfg->zero.reduce_bucket_size < 5e7)
        ADD("%sraise zero_optimization.reduce_bucket_size (now %.0f elements)", sep, cfg->zero.reduce_bucket_size);
    if (cfg->parallel.expert_parallel_size > 1)
        ADD("%slower parallel.expert_parallel_size (now %d) or raise parallel.moe_a2a_chunks", sep,
            cfg->parallel.expert_parallel_size);
    if (cfg->zero.stage == 3)
        ADD("%sa lower zero_optimization.stage gathers no parameters", sep);
    if (n == 0)
        ADD("fewer, larger steps: more tokens per micro-batch (data.max_tokens_per_batch) or fewer ranks per "
            "model replica");
#undef ADD
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

    if (in->memory_fraction >= BOTTLENECK_MEMORY_FRACTION) {
        o->verdict = "memory";
        snprintf(o->evidence, sizeof o->evidence, "%s high-water of rank %d is %.0f%% of what it may use",
                 in->memory_what ? in->memory_what : "memory", in->memory_rank, PCT(in->memory_fraction));
        snprintf(o->advice, sizeof o->advice,
                 "a higher zero_optimization.stage, zero_optimization.offload_optimizer, fewer ranks per node, or "
                 "a smaller data.max_tokens_per_batch");
        return;
    }
    struct { const char *verdict; int phase; double threshold; } cls[] = {
        {"io", PHASE_CHECKPOINT, BOTTLENECK_IO_SHARE},
        {"input", PHASE_DATA, BOTTLENECK_INPUT_SHARE},
        {"imbalance", PHASE_IMBALANCE, BOTTLENECK_IMBALANCE_SHARE},
        {"communication", PHASE_COMM_WAIT, BOTTLENECK_COMM_SHARE},
    };
    int best = -1;
    for (int i = 0; i < (int)(sizeof cls / sizeof *cls); i++)
        if (share[cls[i].phase] >= cls[i].threshold && (best < 0 || share[cls[i].phase] > share[cls[best].phase]))
            best = i;
    if (best < 0) {
        o->verdict = "compute";
        const double fb = share[PHASE_FORWARD] + share[PHASE_BACKWARD] + share[PHASE_OPTIMIZER];
        if (in->mfu >= 0)
            snprintf(o->evidence, sizeof o->evidence,
                     "forward+backward+optimizer %.1f%% of the step, no other share above its threshold; MFU %.1f%%",
                     PCT(fb), PCT(in->mfu));
        else
            snprintf(o->evidence, sizeof o->evidence,
                     "forward+backward+optimizer %.1f%% of the step, no other share above its threshold", PCT(fb));
        snprintf(o->advice, sizeof o->advice,
                 "larger matrix products raise MFU: more tokens per micro-batch (train_micro_batch_size_per_gpu, "
                 "data.max_tokens_per_batch); on CPUs OMP_NUM_THREADS = the cores per rank");
        return;
    }
    const int p = cls[best].phase;
    o->verdict = cls[best].verdict;
    snprintf(o->evidence, sizeof o->evidence, "%s %.1f%% of the step (mean over %d ranks, threshold %.0f%%; max "
             "%.1f%% on rank %d)", phase_name(p), PCT(share[p]), in->world, PCT(cls[best].threshold),
             iter > 0 ? PCT(s->max[p] / iter) : 0.0, s->max_rank[p]);
    if (p == PHASE_IMBALANCE) {
        size_t len = strlen(o->evidence);
        snprintf(o->evidence + len, sizeof o->evidence - len, "; slowest rank %d (busy %.3f s, mean %.3f s)",
                 s->slowest_rank, s->busy_max / (s->steps > 0 ? s->steps : 1), s->busy_mean / (s->steps > 0 ? s->steps : 1));
        advise_imbalance(cfg, in, spread, o);
    } else if (p == PHASE_COMM_WAIT) {
        advise_comm(cfg, o);
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
