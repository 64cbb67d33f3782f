/* src/monitor: the bottleneck verdict on constructed time splits (each
 * class, its threshold, which class wins, the evidence and the knob), the
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
    return s;
}

static bottleneck_t verdict(const config_t *cfg, const double share[PHASE_COUNT], double plan_imb, double mem)
{
    span_over_ranks_t s = span_of(share, 4);
    bottleneck_input_t in = {&s, 4, plan_imb, 0.3, mem, 2, "host RSS"};
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
    test_phase_timers();
    test_peaks_and_absent_nvml();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
