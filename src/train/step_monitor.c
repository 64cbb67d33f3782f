#include "build_config.h"

#include "train/step_monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/memory.h"
#include "monitor/nvml.h"
#include "monitor/phase.h"
#include "util/timer.h"
#include "ops.h"
#include "parallel/world.h"
#include "util/error.h"

#ifdef HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/cuda_info.h"
#endif

double peak_flops_cpu(double seconds)
{
    /* Big enough for the BLAS to reach its blocked kernel and for the CPU
     * matmul to cut it into 4 blocks (so 1, 2 and 4 threads all take part;
     * a 384-square one runs whole on one thread: kernels/cpu/matmul.c),
     * small enough that one call is a few ms even on one slow core and its
     * 3 MiB of buffers barely move the process's peak RSS (which
     * tests/e2e/plan_memory.sh compares with plan memory). */
    const int M = 1024, N = 256, K = 256;
    const ops_t *o = ops_cpu();
    const size_t ab = (size_t)M * K * sizeof(float), bb = (size_t)N * K * sizeof(float),
                 cb = (size_t)M * N * sizeof(float);
    float *host = fb_malloc(ab);
    for (size_t i = 0; i < (size_t)M * K; i++)
        host[i] = (float)((i * 2654435761u) % 1000u) * 1e-3f - 0.5f;
    fb_act *a = o->alloc(ab), *b = o->alloc(bb), *c = o->alloc(cb);
    o->to_backend(a, host, ab);
    o->to_backend(b, host, bb);
    o->matmul(c, a, b, M, N, K, 0, 1, 0.0f); /* warm-up: pages, the BLAS's threads */
    double best = 0.0;
    const double start = timer_now();
    int calls = 0;
    /* the best call, not the mean: other processes on a shared node only
     * ever slow calls down */
    while (calls < 3 || timer_now() - start < seconds) {
        const double t0 = timer_now();
        o->matmul(c, a, b, M, N, K, 0, 1, 0.0f);
        const double dt = timer_now() - t0;
        const double rate = 2.0 * M * N * (double)K / (dt > 0 ? dt : 1e-9);
        best = rate > best ? rate : best;
        calls++;
    }
    o->release(a);
    o->release(b);
    o->release(c);
    free(host);
    return best;
}

double peak_flops_gpu(const char *name)
{
    /* NVIDIA datasheets, bf16 dense tensor-core (without sparsity), the
     * most specific names first */
    static const struct { const char *key; double tflops; } table[] = {
        {"GB200", 2500.0}, {"B200", 2250.0}, {"B100", 1750.0}, {"GH200", 989.4}, {"H200", 989.4},
        {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.4}, {"H800", 989.4}, {"A100", 312.0},
        {"A800", 312.0}, {"L40S", 362.05}, {"L40", 181.05}, {"L4", 121.0}, {"A40", 149.7}, {"A30", 165.0},
        {"A10", 125.0}, {"RTX 4090", 165.2}, {"RTX 6000 Ada", 364.2}, {"RTX A6000", 154.8},
    };
    for (size_t i = 0; name && i < sizeof table / sizeof *table; i++)
        if (strstr(name, table[i].key))
            return table[i].tflops * 1e12;
    return 0.0;
}

static void open_gpu(step_monitor_t *m)
{
#ifdef HAVE_CUDA
    char name[256] = "", pci[64] = "";
    int major = 0, minor = 0;
    if (cuda_device_identity(m->be->device, name, sizeof name, pci, sizeof pci, &major, &minor) != 0)
        snprintf(name, sizeof name, "unknown");
    nvml_open(pci, m->rank == 0);
    if (m->peak == 0.0) {
        m->peak = peak_flops_gpu(name);
        if (m->rank == 0) {
            if (m->peak > 0)
                printf("fabula: monitor: peak %.1f TFLOP/s per GPU (%s, bf16 dense, docs/monitoring.md)\n",
                       m->peak / 1e12, name);
            else
                printf("fabula: monitor: %s is not in the peak table: set monitor.peak_flops for the MFU\n", name);
        }
    }
#else
    (void)m;
#endif
}

void step_monitor_open(step_monitor_t *m, const config_t *cfg, const backend_t *be, int threads,
                       const groups_t *groups)
{
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->be = be;
    m->groups = groups;
    m->threads = threads;
    m->rank = parallel_rank();
    m->world = parallel_size();
    m->active = cfg->monitor.enabled && PHASE_TIMERS_COMPILED;
    phase_enable(m->active);
    if (!m->active) {
        if (m->rank == 0)
            printf("fabula: monitor: %s: no phase times, MFU or verdicts\n",
                   PHASE_TIMERS_COMPILED ? "off (monitor.enabled false)" : "built with --disable-phase-timers");
        return;
    }
    rank_monitor_init(&m->ranks, comm_world());
    m->peak = cfg->monitor.peak_flops;
    if (be->cuda) {
        open_gpu(m);
    } else if (m->peak == 0.0) {
        /* every rank at once, as they will compute: ranks that share cores
         * measure their share */
        m->peak = peak_flops_cpu(0.2);
        if (m->rank == 0)
            printf("fabula: monitor: peak %.2f GFLOP/s per rank (sgemm " PEAK_GEMM_SHAPE " measured with %d thread%s in 0.2 s; "
                   "monitor.peak_flops overrides)\n", m->peak / 1e9, threads, threads == 1 ? "" : "s");
    } else if (m->rank == 0) {
        printf("fabula: monitor: peak %.4g FLOP/s per rank (monitor.peak_flops)\n", m->peak);
    }
    m->peak_total = m->peak;
    if (m->world > 1)
        comm_allreduce(comm_world(), &m->peak_total, 1, COMM_F64, COMM_SUM);
}

void step_monitor_close(step_monitor_t *m)
{
    if (m->active)
        rank_monitor_free(&m->ranks);
    nvml_close();
    phase_enable(0);
    memset(m, 0, sizeof *m);
}

/* Seconds this process has blocked in each group's collectives so far
 * (their host and device twins together). */
static void group_waits(const groups_t *g, double out[MONITOR_NGROUPS])
{
    memset(out, 0, MONITOR_NGROUPS * sizeof *out);
    if (!g)
        return;
    const struct { int group; const comm_t *c; } of[] = {
        {MONITOR_GROUP_DP, g->dp}, {MONITOR_GROUP_DP, g->edp}, {MONITOR_GROUP_DP, g->dp_dev},
        {MONITOR_GROUP_DP, g->edp_dev}, {MONITOR_GROUP_TP, g->tp}, {MONITOR_GROUP_TP, g->tp_dev},
        {MONITOR_GROUP_EP, g->ep}, {MONITOR_GROUP_EP, g->ep_dev}, {MONITOR_GROUP_PP, g->pp},
        {MONITOR_GROUP_PP, g->emb},
    };
    for (size_t i = 0; i < sizeof of / sizeof *of; i++)
        for (int k = 0; of[i].c && k < COMM_KIND_COUNT; k++)
            out[of[i].group] += comm_stats(of[i].c, (comm_kind_t)k)->wait_seconds;
}

void step_monitor_begin(step_monitor_t *m)
{
    if (m->active) {
        phase_step_begin();
        group_waits(m->groups, m->group_wait0);
    }
    m->ndev = 0;
}

void step_monitor_device_begin(step_monitor_t *m, phase_id_t p)
{
#ifdef HAVE_CUDA
    if (!m->active || !m->be->cuda || m->ndev >= STEP_MONITOR_DEVICE_PAIRS)
        return;
    m->dev_from = 2 * m->ndev;
    cuda_event_mark(m->dev_from);
    m->dev[m->ndev].phase = p;
#else
    (void)m;
    (void)p;
#endif
}

void step_monitor_device_end(step_monitor_t *m, phase_id_t p)
{
#ifdef HAVE_CUDA
    if (!m->active || !m->be->cuda || m->ndev >= STEP_MONITOR_DEVICE_PAIRS || m->dev[m->ndev].phase != (int)p)
        return;
    cuda_event_mark(m->dev_from + 1);
    m->dev[m->ndev].from = m->dev_from;
    m->dev[m->ndev].to = m->dev_from + 1;
    m->ndev++;
#else
    (void)m;
    (void)p;
#endif
}

/* Replaces the host times of the phases timed on the device by their
 * device times (waits for the last event: the step is over anyway). */
static void device_times(const step_monitor_t *m, phase_times_t *t)
{
#ifdef HAVE_CUDA
    double dev[PHASE_COUNT] = {0};
    int seen[PHASE_COUNT] = {0};
    for (int i = 0; i < m->ndev; i++) {
        const double s = cuda_event_seconds(m->dev[i].from, m->dev[i].to);
        if (s >= 0) {
            dev[m->dev[i].phase] += s;
            seen[m->dev[i].phase] = 1;
        }
    }
    for (int p = 0; p < PHASE_COUNT; p++)
        if (seen[p])
            t->s[p] = dev[p];
#else
    (void)m;
    (void)t;
#endif
}

static double device_peak(const step_monitor_t *m)
{
#ifdef HAVE_CUDA
    if (m->be->cuda)
        return (double)cuda_bytes_peak();
#else
    (void)m;
#endif
    return 0.0;
}

static void classify(const step_monitor_t *m, const span_over_ranks_t *span, double plan_imb, double mfu,
                     double bins, int micro_batches, int max_len_min, const ranks_summary_t *rs, bottleneck_t *out)
{
    bottleneck_input_t in = {
        .span = span, .world = m->world, .plan_imbalance = plan_imb, .mfu = mfu, .memory_fraction = -1.0,
        .plan_bins = bins, .micro_batches = micro_batches, .max_len_min = max_len_min, .device = m->be->cuda,
        .threads = m->threads, .ranks_per_node = parallel_local_size(), .node_cpus = comm_node_cpus(),
    };
    const double phys = (double)memory_physical();
    const int local = parallel_local_size() > 0 ? parallel_local_size() : 1;
    if (phys > 0) {
        in.memory_fraction = rs->rss_max / (phys / local);
        in.memory_rank = rs->rss_max_rank;
        in.memory_what = "host RSS";
    }
    if (rs->device_max > 0 && rs->gpu_mem_total > 0 && rs->device_max / rs->gpu_mem_total > in.memory_fraction) {
        in.memory_fraction = rs->device_max / rs->gpu_mem_total;
        in.memory_rank = rs->device_max_rank;
        in.memory_what = "device memory";
    }
    bottleneck_classify(m->cfg, &in, out);
}

void step_monitor_end(step_monitor_t *m, const step_monitor_step_t *st, monitor_report_t *r)
{
    memset(r, 0, sizeof *r);
    if (!m->active)
        return;
    const long step = st->step;
    const double step_time = st->step_time, flops = st->flops, plan_imbalance = st->plan_imbalance;
    /* the monitor's own time, less what its collectives block waiting for
     * ranks that arrive later: that skew would be waited out in the next
     * step's first collective anyway */
    const double t_enter = timer_now(), w_enter = comm_wait_seconds_total();
    const double handles = phase_handles_cost();
    phase_times_t t;
    rank_step_extra_t x = {.cpu = st->cpu_time, .threads = m->threads};
    group_waits(m->groups, x.group_wait);
    for (int g = 0; g < MONITOR_NGROUPS; g++)
        x.group_wait[g] -= m->group_wait0[g];
    phase_step_end(step_time, comm_world(), &t);
    device_times(m, &t);
    rank_monitor_add(&m->ranks, &t, &x);
    m->ivl_flops += flops;
    m->tot_flops += flops;
    m->ivl_time += step_time + t.s[PHASE_CHECKPOINT];
    m->tot_time += step_time + t.s[PHASE_CHECKPOINT];
    m->ivl_plan_imb += plan_imbalance;
    m->tot_plan_imb += plan_imbalance;
    m->ivl_bins += (double)st->plan_bins;
    m->tot_bins += (double)st->plan_bins;
    if (m->ivl_steps == 0 || st->max_len < m->ivl_max_len)
        m->ivl_max_len = st->max_len;
    if (m->tot_steps == 0 || st->max_len < m->tot_max_len)
        m->tot_max_len = st->max_len;
    m->ivl_steps++;
    m->tot_steps++;

    r->active = 1;
    memcpy(r->time, t.s, sizeof r->time);
    r->model_flops = flops;
    r->flops_per_s = flops / (step_time > 0 ? step_time : 1e-9);
    r->mfu = m->peak_total > 0 ? r->flops_per_s / m->peak_total : -1.0;
    r->rss = (double)memory_rss_peak();

    const config_t *cfg = m->cfg;
    const long steps = cfg->run.steps;
    const int gather = step == 1 || step % cfg->run.steps_per_print == 0 || step == steps ||
                       cfg->monitor.wall_clock_breakdown;
    if (!gather) {
        r->overhead = handles + (timer_now() - t_enter) - (comm_wait_seconds_total() - w_enter);
        return;
    }
    nvml_sample_t gpu;
    const int have_gpu = nvml_read(&gpu);
    rank_monitor_gather(&m->ranks, comm_world(), r->rss, device_peak(m), have_gpu ? &gpu : NULL, &r->ranks);
    if (m->rank == 0) {
        r->gathered = 1;
        r->device = m->be->cuda;
        const double ivl_fps = m->ivl_flops / (m->ivl_time > 0 ? m->ivl_time : 1e-9);
        classify(m, &r->ranks.interval, m->ivl_plan_imb / m->ivl_steps,
                 m->peak_total > 0 ? ivl_fps / m->peak_total : -1.0, m->ivl_bins / m->ivl_steps, st->micro_batches,
                 m->ivl_max_len, &r->ranks, &r->bottleneck);
        if (step == steps) {
            r->final = 1;
            r->run_flops_per_s = m->tot_flops / (m->tot_time > 0 ? m->tot_time : 1e-9);
            r->run_mfu = m->peak_total > 0 ? r->run_flops_per_s / m->peak_total : -1.0;
            classify(m, &r->ranks.total, m->tot_plan_imb / m->tot_steps, r->run_mfu, m->tot_bins / m->tot_steps,
                     st->micro_batches, m->tot_max_len, &r->ranks, &r->run_bottleneck);
        }
    }
    m->ivl_flops = m->ivl_time = m->ivl_plan_imb = m->ivl_steps = m->ivl_bins = 0.0;
    r->overhead = handles + (timer_now() - t_enter) - (comm_wait_seconds_total() - w_enter);
}
