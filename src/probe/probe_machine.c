/* What `fabula plan calibrate --write-machine` measures besides the
 * attention cost, on every rank of the job at once (so a rank sees the
 * cores, memory bandwidth and links the others leave it, as in training),
 * and the machine file it writes (docs/plan.md, "Machine files"). */
#include "probe/probe_machine.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/timer.h"
#include "ops.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "train/step_monitor.h"
#include "util/error.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double probe_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double probe_max_over_ranks(double x)
{
    comm_allreduce(comm_world(), &x, 1, COMM_F64, COMM_MAX);
    return x;
}

double probe_adamw_bandwidth(const ops_t *o)
{
    /* well above the caches, so the update streams from memory as a real
     * optimizer step over millions of parameters does (a GPU's 50 MB L2
     * needs more than a CPU's) */
    const size_t n = o->device_memory ? PROBE_ADAMW_DEVICE_PARAMS : (size_t)1 << 22;
    float *host = fb_malloc(n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)((i * 2654435761u) % 1000u) * 1e-6f;
    float *p = o->alloc(n * sizeof *p), *g = o->alloc(n * sizeof *g), *m = o->alloc(n * sizeof *m),
          *v = o->alloc(n * sizeof *v);
    o->to_backend(g, host, n * sizeof *g);
    o->synchronize();
    double t[7];
    comm_barrier(comm_world());
    for (int r = -1; r < 7; r++) {
        const double t0 = timer_now();
        o->adamw(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, r + 2);
        o->synchronize();
        if (r >= 0)
            t[r] = timer_now() - t0;
    }
    o->release(p);
    o->release(g);
    o->release(m);
    o->release(v);
    free(host);
    const double sec = probe_max_over_ranks(probe_median(t, 7));
    return PROBE_ADAMW_BYTES * (double)n / sec;
}

double probe_device_gemm_flops(const ops_t *o, double seconds)
{
    /* random values, not zeros: a GPU's matmul runs faster on zeros */
    const int n = PROBE_DEVICE_GEMM;
    const size_t count = (size_t)n * n;
    float *host = fb_malloc(count * sizeof *host);
    for (size_t i = 0; i < count; i++)
        host[i] = (float)((i * 2654435761u) % 1000u) * 1e-3f - 0.5f;
    float *stage = o->alloc(count * sizeof *stage);
    fb_act *a = o->alloc(count * o->act_bytes), *b = o->alloc(count * o->act_bytes),
           *c = o->alloc(count * o->act_bytes);
    o->to_backend(stage, host, count * sizeof *stage);
    o->to_act(a, stage, count);
    o->to_act(b, stage, count);
    o->matmul(c, a, b, n, n, n, 0, 1, 0.0f); /* warm-up: the library's plan, the clocks */
    o->synchronize();
    enum { BATCH = 10 };
    double best = 0.0;
    const double start = timer_now();
    for (int k = 0; k < 3 || timer_now() - start < seconds; k++) {
        const double t0 = timer_now();
        for (int i = 0; i < BATCH; i++)
            o->matmul(c, a, b, n, n, n, 0, 1, 0.0f);
        o->synchronize();
        const double dt = timer_now() - t0;
        const double rate = BATCH * 2.0 * (double)n * n * n / (dt > 0 ? dt : 1e-9);
        best = rate > best ? rate : best;
    }
    o->release(stage);
    o->release(a);
    o->release(b);
    o->release(c);
    free(host);
    return -probe_max_over_ranks(-best);
}

double probe_host_link(const ops_t *o)
{
    const size_t bytes = (size_t)256 << 20;
    void *host = o->host_alloc(bytes), *dev = o->alloc(bytes);
    double t[5];
    o->to_backend(dev, host, bytes); /* warm-up: the pages, the copy engine */
    o->synchronize();
    for (int r = 0; r < 5; r++) {
        const double t0 = timer_now();
        o->to_backend(dev, host, bytes);
        o->synchronize();
        t[r] = timer_now() - t0;
    }
    o->release(dev);
    o->host_release(host);
    return (double)bytes / probe_max_over_ranks(probe_median(t, 5));
}

/* The world, or NULL and why on one rank (nothing between ranks to time). */
static comm_t *world_of_two(const char *nothing, char *why, size_t whylen)
{
    comm_t *w = comm_world();
    if (comm_size(w) >= 2)
        return w;
    snprintf(why, whylen, "one rank: %s (run calibrate under mpiexec -n 2 or more)", nothing);
    return NULL;
}

int probe_links(double *latency, double *bandwidth, char *why, size_t whylen)
{
    comm_t *w = world_of_two("no link to measure", why, whylen);
    if (!w)
        return -1;
    const int n = comm_size(w);
    /* latency: a one-float all-reduce, the tree's 2 ceil(log2 n) hops */
    enum { SMALL = 200, LARGE = 5 };
    float x = 1.0f;
    double ts[SMALL];
    for (int r = -20; r < SMALL; r++) {
        comm_barrier(w);
        const double t0 = timer_now();
        comm_allreduce(w, &x, 1, COMM_F32, COMM_SUM);
        if (r >= 0)
            ts[r] = timer_now() - t0;
    }
    const double t_small = probe_max_over_ranks(probe_median(ts, SMALL));
    const double hops = 2.0 * ceil(log2((double)n));
    *latency = t_small / hops;
    /* bandwidth: a 16 MiB all-reduce, the ring's 2 (n-1)/n B over the link
     * after its 2 (n-1) latencies (plan_coll_time inverted) */
    const size_t count = (size_t)1 << 22;
    float *buf = fb_calloc(count, sizeof *buf);
    double tl[LARGE];
    for (int r = -1; r < LARGE; r++) {
        comm_barrier(w);
        const double t0 = timer_now();
        comm_allreduce(w, buf, count, COMM_F32, COMM_SUM);
        if (r >= 0)
            tl[r] = timer_now() - t0;
    }
    free(buf);
    const double t_large = probe_max_over_ranks(probe_median(tl, LARGE));
    const double bytes = (double)count * sizeof(float);
    const double rest = t_large - 2.0 * (n - 1) * *latency;
    if (!(rest > 0)) {
        snprintf(why, whylen, "the 16 MiB all-reduce (%.3g s) took no longer than its latencies", t_large);
        return -1;
    }
    *bandwidth = 2.0 * (n - 1) / n * bytes / rest;
    return 0;
}

/* `calls` sgemm calls of peak_flops_cpu's shape: the compute a prefetch
 * or a bucket's reduction hides under */
static double gemm_work(const ops_t *o, fb_act *a, fb_act *b, fb_act *c, int calls)
{
    const double t0 = timer_now();
    for (int i = 0; i < calls; i++)
        o->matmul(c, a, b, 1024, 256, 256, 0, 1, 0.0f);
    return timer_now() - t0;
}

int probe_overlap(double *overlap, double *comm_s, char *why, size_t whylen)
{
    comm_t *w = world_of_two("nothing to overlap", why, whylen);
    if (!w)
        return -1;
    const int n = comm_size(w);
    /* a ZeRO-3 prefetch's size: each rank's 4 MiB shard all-gathered */
    const size_t each = (size_t)1 << 20;
    size_t *counts = fb_malloc((size_t)n * sizeof *counts), *displs = fb_malloc((size_t)n * sizeof *displs);
    for (int r = 0; r < n; r++)
        counts[r] = each, displs[r] = (size_t)r * each;
    float *buf = fb_calloc(each * (size_t)n, sizeof *buf);
    const ops_t *o = ops_cpu();
    const size_t ab = (size_t)1024 * 256 * sizeof(float), bb = (size_t)256 * 256 * sizeof(float);
    fb_act *a = o->alloc(ab), *b = o->alloc(bb), *c = o->alloc(ab); /* C is [1024, 256] like A */
    float *host = fb_calloc(ab / sizeof(float), sizeof *host);
    for (size_t i = 0; i < ab / sizeof(float); i++)
        host[i] = (float)((i * 2654435761u) % 1000u) * 1e-3f - 0.5f;
    o->to_backend(a, host, ab);
    o->to_backend(b, host, bb);
    free(host);
    enum { REPS = 7 };
    double tc[REPS], tw[REPS], tb[REPS];
    /* the gather alone, started and waited as a blocking one */
    for (int r = -1; r < REPS; r++) {
        comm_barrier(w);
        const double t0 = timer_now();
        comm_request_t *q = comm_iallgatherv_inplace(w, buf, counts, displs, COMM_F32);
        comm_wait(&q);
        if (r >= 0)
            tc[r] = timer_now() - t0;
    }
    const double t_comm = probe_max_over_ranks(probe_median(tc, REPS));
    /* compute of about the gather's length, alone */
    gemm_work(o, a, b, c, 1);
    const double one = probe_max_over_ranks(gemm_work(o, a, b, c, 3) / 3);
    const int calls = one > 0 && t_comm / one > 1 ? (int)fmin(ceil(t_comm / one), 1000) : 1;
    /* then the gather started, the compute run without a library call (as
     * a block's forward runs between two block boundaries), and waited */
    for (int r = -1; r < REPS; r++) {
        comm_barrier(w);
        const double tw0 = gemm_work(o, a, b, c, calls);
        comm_barrier(w);
        const double t0 = timer_now();
        comm_request_t *q = comm_iallgatherv_inplace(w, buf, counts, displs, COMM_F32);
        gemm_work(o, a, b, c, calls);
        comm_wait(&q);
        if (r >= 0)
            tw[r] = tw0, tb[r] = timer_now() - t0;
    }
    o->release(a);
    o->release(b);
    o->release(c);
    free(buf);
    free(counts);
    free(displs);
    const double t_work = probe_max_over_ranks(probe_median(tw, REPS));
    const double t_both = probe_max_over_ranks(probe_median(tb, REPS));
    /* hidden: what the pair saved over running one after the other, of the
     * most it could save (the shorter of the two) */
    const double most = fmin(t_comm, t_work);
    if (!(most > 0)) {
        snprintf(why, whylen, "the gather (%.3g s) or the compute (%.3g s) took no time", t_comm, t_work);
        return -1;
    }
    *overlap = fmin(1.0, fmax(0.0, (t_comm + t_work - t_both) / most));
    *comm_s = t_comm;
    return 0;
}

static json_t *figure(double value, const char *source, int assumption)
{
    json_t *f = json_object();
    json_object_set_new(f, "value", json_real(value));
    json_object_set_new(f, "source", json_string(source));
    if (assumption)
        json_object_set_new(f, "assumption", json_true());
    return f;
}

static double node_memory(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0.0;
}

void probe_write_machine(const char *path, const probe_machine_t *c)
{
    char src[1024];
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string("fabula-machine-1"));
    json_object_set_new(o, "name", json_string(c->name));
    if (c->device)
        snprintf(src, sizeof src, "%d rank%s, each on the GPU %s (the CUDA backend) and %d thread%s of %s (%s)",
                 c->ranks, c->ranks == 1 ? "" : "s", c->device, c->threads, c->threads == 1 ? "" : "s", c->cpu,
                 c->nodes);
    else
        snprintf(src, sizeof src, "%d rank%s of %d thread%s each on %s (%s)", c->ranks, c->ranks == 1 ? "" : "s",
                 c->threads, c->threads == 1 ? "" : "s", c->cpu, c->nodes);
    json_object_set_new(o, "description", json_string(src));
    snprintf(src, sizeof src, "%s, %d rank%s (%s)", c->command, c->ranks, c->ranks == 1 ? "" : "s", c->mpi);
    json_object_set_new(o, "calibrated", json_string(src));
    snprintf(src, sizeof src, "measured: ranks per node of the calibrating job (%s)", c->nodes);
    json_object_set_new(o, "devices_per_node", figure(c->local, src, 0));
    snprintf(src, sizeof src,
             "measured: forward + backward of %s's model (%d tokens as samples of %d and of %d, median of %d "
             "(the long ones spread %.1f%%), the ranks' mean%s; weights %s%s, tokens %s%s), the linear part of "
             "model_flops_packed over its time%s (docs/plan.md, \"Machine files\")",
             c->config, c->tokens, c->shortlen, c->longlen, c->repeats, 100 * c->spread,
             c->cpu_clock ? ", process CPU seconds" : "",
             c->init_from ? "from model.init_from " : "initial", c->init_from ? c->init_from : "",
             c->data ? "from " : "random ids", c->data ? c->data : "",
             c->expert_flops > 0 ? ", both less the kept expert assignments' (their FLOPs at expert_flops)" : "");
    json_object_set_new(o, "flops", figure(c->dense_flops, src, 0));
    if (c->attention_flops > 0) {
        snprintf(src, sizeof src, "measured: the same two passes, the attention part (12 L d per attended position) "
                                  "over the extra time of the long samples");
        json_object_set_new(o, "attention_flops", figure(c->attention_flops, src, 0));
    }
    if (c->expert_flops > 0) {
        snprintf(src, sizeof src,
                 "measured: long passes of the model as configured (%.1f%% of the expert assignments kept) "
                 "alternating with the same weights and tokens at capacity factor %g (%.1f%% kept), %d pairs: the "
                 "dropped assignments' expert FLOPs over the median of the pairs' time differences%s",
                 100 * c->kept_configured, PROBE_LOW_CAPACITY, 100 * c->kept_low, c->expert_pairs,
                 c->cpu_clock ? " (process CPU seconds)" : "");
        json_object_set_new(o, "expert_flops", figure(c->expert_flops, src, 0));
    }
    if (c->device)
        snprintf(src, sizeof src, "measured: best of batches of 10 %dx%dx%d matmuls of random values in the compute "
                                  "dtype through the CUDA ops table's matmul (cuBLASLt, fp32 accumulation) on every "
                                  "rank at once, the slowest rank's", PROBE_DEVICE_GEMM, PROBE_DEVICE_GEMM,
                 PROBE_DEVICE_GEMM);
    else
        snprintf(src, sizeof src, "measured: best of repeated " PEAK_GEMM_SHAPE " sgemm through the CPU ops table's "
                                  "matmul at %d thread%s on every rank at once (peak_flops_cpu)",
                 c->threads, c->threads == 1 ? "" : "s");
    json_object_set_new(o, "gemm_flops", figure(c->gemm_flops, src, 0));
    snprintf(src, sizeof src, "measured: the ops table's AdamW over %dM fp32 parameters%s on every rank at once, %g "
                              "bytes a parameter, median of 7",
             (int)((c->device ? PROBE_ADAMW_DEVICE_PARAMS : (size_t)1 << 22) >> 20),
             c->device ? " in device memory" : "", PROBE_ADAMW_BYTES);
    json_object_set_new(o, "memory_bandwidth", figure(c->adamw_bandwidth, src, 0));
    const double mem = node_memory();
    if (!c->device)
        json_object_set_new(o, "device_memory",
                            figure(mem / (c->local > 0 ? c->local : 1),
                                   "measured: the node's physical memory (sysconf) over the ranks per node: the CPU "
                                   "backend's device is host memory", 0));
    else if (c->device_memory > 0)
        json_object_set_new(o, "device_memory", figure(c->device_memory, "measured: the GPU's memory (NVML)", 0));
    else
        json_object_set_new(o, "device_memory", figure(80.0 * (1 << 30), "not measured (NVML could not say); assumed "
                                                                         "80 GiB, an H100's", 1));
    json_object_set_new(o, "host_memory", figure(mem, "measured: the node's physical memory (sysconf)", 0));
    if (c->device) {
        snprintf(src, sizeof src, "measured: 256 MiB copies from page-locked host memory to the GPU on every rank at "
                                  "once, median of 5, the slowest rank's");
        json_object_set_new(o, "host_link_bandwidth", figure(c->host_link, src, 0));
    } else {
        json_object_set_new(o, "host_link_bandwidth",
                            figure(0, "the CPU backend: device and host are the same memory (offload is a memcpy, "
                                      "counted in memory_bandwidth)", 0));
    }
    json_t *intra = json_object(), *inter = json_object();
    /* the CUDA backend's collectives run through NCCL on device buffers,
     * which these host-buffer MPI figures do not time */
    const char *host_only = c->device ? "; host buffers, not the GPUs' NCCL collectives" : "";
    if (c->have_links) {
        snprintf(src, sizeof src, "measured: median one-float MPI all-reduce over %d ranks (%s) / 2 ceil(log2 %d), "
                                  "slowest rank%s", c->ranks, c->mpi, c->ranks, host_only);
        json_object_set_new(intra, "latency_s", figure(c->latency, src, 0));
        snprintf(src, sizeof src, "measured: median 16 MiB MPI all-reduce over %d ranks (%s), ring model "
                                  "2 (n-1)/n B / (t - 2 (n-1) alpha), slowest rank%s", c->ranks, c->mpi, host_only);
        json_object_set_new(intra, "bandwidth", figure(c->bandwidth, src, 0));
    } else {
        if (c->device)
            snprintf(src, sizeof src, "not measured (%s); assumed the host link's rate, below any GPU-to-GPU link of "
                                      "a node (take the links of a shipped GPU machine file to plan several GPUs)",
                     c->links_why);
        else
            snprintf(src, sizeof src, "not measured (%s); assumed half of memory_bandwidth: a shared-memory MPI "
                                      "copy reads and writes every byte", c->links_why);
        json_object_set_new(intra, "latency_s", figure(2e-6, "not measured (calibrated on one rank); assumed 2 us, "
                                                              "a shared-memory MPI message", 1));
        json_object_set_new(intra, "bandwidth", figure(c->device ? c->host_link : c->adamw_bandwidth / 2, src, 1));
    }
    json_object_set_new(inter, "latency_s",
                        figure(json_real_value(json_object_get(json_object_get(intra, "latency_s"), "value")),
                               "not measured: the calibrating job ran on one node; the intra figure repeated", 1));
    json_object_set_new(inter, "bandwidth",
                        figure(json_real_value(json_object_get(json_object_get(intra, "bandwidth"), "value")),
                               "not measured: the calibrating job ran on one node; the intra figure repeated", 1));
    json_object_set_new(o, "intra", intra);
    json_object_set_new(o, "inter", inter);
    json_t *sync = json_object();
    snprintf(src, sizeof src, "measured: the ranks of the calibrating job (%s)", c->nodes);
    json_object_set_new(sync, "ranks", figure(c->ranks, src, 0));
    if (c->ranks > 1) {
        snprintf(src, sizeof src, "measured: the long passes of %s's model on %d ranks at once, each after a barrier: "
                                  "median over %d of the slowest rank's time over the ranks' mean, less 1",
                 c->config, c->ranks, c->repeats);
        json_object_set_new(sync, "per_pass", figure(c->wait_pass, src, 0));
        snprintf(src, sizeof src, "measured: the same passes with the ranks meeting (a barrier) at every block "
                                  "forward and backward: median over %d of the slowest rank's time over the plain "
                                  "passes' mean, less 1", c->repeats);
        json_object_set_new(sync, "per_block", figure(c->wait_block, src, 0));
    } else {
        json_object_set_new(sync, "per_pass", figure(0, "one rank: nothing to wait for", 0));
        json_object_set_new(sync, "per_block", figure(0, "one rank: nothing to wait for", 0));
    }
    json_object_set_new(o, "sync_wait", sync);
    if (c->have_overlap) {
        snprintf(src, sizeof src, "measured: a %d-rank all-gather of 4 MiB a rank (%.3g s alone) started, then as "
                                  "long of sgemm with no MPI call, then waited: the time saved over the two one "
                                  "after the other, of the shorter one; median of 7, slowest rank (%s)",
                 c->ranks, c->overlap_comm_s, c->mpi);
        json_object_set_new(o, "overlap", figure(c->overlap, src, 0));
    }
    if (c->node_cpus > 0) {
        snprintf(src, sizeof src, "measured: %d rank%s per node over the %d CPU%s of their affinity masks", c->local,
                 c->local == 1 ? "" : "s", c->node_cpus, c->node_cpus == 1 ? "" : "s");
        json_object_set_new(o, "ranks_per_cpu", figure((double)c->local / c->node_cpus, src, 0));
    }
    if (json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0)
        fb_fatal(FB_EXIT_IO, "fabula plan calibrate: cannot write machine file %s: %s", path, strerror(errno));
    json_decref(o);
}
