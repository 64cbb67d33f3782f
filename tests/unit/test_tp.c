/* The tensor-parallel model against the single-rank one, under mpiexec -n 2
 * and 4 (tests/e2e/tp_grad.sh). Every rank builds both from the same seed
 * (init is keyed by tensor name and the element's place in the full tensor,
 * so a tp slice holds the values of the full tensor it is cut from) and runs
 * forward and backward on the same batch (the ranks of one tp group see one
 * micro-batch):
 *
 *   single-rank model  every tensor whole;
 *   tp model           this tp rank's slice (rows or columns) of the split
 *                      tensors, replicated norms and routers.
 *
 * The loss parts, drops and tokens per expert must match, and every tensor's
 * gradient must equal the matching slice of the single-rank gradient (the
 * replicated ones whole, on every tp rank), 1e-5 relative to the tensor's
 * largest gradient. Gathering the slices of all tp ranks is then the
 * single-rank gradient. Scenarios: dense GQA (kv heads one a rank at
 * tp 2; at tp 4 each of the 2 kv heads replicated on 2 ranks), one kv head
 * (replicated on every tp rank), MoE with capacity (drops), tied
 * embeddings, a micro-batch with
 * no targets in some rows; tp = world size, and tp 2 on 4 ranks. Each
 * again with sequence parallelism (token shards of 21 and 20 rows at tp 2,
 * 11, 10, 10, 10 at tp 4), and under it a dense micro-batch of 3 tokens, so
 * that at tp 4 one rank's shard is empty, and full and selective
 * recomputation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "ops.h"
#include "parallel/comm.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

#define TOL 1e-5
#define MAXT 64

static int wrank;
static char label[160];

#define CHECK(cond, ...) EXPECT_RANK(wrank, label, cond, __VA_ARGS__)

typedef struct scenario {
    const char *name;
    int experts;        /* 0: dense */
    int kv;
    int tied;
    double capacity;
    int T;              /* tokens of the micro-batch (3 samples when above 3) */
    int recompute;
} scenario_t;

static model_config_t tiny_config(const scenario_t *s)
{
    model_config_t mc = {
        .vocab_size = 64, .hidden_size = 32, .intermediate_size = 24, .num_hidden_layers = 2,
        .num_attention_heads = 4, .num_key_value_heads = s->kv, .num_local_experts = s->experts,
        .num_experts_per_tok = 2, .moe_layer_freq = 1, .rope_theta = 10000.0, .rms_norm_eps = 1e-5,
        .tie_word_embeddings = s->tied, .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001,
        .capacity_factor = s->capacity, .expert_dropout = 0.0, .initializer_range = 0.2,
        .max_position_embeddings = 256, .recompute = s->recompute,
    };
    return mc;
}

typedef struct input {
    int32_t tokens[MAXT], positions[MAXT], targets[MAXT], cu[4];
    model_input_t mi;
} input_t;

/* Three samples (one when T <= 3), the same on every rank; the last row of
 * each has no target. */
static void make_input(input_t *in, int V, int T)
{
    memset(in, 0, sizeof *in);
    const int ns = T > 3 ? 3 : 1;
    const int cuts[4] = {0, T > 3 ? 13 : T, 30, T};
    int *cu = in->cu;
    for (int s = 0; s < ns; s++)
        for (int t = cuts[s]; t < cuts[s + 1]; t++) {
            in->tokens[t] = (int32_t)(fb_hash2(0x7e5ULL, (uint64_t)t) % (uint64_t)V);
            in->positions[t] = t - cuts[s];
        }
    for (int s = 0; s < ns; s++)
        for (int t = cuts[s]; t < cuts[s + 1]; t++)
            in->targets[t] = t + 1 < cuts[s + 1] ? in->tokens[t + 1] : -1;
    memcpy(cu, cuts, sizeof cuts);
    if (ns == 1)
        cu[1] = T;
    in->mi = (model_input_t){in->tokens, in->positions, in->targets, in->cu, T, ns, NULL, 0};
}

/* Element (r, c) of view v's slice is (r + r0, c + c0) of the full tensor. */
static void slice_of(const param_view_t *v, const float *full, float *out)
{
    const int64_t rows = v->shape[0], cols = v->ndim == 2 ? v->shape[1] : 1;
    const int64_t fcols = v->ndim == 2 ? v->full_shape[1] : 1;
    const int64_t r0 = v->tp_dim == 0 ? v->tp_off : 0, c0 = v->tp_dim == 1 ? v->tp_off : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = full[(r + r0) * fcols + c + c0];
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        if (!(x <= d))
            d = x;
        if (fabs((double)b[i]) > ref)
            ref = fabs((double)b[i]);
    }
    return d / (ref > 1e-6 ? ref : 1e-6);
}

static double scalar_err(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-6 ? fabs(b) : 1e-6); }

static void run(model_t *m, const input_t *in, model_stats_t *st)
{
    model_scales_t sc = {.lm_denominator = 37.0, .mb_weight = 1.0, .training = 1, .dropout_seed = 7};
    model_zero_grads(m);
    model_forward(m, &in->mi, &sc, st);
    model_backward(m);
}

static void run_scenario(const scenario_t *s, int tp, int sp)
{
    snprintf(label, sizeof label, "%s, tp %d%s of %d ranks", s->name, tp, sp ? " + sp" : "", parallel_size());
    model_config_t mc = tiny_config(s);
    mc.sequence_parallel = sp;
    groups_t g;
    groups_create_tp(&g, tp, 1, mc.num_local_experts);
    model_t *ref = model_create(&mc, ops_cpu(), MAXT);
    model_t *dist = model_create_tp(&mc, ops_cpu(), MAXT, 0, NULL, g.tp);
    model_init_weights(ref, 11);
    model_init_weights(dist, 11);
    input_t in;
    make_input(&in, mc.vocab_size, s->T);
    model_stats_t a, b;
    run(ref, &in, &a);
    const double lm = a.lm_sum, aux = a.aux, z = a.z;
    const long dropped = a.dropped;
    const size_t LE = (size_t)mc.num_hidden_layers * (mc.num_local_experts > 1 ? mc.num_local_experts : 1);
    long *tpe = fb_malloc(LE * sizeof *tpe);
    memcpy(tpe, a.tokens_per_expert, LE * sizeof *tpe);
    if (tp > 1)
        comm_stats_reset(g.tp);
    run(dist, &in, &b);
    if (tp > 1) {
        /* the tp collectives `fabula plan time` counts (plan_time.c): per
         * layer 4 sums (6 with full recomputation), the embedding's and
         * the head gradient's, 2 cross-entropy sums, the MoE top-k
         * gradient; under sp per layer 4 (6) reduce-scatters and 6 (8)
         * all-gathers and the embedding's and head's, and a sum per norm */
        const long L = mc.num_hidden_layers, full = mc.recompute == MODEL_RECOMPUTE_FULL;
        const long moe = mc.num_local_experts > 1 ? L : 0;
        const long rs = (long)comm_stats(g.tp, COMM_KIND_REDUCE_SCATTER)->calls;
        const long ag = (long)comm_stats(g.tp, COMM_KIND_ALLGATHER)->calls;
        const long ar = (long)comm_stats(g.tp, COMM_KIND_ALLREDUCE)->calls;
        const long want_rs = sp ? L * (4 + 2 * full) + 2 : 0, want_ag = sp ? L * (6 + 2 * full) + 2 : 0;
        const long want_ar = (sp ? 2 * L + 1 : L * (4 + 2 * full) + 2) + 2 + moe;
        CHECK(rs == want_rs && ag == want_ag && ar == want_ar,
              "tp collectives: %ld reduce-scatters, %ld all-gathers, %ld all-reduces; expected %ld, %ld, %ld", rs, ag,
              ar, want_rs, want_ag, want_ar);
    }
    CHECK(scalar_err(b.lm_sum, lm) < TOL, "lm_sum %.9g vs %.9g", b.lm_sum, lm);
    CHECK(b.ntargets == a.ntargets, "ntargets %ld vs %ld", b.ntargets, a.ntargets);
    CHECK(scalar_err(b.aux, aux) < TOL, "aux %.9g vs %.9g", b.aux, aux);
    CHECK(scalar_err(b.z, z) < TOL, "z %.9g vs %.9g", b.z, z);
    CHECK(b.dropped == dropped, "dropped %ld vs %ld", b.dropped, dropped);
    CHECK(!memcmp(b.tokens_per_expert, tpe, LE * sizeof *tpe), "tokens per expert differ");
    if (s->capacity > 0 && s->experts > 1)
        CHECK(dropped > 0, "the capacity scenario drops nothing (%ld)", dropped);

    const param_table_t *tt = model_params_table(dist), *rt = model_params_table(ref);
    int split = 0;
    for (int i = 0; i < tt->n; i++) {
        const param_view_t *v = &tt->views[i], *rv = param_table_find(rt, v->name);
        CHECK(rv && rv->shape[0] == v->full_shape[0] && rv->shape[1] == v->full_shape[1], "%s: full shape",
              v->name);
        if (!rv)
            continue;
        split += v->tp_dim >= 0;
        if (tp > 1 && (strstr(v->name, "k_proj") || strstr(v->name, "v_proj"))) {
            /* the replicated kv head: one head's rows, tp / kv copies */
            const int share = s->kv < tp ? tp / s->kv : 1;
            CHECK(v->tp_dim == 0 && v->tp_copies == share && v->tp_copy == g.tp_rank % share &&
                      v->tp_off == v->shape[0] * (s->kv < tp ? g.tp_rank / share : g.tp_rank),
                  "%s: slice at row %lld of %lld rows, copy %d of %d", v->name, (long long)v->tp_off,
                  (long long)v->shape[0], v->tp_copy, v->tp_copies);
        }
        float *full = fb_malloc(rv->numel * sizeof *full), *want = fb_malloc(v->numel * sizeof *want);
        float *got = fb_malloc(v->numel * sizeof *got);
        model_get_grad(ref, rv, full);
        slice_of(v, full, want);
        model_get_grad(dist, v, got);
        const double e = rel_err(got, want, v->numel);
        CHECK(e < TOL, "%s (tp_dim %d): gradient error %.3g", v->name, v->tp_dim, e);
        model_get_param(ref, rv, full);
        slice_of(v, full, want);
        model_get_param(dist, v, got);
        CHECK(!memcmp(got, want, v->numel * sizeof *got), "%s: the slice's initial values", v->name);
        free(full);
        free(want);
        free(got);
    }
    CHECK(tp == 1 || split > 0, "no tensor is split");
    free(tpe);
    model_free(dist);
    model_free(ref);
    groups_free(&g);
}

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    wrank = parallel_rank();
    const int world = parallel_size();
    const scenario_t list[] = {
        {"dense, GQA 4/2", 0, 2, 0, 0.0, 41, 0},
        {"dense, tied embeddings, 4 kv heads", 0, 4, 1, 0.0, 41, 0},
        {"MoE 4 experts, capacity 1.0", 4, 2, 0, 1.0, 41, 0},
        {"MoE 4 experts, dropless, 4 kv heads", 4, 4, 0, 0.0, 41, 0},
        {"dense, 1 kv head", 0, 1, 0, 0.0, 41, 0},
    };
    /* sequence parallelism only */
    const scenario_t sp_list[] = {
        {"dense, 4 kv heads, 3 tokens", 0, 4, 0, 0.0, 3, 0},
        {"MoE 4 experts, capacity 1.0, full recompute", 4, 2, 0, 1.0, 41, MODEL_RECOMPUTE_FULL},
        {"dense, GQA 4/2, selective recompute", 0, 2, 0, 0.0, 41, MODEL_RECOMPUTE_SELECTIVE},
        {"MoE 4 experts, 1 kv head, full recompute", 4, 1, 0, 1.0, 41, MODEL_RECOMPUTE_FULL},
    };
    /* kv heads split over tp, or (fewer) each replicated on tp / kv ranks */
#define KV_OK(kv, tp) ((kv) % (tp) == 0 || (tp) % (kv) == 0)
    const int tps[2] = {world, 2};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && (world == 2 || world % 2))
            continue;
        for (int sp = 0; sp <= (tps[i] > 1); sp++)
            for (size_t s = 0; s < sizeof list / sizeof *list; s++)
                if (KV_OK(list[s].kv, tps[i]))
                    run_scenario(&list[s], tps[i], sp);
        for (size_t s = 0; tps[i] > 1 && s < sizeof sp_list / sizeof *sp_list; s++)
            if (KV_OK(sp_list[s].kv, tps[i]))
                run_scenario(&sp_list[s], tps[i], 1);
    }
    double f = (double)failures;
    comm_allreduce(comm_world(), &f, 1, COMM_F64, COMM_SUM);
    const int total = (int)f;
    if (wrank == 0)
        printf("%s: %d failure(s) over all ranks, %d checks on rank 0\n", total ? "FAIL" : "PASS", total, checks);
    parallel_finalize();
    return total ? 1 : 0;
}
