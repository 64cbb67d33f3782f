/* `fabula plan calibrate`: measures the attention cost c of the sampler's
 * cost model len + c·len² (docs/loader.md) on the config's backend
 * (run.backend: the CPU, or a GPU through the CUDA backend), for
 * the config's model: the forward and backward of one step's worth of
 * tokens, once as many short samples and once as few long ones. Per token a
 * packed sample of length L costs a + b·L (the linear layers, and attention
 * over the sample so far), so two lengths give b / a = c. A measured number
 * varies from run to run, and the plan must be the same on every rank and
 * every rerun, so the result is printed for the user to put in
 * data.attention_cost, never used behind their back.
 *
 * With --write-machine the same two passes also give the model's sustained
 * FLOP/s of the linear layers and of attention (two lengths, two unknowns),
 * time_experts the experts' own rate (two capacities), and
 * probe_machine.c adds the sgemm rate, AdamW's memory bandwidth
 * and, under mpiexec, the MPI latency and bandwidth: a machine file for
 * `fabula plan time` (docs/plan.md). Every rank measures at once, at the
 * threads train would give it, so a rank sees what training leaves it. */
#include "build_config.h"

#include "probe/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe/probe_machine.h"
#include "config/config.h"
#include "hf/hf_import.h"
#include "loader/batch.h"
#include "loader/data_source.h"
#include "model/config_resolve.h"
#include "model/model.h"
#include "monitor/nvml.h"
#include "ops.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "rng.h"
#include "train/backend.h"
#include "train/step_monitor.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/timer.h"

#ifdef HAVE_CUDA
#include "cuda/cuda_info.h"
#endif

/* --clock cpu: the process's CPU seconds instead of the wall clock, so
 * that on a machine shared with other jobs a pass costs the work it did,
 * not the time others held the cores (bench/plan_validate.sh --clock cpu
 * measures training the same way; with one thread a rank they agree with
 * the wall clock of an idle machine). */
static int pass_cpu_clock;

static double now(void)
{
    return pass_cpu_clock ? timer_process_cpu() : timer_now();
}

/* T tokens cut into samples of `len` (the last one shorter when len does
 * not divide T). Each rank draws its own tokens, as data-parallel ranks
 * train on other samples: their routers then give their experts other
 * loads, one source of the waits "sync_wait" measures. The tokens are
 * random ids, or with --data the config's training samples laid end to
 * end: a trained router (model.init_from) routes real text as training
 * does and random ids as it never saw them. Either way every timed pass
 * draws new ones, as training never repeats a micro-batch: the same tokens
 * again would give every expert the same row count again, and the CUDA
 * backend's matmul plans are cached per shape (kernels/cuda/matmul.cu), so
 * repeated passes would skip the host-side plan queries that training's
 * ever-changing expert rows pay. */
typedef struct pass_input {
    int32_t *tokens, *positions, *targets, *cu;
    model_input_t in;
} pass_input_t;

/* --data: the training samples, and a batch to read them through */
typedef struct token_source {
    data_source_t ds;
    batch_t batch;
} token_source_t;

/* Fills p's tokens and targets: draw `draw` of this rank's tokens. */
static void pass_fill(pass_input_t *p, const model_config_t *mc, token_source_t *src, uint64_t draw)
{
    const int T = p->in.T;
    const uint64_t seed = 77 + (uint64_t)parallel_rank();
    if (!src) {
        const uint64_t stream = draw ? fb_hash2(seed, draw) : seed;
        for (int t = 0; t < T; t++)
            p->tokens[t] = (int32_t)(fb_hash2(stream, (uint64_t)t) % (uint64_t)mc->vocab_size);
    } else {
        /* whole samples in a rank- and draw-dependent random order, as the
         * sampler takes them, until T tokens are laid down */
        const uint64_t stream = fb_hash2(seed, draw);
        for (int t = 0, k = 0; t < T; k++) {
            const int64_t id = (int64_t)(fb_hash2(stream, (uint64_t)k) % (uint64_t)src->ds.n);
            data_source_batch(&src->ds, &src->batch, &id, &src->ds.lens[id], 1);
            for (int i = 0; i < src->batch.T && t < T; i++, t++) {
                const int32_t tok = src->batch.tokens[i];
                if (tok < 0 || tok >= mc->vocab_size)
                    fb_fatal(FB_EXIT_DATA, "fabula plan calibrate: --data: %s has token %d, outside "
                             "model.vocab_size = %d", src->ds.what, (int)tok, mc->vocab_size);
                p->tokens[t] = tok;
            }
        }
    }
    for (int s = 0; s < p->in.nseq; s++)
        for (int t = p->cu[s]; t < p->cu[s + 1]; t++)
            p->targets[t] = t + 1 < p->cu[s + 1] ? p->tokens[t + 1] : -1;
}

static void pass_make(pass_input_t *p, const model_config_t *mc, int T, int len, token_source_t *src)
{
    const int nseq = (T + len - 1) / len;
    p->tokens = fb_malloc((size_t)T * sizeof *p->tokens);
    p->positions = fb_malloc((size_t)T * sizeof *p->positions);
    p->targets = fb_malloc((size_t)T * sizeof *p->targets);
    p->cu = fb_malloc((size_t)(nseq + 1) * sizeof *p->cu);
    p->cu[0] = 0;
    for (int s = 0; s < nseq; s++) {
        p->cu[s + 1] = (s + 1) * len < T ? (s + 1) * len : T;
        for (int t = p->cu[s]; t < p->cu[s + 1]; t++)
            p->positions[t] = t - p->cu[s];
    }
    p->in = (model_input_t){p->tokens, p->positions, p->targets, p->cu, T, nseq, NULL, 0};
    pass_fill(p, mc, src, 0);
}

static void pass_free(pass_input_t *p)
{
    free(p->tokens);
    free(p->positions);
    free(p->targets);
    free(p->cu);
}

/* *dropped: the expert assignments capacity dropped in the pass */
static double pass_time(model_t *m, const pass_input_t *p, long *dropped)
{
    model_scales_t sc = {.lm_denominator = (double)p->in.T, .mb_weight = 1.0, .training = 0};
    model_stats_t st;
    const ops_t *o = model_ops(m);
    model_zero_grads(m);
    /* a device runs behind the host: time from an empty queue to the
     * pass's last op done */
    o->synchronize();
    const double t0 = now();
    model_forward(m, &p->in, &sc, &st);
    model_backward(m);
    o->synchronize();
    const double t = now() - t0;
    *dropped = st.dropped;
    return t;
}

/* One pass on every rank at once: the ranks start together after a
 * barrier, as after a collective; *mean is the ranks' mean time and
 * *slowest the slowest rank's, the time a collective after the pass would
 * wait for. */
static void pass_together(model_t *m, const pass_input_t *p, double *mean, double *slowest, double *dropped)
{
    comm_t *w = comm_world();
    comm_barrier(w);
    long d;
    double sum[2] = {pass_time(m, p, &d), 0}, max = sum[0];
    sum[1] = (double)d;
    comm_allreduce(w, sum, 2, COMM_F64, COMM_SUM);
    comm_allreduce(w, &max, 1, COMM_F64, COMM_MAX);
    *mean = sum[0] / comm_size(w);
    *slowest = max;
    *dropped = sum[1] / comm_size(w);
}

/* Hooks that meet the other ranks at every block, forward and backward, as
 * ZeRO 2/3's per-block reductions and gathers and tensor and expert
 * parallelism's per-layer exchanges do, and leave the parameters and
 * gradients in the model's own buffers. */
static void meet_params_acquire(void *ctx, int block, int backward, float *base[PARAM_NGROUPS])
{
    (void)block, (void)backward;
    comm_barrier(comm_world());
    for (int g = 0; g < PARAM_NGROUPS; g++)
        base[g] = model_params(ctx, g);
}

static void own_grads_acquire(void *ctx, int block, float *base[PARAM_NGROUPS])
{
    (void)block;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        base[g] = model_grads(ctx, g);
}

/* What time_passes measures: the median over the passes of the ranks' mean
 * time at each length, and (when asked) how far the slowest rank lags:
 * the median over the passes of slowest / mean - 1 of the long passes as
 * they are (ranks meeting once per pass) and with the ranks meeting at
 * every block. */
typedef struct pass_times {
    double t_short, t_long;
    double spread; /* (slowest - fastest) / median of the long passes: how far one calibration can be off */
    double wait_pass, wait_block;
    double dropped_short, dropped_long; /* assignments dropped, mean over ranks and passes */
} pass_times_t;

/* The median, not the fastest: training's step is judged by its median
 * too, and every pass here is timed as a step is, the ranks together.
 * With the passes alternating (short, long, long meeting per block), a
 * machine whose speed drifts slows all alike, and the lags are ratios
 * within one pass. */
static void time_passes(model_t *m, const model_config_t *mc, int T, int s, int l, int repeats, int waits,
                        token_source_t *src, pass_times_t *out)
{
    pass_input_t ps, pl;
    pass_make(&ps, mc, T, s, src);
    pass_make(&pl, mc, T, l, src);
    const int meet = waits && parallel_size() > 1;
    double *a = fb_malloc((size_t)repeats * sizeof *a), *b = fb_malloc((size_t)repeats * sizeof *b);
    double *lag = fb_malloc((size_t)repeats * sizeof *lag), *blag = fb_malloc((size_t)repeats * sizeof *blag);
    const model_hooks_t meet_hooks = {.ctx = m, .params_acquire = meet_params_acquire,
                                      .grads_acquire = own_grads_acquire};
    out->dropped_short = out->dropped_long = 0;
    for (int r = -1; r < repeats; r++) {
        double xs, xs_max, xl, xl_max, xb = 0, xb_max = 0, ds, dl, db;
        /* training's micro-batches differ from step to step, and so do
         * their expert loads: every repeat draws new tokens (pass_fill) */
        if (r >= 0) {
            pass_fill(&ps, mc, src, 2 * (uint64_t)r + 1);
            pass_fill(&pl, mc, src, 2 * (uint64_t)r + 2);
        }
        pass_together(m, &ps, &xs, &xs_max, &ds);
        pass_together(m, &pl, &xl, &xl_max, &dl);
        if (meet) {
            model_set_hooks(m, &meet_hooks);
            pass_together(m, &pl, &xb, &xb_max, &db);
            model_set_hooks(m, NULL);
        }
        if (r < 0)
            continue;
        out->dropped_short += ds / repeats;
        out->dropped_long += dl / repeats;
        a[r] = xs, b[r] = xl;
        lag[r] = xl_max / xl - 1;
        blag[r] = meet ? xb_max / xl - 1 : 0;
    }
    double lo = b[0], hi = b[0];
    for (int r = 1; r < repeats; r++)
        lo = fmin(lo, b[r]), hi = fmax(hi, b[r]);
    out->t_short = probe_median(a, repeats);
    out->t_long = probe_median(b, repeats);
    out->spread = out->t_long > 0 ? (hi - lo) / out->t_long : 0.0;
    out->wait_pass = fmax(0.0, probe_median(lag, repeats));
    out->wait_block = fmax(0.0, probe_median(blag, repeats));
    free(a);
    free(b);
    free(lag);
    free(blag);
    pass_free(&ps);
    pass_free(&pl);
}

/* The experts' rate: long passes of m (the model as configured) alternating
 * with `low` (the same weights at PROBE_LOW_CAPACITY), the same tokens in
 * a pair. A pair's time difference is what the assignments `low` drops
 * cost, their router, permutation and matmuls: the time a drop saves,
 * which plan time takes off training's compute. Many small expert GEMMs
 * run at another rate than the model's mean: on the 2-core VM the experts
 * held 74% of the validation model's FLOPs but 55% of its time. Pairs
 * difference away a drifting machine. Returns FLOP/s (0 when the
 * difference is not positive: nothing measurable); *kept_m, *kept_low: the
 * kept shares of the assignments. */
static double time_experts(model_t *m, model_t *low, const model_config_t *mc, int T, int len, int repeats,
                           token_source_t *src, double *kept_m, double *kept_low)
{
    pass_input_t p;
    pass_make(&p, mc, T, len, src);
    double *dt = fb_malloc((size_t)repeats * sizeof *dt);
    double dm = 0, dl = 0;
    for (int r = -1; r < repeats; r++) {
        if (r >= 0)
            pass_fill(&p, mc, src, 1000003 + (uint64_t)r);
        double xm, xm_max, xl, xl_max, d1, d2;
        pass_together(m, &p, &xm, &xm_max, &d1);
        pass_together(low, &p, &xl, &xl_max, &d2);
        if (r < 0)
            continue;
        dt[r] = xm - xl;
        dm += d1 / repeats;
        dl += d2 / repeats;
    }
    const double assignments = (double)T * (double)model_assignments_per_token(mc);
    const double per_assignment = model_expert_flops_per_token(mc) / (double)model_assignments_per_token(mc);
    const double t = probe_median(dt, repeats);
    free(dt);
    pass_free(&p);
    *kept_m = 1.0 - dm / assignments;
    *kept_low = 1.0 - dl / assignments;
    return t > 0 && dl > dm ? (dl - dm) * per_assignment / t : 0.0;
}

/* The config's initial weights: model.init_from's (a pilot run's, through
 * `fabula export`, gives the rates and waits of a trained router), else
 * train's own initialisation. */
static void init_weights(model_t *m, const config_t *cfg)
{
    if (cfg->init_from)
        hf_import_weights(cfg->init_from, m);
    else
        model_init_weights(m, cfg->run.seed);
}

/* The GPU's name and memory for the machine file ("(unnamed)" and 0 where
 * the runtime or NVML cannot say). */
static void gpu_identity(int dev, char *name, size_t n, double *memory)
{
    snprintf(name, n, "(unnamed)");
    *memory = 0;
#ifdef HAVE_CUDA
    char pci[64];
    int major, minor;
    if (cuda_device_identity(dev, name, n, pci, sizeof pci, &major, &minor) != 0) {
        snprintf(name, n, "(unnamed)");
        return;
    }
    nvml_sample_t s;
    if (nvml_open(pci, 0) && nvml_read(&s) && s.mem_total > 0)
        *memory = s.mem_total;
    nvml_close();
#else
    (void)dev;
#endif
}

char *probe_command_line(int argc, char **argv)
{
    size_t n = 64;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 1;
    char *s = fb_malloc(n), *p = s;
    p += sprintf(p, "fabula plan"); /* argv[0] is "calibrate" */
    for (int i = 0; i < argc; i++)
        p += sprintf(p, " %s", argv[i]);
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(p, (size_t)(s + n - p), " on %Y-%m-%d %H:%M UTC", &tm);
    return s;
}

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "an unnamed CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + strspn(v + 1, " \t");
                v[strcspn(v, "\n")] = 0;
                snprintf(out, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

int probe_calibrate(config_t *cfg, const probe_calibrate_opts_t *o)
{
    const int rank = parallel_rank();
    int shortlen = o->shortlen, longlen = o->longlen, tokens = o->tokens, repeats = o->repeats;
    const char *machine = o->machine, *name = o->name;
    pass_cpu_clock = o->cpu_clock;
    model_config_resolve(cfg, 0);
    if (!longlen)
        longlen = cfg->data.seq_len;
    if (!tokens)
        tokens = 2 * longlen;
    /* a machine's rates at the micro-batch training runs: per-call costs
     * weigh more in a smaller one */
    if (machine && !o->tokens && cfg->loader.max_tokens_per_batch > tokens)
        tokens = cfg->loader.max_tokens_per_batch;
    if (!(shortlen < longlen))
        fb_fatal_all(FB_EXIT_USAGE, "fabula plan calibrate: --short (%d) must be below --long (%d)", shortlen,
                     longlen);
    if (tokens < longlen)
        fb_fatal_all(FB_EXIT_USAGE, "fabula plan calibrate: --tokens (%d) must be at least --long (%d)", tokens,
                     longlen);
    if (longlen > cfg->model.max_position_embeddings)
        fb_fatal_all(FB_EXIT_USAGE, "fabula plan calibrate: --long (%d) exceeds model.max_position_embeddings (%d)",
                     longlen, cfg->model.max_position_embeddings);
    const int threads = train_choose_threads();
    backend_t be;
    backend_open(&be, cfg);
    const ops_t *ops = be.ops;
    if (!name)
        name = be.cuda ? "gpu-this" : "cpu-this";
    if (be.cuda && pass_cpu_clock)
        fb_fatal_all(FB_EXIT_USAGE, "fabula plan calibrate: --clock cpu counts the host's CPU seconds, not a GPU's "
                     "work: calibrate run.backend \"cuda\" with the wall clock");
    if (rank == 0 && be.cuda)
        printf("calibrate: the CUDA backend (%s), GPU %d of each rank\n", ops->name, be.device);
    token_source_t src_store = {0}, *src = NULL;
    if (o->use_data) {
        data_source_open(&src_store.ds, cfg, 0);
        src = &src_store;
        if (rank == 0)
            printf("calibrate: tokens from %s (%lld samples), each rank and pass its own\n", src->ds.what,
                   (long long)src->ds.n);
    }
    if (rank == 0 && cfg->init_from)
        printf("calibrate: weights from model.init_from = %s\n", cfg->init_from);

    const model_config_t *mc = &cfg->model;
    /* Dropless: capacity would drop a different share at each length. */
    model_config_t dropless = *mc;
    dropless.capacity_factor = 0.0;
    model_t *m = model_create(&dropless, ops, tokens);
    init_weights(m, cfg);
    pass_times_t pt;
    time_passes(m, &dropless, tokens, shortlen, longlen, repeats, 0, src, &pt);
    const double ts = pt.t_short, tl = pt.t_long;
    model_free(m);

    const double b = (tl - ts) / ((double)tokens * (double)(longlen - shortlen));
    const double a = ts / (double)tokens - b * (double)shortlen;
    if (rank == 0)
        printf("calibrate: %d tokens as samples of %d: %.4f s, of %d: %.4f s (forward + backward, median of %d%s)\n",
               tokens, shortlen, ts, longlen, tl, repeats, parallel_size() > 1 ? ", mean over the ranks" : "");
    const int measurable = b > 0 && a > 0;
    if (rank == 0 && !measurable)
        printf("calibrate: no attention term measurable at these lengths (a %.3g, b %.3g s per token); use a longer "
               "--long or more --tokens\n", a, b);
    if (rank == 0 && measurable) {
        const double c = b / a;
        const double flops_c = model_attention_cost(mc);
        printf("calibrate: per token a + b*len with a = %.4g s, b = %.4g s\n", a, b);
        printf("data.attention_cost measured %.6g (FLOP-based \"auto\": %.6g, %.2fx)\n", c, flops_c,
               flops_c > 0 ? c / flops_c : NAN);
    }
    if (machine) {
        /* the two passes' FLOPs: the same linear part, the attention part
         * from each one's sum of len^2 */
        probe_machine_t cm = {.init_from = cfg->init_from, .data = src ? src->ds.what : NULL,
                              .cpu_clock = pass_cpu_clock, .name = name, .command = o->command, .config = o->config_name, .ranks = parallel_size(),
                              .local = parallel_local_size(), .threads = threads, .tokens = tokens,
                              .shortlen = shortlen, .longlen = longlen, .repeats = repeats};
        const double sq_s = (double)(tokens / shortlen) * shortlen * shortlen +
                            (double)(tokens % shortlen) * (tokens % shortlen);
        const double sq_l = (double)(tokens / longlen) * longlen * longlen +
                            (double)(tokens % longlen) * (tokens % longlen);
        const double f_nominal = model_flops_packed(mc, tokens, 0.0);
        const double fa_s = model_flops_packed(mc, tokens, sq_s) - f_nominal;
        const double fa_l = model_flops_packed(mc, tokens, sq_l) - f_nominal;
        /* the rates from the model as configured (capacity included: what
         * train runs), not the dropless one the attention cost needs */
        model_t *mm = model_create(mc, ops, tokens);
        init_weights(mm, cfg);
        pass_times_t mt;
        time_passes(mm, mc, tokens, shortlen, longlen, repeats, 1, src, &mt);
        if (model_assignments_per_token(mc) > 0) {
            model_config_t lowc = *mc;
            lowc.capacity_factor = PROBE_LOW_CAPACITY;
            model_t *ml = model_create(&lowc, ops, tokens);
            init_weights(ml, cfg);
            cm.expert_pairs = 2 * repeats;
            cm.expert_flops = time_experts(mm, ml, mc, tokens, longlen, cm.expert_pairs, src, &cm.kept_configured,
                                           &cm.kept_low);
            model_free(ml);
        }
        model_free(mm);
        /* the FLOPs the passes ran: a dropped assignment is not computed
         * (plan time takes training's dropped share the same way) */
        const double per_assignment = model_assignments_per_token(mc) > 0
                                          ? model_expert_flops_per_token(mc) / model_assignments_per_token(mc)
                                          : 0.0;
        const double f_lin = f_nominal - 0.5 * (mt.dropped_short + mt.dropped_long) * per_assignment;
        if (rank == 0 && model_assignments_per_token(mc) > 0 && mc->capacity_factor > 0)
            printf("calibrate: capacity dropped %.3f%% of the expert assignments in the timed passes (their FLOPs "
                   "left out of the rates)\n",
                   100 * 0.5 * (mt.dropped_short + mt.dropped_long) /
                       ((double)tokens * (double)model_assignments_per_token(mc)));
        const double ms = mt.t_short, ml = mt.t_long;
        cm.spread = mt.spread;
        if (rank == 0 && repeats > 1) {
            printf("calibrate: the long passes took %.4f s (median), spread %.1f%% (slowest - fastest over the "
                   "median, %d passes)\n", ml, 100 * mt.spread, repeats);
            if (mt.spread > PROBE_SPREAD_WARN)
                printf("calibrate: warning: the machine's speed moved by %.0f%% between passes: a step time "
                       "predicted from this file can be off by as much; calibrate again with more --repeats, on an "
                       "idle allocation, right before the runs it is for\n", 100 * mt.spread);
        }
        cm.wait_pass = mt.wait_pass;
        cm.wait_block = mt.wait_block;
        cm.node_cpus = comm_node_cpus();
        comm_barrier(comm_world());
        /* the slowest rank's rate: the max of its negation */
        char device[256] = "";
        if (be.cuda) {
            cm.gemm_flops = probe_device_gemm_flops(ops, 0.5);
            cm.host_link = probe_host_link(ops);
            gpu_identity(be.device, device, sizeof device, &cm.device_memory);
            cm.device = device;
        } else {
            cm.gemm_flops = -probe_max_over_ranks(-peak_flops_cpu(0.5));
        }
        const double inv_att = ml > ms ? (ml - ms) / (fa_l - fa_s) : 0.0;
        const double t_lin = ms - fa_s * inv_att;
        cm.attention_flops = inv_att > 0 ? 1.0 / inv_att : 0.0;
        cm.dense_flops = t_lin > 0 ? f_lin / t_lin : (f_lin + fa_s) / ms;
        /* Well above the matmul peak an expert rate is the noise of two
         * passes' difference (a launch-bound model on a GPU measured 1.5
         * PFLOP/s against an 826 TFLOP/s peak): not a rate to plan with. The
         * margin: the peak is one shape's, timed once, and larger expert
         * GEMMs can beat a small shape on a CPU. */
        const int expert_implausible =
            cm.gemm_flops > 0 && cm.expert_flops > PROBE_EXPERT_OVER_PEAK * cm.gemm_flops;
        if (expert_implausible) {
            if (rank == 0)
                printf("calibrate: the experts' rate measured %.4g GFLOP/s, over %g times the %s peak of %.4g: the "
                       "passes' difference is noise at this size; expert_flops left out, plan time takes flops for "
                       "them\n", cm.expert_flops / 1e9, PROBE_EXPERT_OVER_PEAK, be.cuda ? "matmul" : "sgemm",
                       cm.gemm_flops / 1e9);
            cm.expert_flops = 0;
        }
        if (cm.expert_flops > 0) {
            /* the rest of the linear part at its own rate */
            const double f_exp = f_lin - (f_nominal - model_expert_flops_per_token(mc) * tokens);
            const double t_rest = t_lin - f_exp / cm.expert_flops;
            if (t_lin > 0 && t_rest > 0 && f_lin > f_exp)
                cm.dense_flops = (f_lin - f_exp) / t_rest;
            else
                cm.expert_flops = 0;
        }
        if (rank == 0 && model_assignments_per_token(mc) > 0 && cm.expert_flops <= 0 && !expert_implausible)
            printf("calibrate: the experts' rate not measurable (the passes at capacity %g were no faster): "
                   "expert_flops left out, plan time takes flops for them\n", PROBE_LOW_CAPACITY);
        cm.adamw_bandwidth = probe_adamw_bandwidth(ops);
        char why[256] = "", cpu[256], mpi[256];
        cm.have_links = probe_links(&cm.latency, &cm.bandwidth, why, sizeof why) == 0;
        char why_overlap[256] = "";
        cm.have_overlap = probe_overlap(&cm.overlap, &cm.overlap_comm_s, why_overlap, sizeof why_overlap) == 0;
        cm.links_why = why;
        cpu_model(cpu, sizeof cpu);
        cm.cpu = cpu;
        snprintf(mpi, sizeof mpi, "%s", parallel_library_version());
        cm.mpi = mpi;
        char *nodes = parallel_node_list();
        cm.nodes = nodes;
        if (rank == 0) {
            probe_write_machine(machine, &cm);
            printf("calibrate: the model as configured: %.4f s and %.4f s\n", ms, ml);
            if (cm.have_overlap)
                printf("calibrate: %.1f%% of a non-blocking all-gather completes under compute that does not call "
                       "MPI (overlap)\n", 100 * cm.overlap);
            if (cm.ranks > 1)
                printf("calibrate: the slowest of %d ranks lags their mean by %.2f%% meeting once a pass, %.2f%% "
                       "meeting at every block\n", cm.ranks, 100 * cm.wait_pass, 100 * cm.wait_block);
            if (cm.expert_flops > 0)
                printf("calibrate: the experts: %.4g GFLOP/s (%.1f%% of the assignments kept as configured, %.1f%% "
                       "at capacity %g, %d pairs)\n", cm.expert_flops / 1e9, 100 * cm.kept_configured,
                       100 * cm.kept_low, PROBE_LOW_CAPACITY, cm.expert_pairs);
            printf("calibrate: machine %s: %.4g GFLOP/s linear%s, %.4g GFLOP/s attention, %s %.4g GFLOP/s, AdamW "
                   "%.4g GB/s, ", name, cm.dense_flops / 1e9, cm.expert_flops > 0 ? " (less the experts)" : "",
                   cm.attention_flops / 1e9, be.cuda ? "matmul" : "sgemm", cm.gemm_flops / 1e9,
                   cm.adamw_bandwidth / 1e9);
            if (be.cuda)
                printf("host link %.4g GB/s, ", cm.host_link / 1e9);
            if (cm.have_links)
                printf("MPI latency %.3g us, bandwidth %.4g GB/s over %d ranks", cm.latency * 1e6,
                       cm.bandwidth / 1e9, cm.ranks);
            else
                printf("links not measured (%s)", why);
            printf(" -> %s\n", machine);
        }
        free(nodes);
    }
    if (src) {
        batch_free(&src->batch);
        data_source_close(&src->ds);
    }
    backend_close(&be);
    return FB_EXIT_OK;
}
