/* src/monitor: the bottleneck verdict on constructed time splits (each
 * class, its threshold, which class wins, the evidence and the knob; the
 * knobs that read the layout, the CPU share and the packing), the
 * phase timers against a known sleep, the GPU peak table, and NVML's
 * "absent" path (no driver on the build machine). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "monitor/bottleneck.h"
#include "monitor/memory.h"
#include "monitor/nvml.h"
#include "monitor/phase.h"
#include "train/step_monitor.h"
#include "testlib.h"

/* A span of 10 steps of 1 s each on `world` ranks whose mean phase shares
 * are `share` (of the 1 s step; the checkpoint adds to it). */
static span_over_ranks_t span_of(const double share[PHASE_COUNT], int world)
{
    span_over_ranks_t s;
    memset(&s, 0, sizeof s);
    for (int p = 0; p < PHASE_COUNT; p++) {
        s.mean[p] = 10.0 * share[p];
        s.max[p] = s.mean[p] * 1.5;
        s.max_rank[p] = world - 1;
    }
    s.steps = 10;
    s.step_min = s.step_mean = s.step_max = 10.0;
    s.busy_mean = 8.0;
    s.busy_min = 7.0;
    s.busy_max = 9.0; /* a spread of 12.5% */
    s.slowest_rank = world - 1;
    s.cpu_share_min = 0.9;
    s.cpu_share_max = 1.0;
    return s;
}

static bottleneck_t verdict(const config_t *cfg, const double share[PHASE_COUNT], double plan_imb, double mem)
{
    span_over_ranks_t s = span_of(share, 4);
    bottleneck_input_t in = {.span = &s, .world = 4, .plan_imbalance = plan_imb, .mfu = 0.3, .memory_fraction = mem,
                             .memory_rank = 2, .memory_what = "host RSS"};
    bottleneck_t b;
    bottleneck_classify(cfg, &in, &b);
    return b;
}

static void test_verdicts(void)
{
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 4, 0);
    enum { D = PHASE_DATA, F = PHASE_FORWARD, B = PHASE_BACKWARD, C = PHASE_COMM_WAIT, O = PHASE_OPTIMIZER,
           K = PHASE_CHECKPOINT, I = PHASE_IMBALANCE };
    double sh[PHASE_COUNT];
#define SHARES(d, f, b, c, o, k, i) (sh[D] = d, sh[F] = f, sh[B] = b, sh[C] = c, sh[O] = o, sh[K] = k, sh[I] = i)

    SHARES(0.01, 0.40, 0.50, 0.05, 0.02, 0.0, 0.02);
    bottleneck_t b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "compute") && strstr(b.evidence, "MFU 30.0%"), "compute: %s (%s)", b.verdict,
           b.evidence);

    /* each class just over its threshold; shares are of step + checkpoint */
    SHARES(0.21, 0.40, 0.30, 0.05, 0.02, 0.0, 0.02);
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "input") && strstr(b.evidence, "data 21.0%") && strstr(b.advice, "fabula prep"),
           "input: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    SHARES(0.19, 0.40, 0.30, 0.05, 0.02, 0.0, 0.04);
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "compute"), "data 19%% is below the input threshold: %s", b.verdict);

    SHARES(0.0, 0.30, 0.30, 0.30, 0.02, 0.0, 0.08);
    cfg.zero.overlap_comm = 0;
    cfg.zero.reduce_bucket_size = 1000;
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "communication") && strstr(b.evidence, "comm_wait 30.0%") &&
               strstr(b.evidence, "on rank 3") && strstr(b.advice, "overlap_comm") &&
               strstr(b.advice, "reduce_bucket_size (now 1000"),
           "communication: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    SHARES(0.0, 0.40, 0.30, 0.24, 0.02, 0.0, 0.04);
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "compute"), "comm 24%% is below its threshold: %s", b.verdict);

    /* the checkpoint adds to the iteration: 0.3 s of 1.3 s is 23% */
    SHARES(0.0, 0.45, 0.45, 0.05, 0.05, 0.3, 0.0);
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "io") && strstr(b.evidence, "checkpoint 23.1%") &&
               strstr(b.advice, "checkpoint.save_interval"),
           "io: %s (%s; %s)", b.verdict, b.evidence, b.advice);

    /* imbalance: the plan explains the spread (the data) or not (a straggler) */
    SHARES(0.0, 0.35, 0.35, 0.05, 0.05, 0.0, 0.20);
    cfg.loader.sampler = LOADER_SAMPLER_UNIFORM;
    b = verdict(&cfg, sh, 0.30, 0.1);
    EXPECT(!strcmp(b.verdict, "imbalance") && strstr(b.evidence, "slowest rank 3") &&
               strstr(b.advice, "data.sampler is \"uniform\"") && strstr(b.advice, "lpt"),
           "imbalance, uniform sampler: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    cfg.loader.sampler = LOADER_SAMPLER_LPT;
    b = verdict(&cfg, sh, 0.30, 0.1);
    EXPECT(!strcmp(b.verdict, "imbalance") && strstr(b.advice, "lpt plan is 30.0% imbalanced"),
           "imbalance, lpt plan: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    b = verdict(&cfg, sh, 0.004, 0.1);
    EXPECT(!strcmp(b.verdict, "imbalance") && strstr(b.advice, "rank 3 is a straggler"),
           "imbalance, balanced plan: %s (%s; %s)", b.verdict, b.evidence, b.advice);

    /* the largest share over its threshold wins; memory pressure first */
    SHARES(0.25, 0.10, 0.10, 0.30, 0.05, 0.0, 0.20);
    b = verdict(&cfg, sh, 0.0, 0.1);
    EXPECT(!strcmp(b.verdict, "communication"), "comm 30%% beats data 25%% and imbalance 20%%: %s", b.verdict);
    b = verdict(&cfg, sh, 0.0, 0.95);
    EXPECT(!strcmp(b.verdict, "memory") && strstr(b.evidence, "host RSS high-water of rank 2 is 95%"),
           "memory: %s (%s)", b.verdict, b.evidence);
    b = verdict(&cfg, sh, 0.0, -1.0);
    EXPECT(!strcmp(b.verdict, "communication"), "unknown memory is no verdict: %s", b.verdict);
    config_free(&cfg);
    printf("verdicts: every class, thresholds, precedence, evidence and knobs\n");
}

/* Verdict of a span with explicit inputs (the layout's and the plan's). */
static bottleneck_t classify(const config_t *cfg, const span_over_ranks_t *s, int world, double plan_imb,
                             double bins, int micro_batches, int max_len, int device)
{
    bottleneck_input_t in = {.span = s, .world = world, .plan_imbalance = plan_imb, .mfu = 0.3,
                             .memory_fraction = 0.1, .plan_bins = bins, .micro_batches = micro_batches,
                             .max_len_min = max_len, .device = device, .threads = 2, .ranks_per_node = 2,
                             .node_cpus = 2};
    bottleneck_t b;
    bottleneck_classify(cfg, &in, &b);
    return b;
}

/* issue 46: the knobs a verdict names must exist on this layout and act on
 * the measured cause: the pipeline bubble at pp > 1 (not overlap_comm at
 * dp 1), the group the waits were in (tp, ep, dp), a process starved of
 * CPU (not "compute"), packing that leaves micro-batches empty (not "more
 * samples"). */
static void test_layout_cpu_packing(void)
{
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 4, 0);
    enum { D = PHASE_DATA, F = PHASE_FORWARD, B = PHASE_BACKWARD, C = PHASE_COMM_WAIT, O = PHASE_OPTIMIZER,
           K = PHASE_CHECKPOINT, I = PHASE_IMBALANCE };
    double sh[PHASE_COUNT];
#define SHARES(d, f, b, c, o, k, i) (sh[D] = d, sh[F] = f, sh[B] = b, sh[C] = c, sh[O] = o, sh[K] = k, sh[I] = i)
    cfg.zero.overlap_comm = 0;
    cfg.zero.reduce_bucket_size = 1000;

    /* pp 2, dp 1: every wait in the pipeline's sends and receives */
    SHARES(0.0, 0.25, 0.25, 0.45, 0.02, 0.0, 0.03);
    span_over_ranks_t s = span_of(sh, 2);
    s.blocked_mean = 4.8;
    s.group_wait_mean[MONITOR_GROUP_PP] = 4.8;
    cfg.parallel.pipeline_parallel_size = 2;
    bottleneck_t b = classify(&cfg, &s, 2, 0.0, 1, 1, 128, 0);
    EXPECT(!strcmp(b.verdict, "pipeline") && strstr(b.evidence, "pipeline waits 45.0%") &&
               strstr(b.evidence, "pp 100%") && strstr(b.advice, "gradient_accumulation_steps") &&
               strstr(b.advice, "parallel.virtual_pipeline_stages") && strstr(b.advice, "(p-1)/(m+p-1) = 50%") &&
               !strstr(b.advice, "overlap_comm"),
           "pp 2 dp 1: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    /* the same waits at pp 1 (no pipeline) stay communication, and at dp 1
     * name no data-parallel knob */
    cfg.parallel.pipeline_parallel_size = 1;
    cfg.parallel.tensor_parallel_size = 2;
    s.group_wait_mean[MONITOR_GROUP_PP] = 0.0;
    s.group_wait_mean[MONITOR_GROUP_TP] = 4.8;
    b = classify(&cfg, &s, 2, 0.0, 1, 1, 128, 0);
    EXPECT(!strcmp(b.verdict, "communication") && strstr(b.evidence, "tp 100%") &&
               strstr(b.advice, "parallel.tensor_parallel_size (now 2)") && !strstr(b.advice, "overlap_comm") &&
               !strstr(b.advice, "reduce_bucket_size"),
           "tp 2 dp 1, waits in tp: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    /* tp 2 x dp 2: waits mostly in the gradient reduction name dp's knobs
     * first, tp's too when it holds a quarter */
    s.group_wait_mean[MONITOR_GROUP_DP] = 3.6;
    s.group_wait_mean[MONITOR_GROUP_TP] = 1.2;
    b = classify(&cfg, &s, 4, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "communication") && strstr(b.advice, "overlap_comm") &&
               strstr(b.advice, "tensor_parallel_size") &&
               strstr(b.advice, "overlap_comm") < strstr(b.advice, "tensor_parallel_size"),
           "tp 2 dp 2, waits 3:1 in dp: %s", b.advice);
    s.group_wait_mean[MONITOR_GROUP_TP] = 0.3;
    b = classify(&cfg, &s, 4, 0.0, 2, 2, 128, 0);
    EXPECT(!strstr(b.advice, "tensor_parallel_size"), "tp below a quarter of the waits is not named: %s", b.advice);
    /* ep: the all-to-all's knobs */
    cfg.parallel.tensor_parallel_size = 1;
    cfg.parallel.expert_parallel_size = 2;
    s.group_wait_mean[MONITOR_GROUP_DP] = 0.0;
    s.group_wait_mean[MONITOR_GROUP_TP] = 0.0;
    s.group_wait_mean[MONITOR_GROUP_EP] = 4.8;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "communication") && strstr(b.advice, "expert_parallel_size (now 2)") &&
               strstr(b.advice, "moe_a2a_chunks") && !strstr(b.advice, "overlap_comm"),
           "ep 2, waits in ep: %s", b.advice);
    /* no measured split: the knobs of the groups the layout has (dp 1:
     * none of ZeRO's) */
    cfg.parallel.expert_parallel_size = 1;
    cfg.parallel.tensor_parallel_size = 2;
    memset(s.group_wait_mean, 0, sizeof s.group_wait_mean);
    s.blocked_mean = 0.0;
    b = classify(&cfg, &s, 2, 0.0, 1, 1, 128, 0);
    EXPECT(!strcmp(b.verdict, "communication") && strstr(b.advice, "tensor_parallel_size") &&
               !strstr(b.advice, "overlap_comm"),
           "tp 2 dp 1 without a split: %s", b.advice);
    cfg.parallel.tensor_parallel_size = 1;

    /* a process that got a tenth of its core is starved, not compute-bound */
    SHARES(0.01, 0.40, 0.50, 0.05, 0.02, 0.0, 0.02);
    s = span_of(sh, 2);
    s.cpu_share_min = 0.08;
    s.cpu_share_max = 0.12;
    s.cpu_share_min_rank = 1;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "cpu") && strstr(b.evidence, "8% to 12%, lowest on rank 1") &&
               strstr(b.advice, "OMP_NUM_THREADS") && strstr(b.advice, "2 rank(s) x 2 thread(s) on 2 CPU(s)"),
           "starved: %s (%s; %s)", b.verdict, b.evidence, b.advice);
    s.cpu_share_max = 0.6;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "compute"), "one rank with its CPU is no starved job: %s", b.verdict);
    s.cpu_share_max = 0.12;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 1);
    EXPECT(!strcmp(b.verdict, "compute"), "a GPU run's host CPU share says nothing: %s", b.verdict);
    s.cpu_share_min = s.cpu_share_max = -1.0;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "compute"), "an unknown CPU share is no verdict: %s", b.verdict);

    /* a straggler whose process lacked CPU says so */
    SHARES(0.0, 0.35, 0.35, 0.05, 0.05, 0.0, 0.20);
    s = span_of(sh, 2);
    s.cpu_share_min = 0.1;
    s.cpu_share_min_rank = 1;
    b = classify(&cfg, &s, 2, 0.0, 2, 2, 128, 0);
    EXPECT(!strcmp(b.verdict, "imbalance") && strstr(b.advice, "rank 1 is a straggler") &&
               strstr(b.advice, "got 10% of the CPU"),
           "starved straggler: %s", b.advice);

    /* the seq-len warm-up's short samples fill one micro-batch of two: the
     * packer, not the sampler */
    cfg.loader.warmup = 1;
    cfg.data.seq_len = 1024;
    cfg.loader.packing = LOADER_PACK_BEST_FIT;
    b = classify(&cfg, &s, 2, 1.0, 1.0, 2, 64, 0);
    EXPECT(!strcmp(b.verdict, "imbalance") && strstr(b.advice, "data.packing is \"best_fit\"") &&
               strstr(b.advice, "fill 1.0 of its 2 micro-batches") && strstr(b.advice, "cuts them to 64 tokens") &&
               strstr(b.advice, "set data.packing to \"balanced\""),
           "warm-up packing: %s", b.advice);
    b = classify(&cfg, &s, 2, 1.0, 2.0, 2, 64, 0);
    EXPECT(strstr(b.advice, "lpt plan is 100.0% imbalanced") && !strstr(b.advice, "data.packing"),
           "every micro-batch used: the plan's advice: %s", b.advice);
    cfg.loader.packing = LOADER_PACK_BALANCED;
    b = classify(&cfg, &s, 2, 1.0, 1.0, 2, 64, 0);
    EXPECT(!strstr(b.advice, "data.packing"), "balanced packing already: %s", b.advice);
    config_free(&cfg);
    printf("verdicts that read the layout, the CPU share and the packing\n");
}

static void test_phase_timers(void)
{
    EXPECT(!strcmp(phase_name(PHASE_COMM_WAIT), "comm_wait") && !strcmp(phase_name(PHASE_IMBALANCE), "imbalance"),
           "phase names");
    phase_enable(1);
    EXPECT(phase_enabled() == PHASE_TIMERS_COMPILED, "enabled as compiled");
    phase_step_begin();
    PHASE_BEGIN(PHASE_FORWARD);
    phase_sleep(0.05);
    PHASE_END(PHASE_FORWARD);
    PHASE_BEGIN(PHASE_CHECKPOINT);
    phase_sleep(0.02);
    PHASE_END(PHASE_CHECKPOINT);
    phase_times_t t;
    phase_step_end(0.06, NULL, &t);
    if (PHASE_TIMERS_COMPILED)
        EXPECT(t.s[PHASE_FORWARD] >= 0.05 && t.s[PHASE_FORWARD] < 1.0 && t.s[PHASE_DATA] == 0.0 &&
                   t.s[PHASE_CHECKPOINT] >= 0.02,
               "a 50 ms sleep in forward: %g s; data %g; checkpoint %g", t.s[PHASE_FORWARD], t.s[PHASE_DATA],
               t.s[PHASE_CHECKPOINT]);
    EXPECT(t.s[PHASE_IMBALANCE] == 0.0 && t.s[PHASE_COMM_WAIT] == 0.0 && t.busy == 0.06,
           "no communication: no waits (%g, %g, busy %g)", t.s[PHASE_IMBALANCE], t.s[PHASE_COMM_WAIT], t.busy);
    /* the checkpoint belongs to one step only */
    phase_step_begin();
    phase_step_end(0.01, NULL, &t);
    EXPECT(t.s[PHASE_CHECKPOINT] == 0.0 && t.s[PHASE_FORWARD] == 0.0, "the next step starts from zero");
    phase_enable(0);
    phase_step_begin();
    PHASE_BEGIN(PHASE_FORWARD);
    PHASE_END(PHASE_FORWARD);
    phase_step_end(0.01, NULL, &t);
    EXPECT(t.s[PHASE_FORWARD] == 0.0, "disabled timers measure nothing");
    printf("phase timers: a known sleep, checkpoint carried one step, off\n");
}

static void test_peaks_and_absent_nvml(void)
{
    EXPECT(peak_flops_gpu("NVIDIA H100 80GB HBM3") == 989.4e12, "H100 SXM");
    EXPECT(peak_flops_gpu("NVIDIA H100 PCIe") == 756.0e12, "H100 PCIe before H100");
    EXPECT(peak_flops_gpu("NVIDIA A100-SXM4-80GB") == 312.0e12, "A100");
    EXPECT(peak_flops_gpu("NVIDIA A10") == 125.0e12, "A10");
    EXPECT(peak_flops_gpu("NVIDIA L40S") == 362.05e12, "L40S before L40");
    EXPECT(peak_flops_gpu("Some Future GPU") == 0.0, "unknown: 0");
    const double p = peak_flops_cpu(0.05);
    EXPECT(p > 1e8 && p < 1e14, "sgemm peak plausible: %g FLOP/s", p);
    EXPECT(memory_rss_peak() > 1000000 && memory_physical() > memory_rss_peak(), "RSS high-water %zu of %zu",
           memory_rss_peak(), memory_physical());
    /* the build machine has no NVIDIA driver; where one exists, an empty
     * bus id still names no device */
    EXPECT(nvml_open("", 1) == 0 && !nvml_available(), "no device: NVML unavailable, one line");
    nvml_sample_t s;
    EXPECT(nvml_read(&s) == 0 && s.util == -1.0 && s.power_w == -1.0, "reading without NVML: -1 fields");
    nvml_close();
    printf("GPU peak table, CPU sgemm peak, RSS, NVML absent\n");
}

int main(void)
{
    test_verdicts();
    test_layout_cpu_packing();
    test_phase_timers();
    test_peaks_and_absent_nvml();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
