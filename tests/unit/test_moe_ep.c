/* The expert-parallel MoE layer against the single-rank one, under mpiexec
 * -n 2 and 4 (tests/e2e/moe_ep.sh). Every rank builds both models from the
 * same seed (init is keyed by tensor name, so a tensor has the same values
 * whichever rank holds it) and runs forward and backward on its own batch:
 *
 *   single-rank model  all E experts, this rank's tokens only;
 *   ep model           E / ep experts, tokens exchanged over the ep group.
 *
 * Then per rank: loss parts, router statistics and logits must match its own
 * single-rank run; dense (and router) gradients too, since they come from
 * this rank's tokens alone; and the gradient of each local expert, looked up
 * by its global name, must equal the sum over the ep group of the
 * single-rank gradients of that expert (an expert sees every rank's tokens).
 * Scenarios: dropless and capacity, 1 to 3 chunks, a rank without tokens,
 * every token routed to the same two experts (the others receive nothing;
 * dropless: one huge group, past the buffers sized for T*K rows; with
 * capacity: overflow dropped by the formula), ep = world size and ep < world.
 * In each, model.recompute selective and full on the ep model must give its
 * "none" losses, statistics and gradients bit for bit.
 *
 *   test_moe_ep            the whole suite (exit 0 / 1)
 *   test_moe_ep floor B N  the bench floor: N plain alltoallv calls moving
 *                          B bytes per rank in all over the world, timed */
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

/* Forward values agree to rounding; gradients pass through more sums, and
 * an expert's rows now come from several ranks, so the grouped matmuls see
 * other row blocks than the single-rank layer: rounding differs more (the
 * tolerance of validation/compare_reference.c). */
#define TOL 1e-5
#define GRAD_TOL 1e-4
#define MAXT 64

static int wrank;
static char label[128];

#define CHECK(cond, ...) EXPECT_RANK(wrank, label, cond, __VA_ARGS__)

typedef struct scenario {
    const char *name;
    int ep;
    double capacity;    /* capacity_factor; 0 dropless */
    int chunks;
    int empty_rank;     /* world rank with no tokens, -1 none */
    int hot;            /* route every token to experts 0 and 1 */
} scenario_t;

typedef struct input {
    int32_t tokens[MAXT], positions[MAXT], targets[MAXT], cu[4];
    model_input_t mi;
} input_t;

typedef struct result {
    double lm_sum, aux, z;
    long ntargets, dropped;
    long *tpe;          /* [L*E] */
    float *logits;      /* [T*V] */
} result_t;

static model_config_t tiny_config(double capacity)
{
    model_config_t mc = {
        .vocab_size = 61, .hidden_size = 32, .intermediate_size = 24, .num_hidden_layers = 2,
        .num_attention_heads = 4, .num_key_value_heads = 2, .num_local_experts = 8, .num_experts_per_tok = 2,
        .moe_layer_freq = 1, .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = 0,
        .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001, .capacity_factor = capacity,
        .expert_dropout = 0.0, .initializer_range = 0.2, .max_position_embeddings = 256,
    };
    return mc;
}

/* Rank-dependent batch of three samples (T differs per rank). */
static void make_input(input_t *in, int rank, int empty, int V)
{
    memset(in, 0, sizeof *in);
    const int T = empty ? 0 : 20 + 9 * rank;
    const int cuts[4] = {0, T / 3, T / 3 + T / 4, T};
    for (int s = 0; s < 3; s++)
        for (int t = cuts[s]; t < cuts[s + 1]; t++) {
            in->tokens[t] = (int32_t)(fb_hash2(0xabcULL + (uint64_t)rank, (uint64_t)t) % (uint64_t)V);
            in->positions[t] = t - cuts[s];
        }
    for (int s = 0; s < 3; s++)
        for (int t = cuts[s]; t < cuts[s + 1]; t++)
            in->targets[t] = t + 1 < cuts[s + 1] ? in->tokens[t + 1] : -1;
    memcpy(in->cu, cuts, sizeof cuts);
    in->mi = (model_input_t){in->tokens, in->positions, in->targets, in->cu, T, T ? 3 : 0, NULL, 0};
}

/* Makes experts 0 and 1 every token's two choices in every MoE layer: a
 * large constant first hidden component dominates each normed token, and the
 * router rows weigh that component +2, +1 and -1 (others). */
static void make_hot(model_t *m, const model_config_t *mc)
{
    const param_table_t *t = model_params_table(m);
    const param_view_t *emb = param_table_find(t, "model.embed_tokens.weight");
    float *w = fb_malloc(emb->numel * sizeof *w);
    model_get_param(m, emb, w);
    for (int v = 0; v < mc->vocab_size; v++)
        w[(size_t)v * mc->hidden_size] = 10.0f;
    model_set_param(m, emb, w);
    free(w);
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", l);
        const param_view_t *g = param_table_find(t, name);
        float *r = fb_malloc(g->numel * sizeof *r);
        model_get_param(m, g, r);
        for (int e = 0; e < mc->num_local_experts; e++)
            r[(size_t)e * mc->hidden_size] = e == 0 ? 2.0f : e == 1 ? 1.0f : -1.0f;
        model_set_param(m, g, r);
        free(r);
    }
}

static void run(model_t *m, const model_config_t *mc, const input_t *in, result_t *res)
{
    model_scales_t sc = {.lm_denominator = 100.0, .mb_weight = 1.0, .training = 0, .dropout_seed = 7};
    model_stats_t st;
    model_zero_grads(m);
    model_forward(m, &in->mi, &sc, &st);
    model_backward(m);
    const size_t LE = (size_t)mc->num_hidden_layers * mc->num_local_experts;
    res->lm_sum = st.lm_sum;
    res->aux = st.aux;
    res->z = st.z;
    res->ntargets = st.ntargets;
    res->dropped = st.dropped;
    res->tpe = fb_malloc(LE * sizeof *res->tpe);
    memcpy(res->tpe, st.tokens_per_expert, LE * sizeof *res->tpe);
    const size_t nlog = (size_t)in->mi.T * mc->vocab_size;
    res->logits = fb_malloc((nlog ? nlog : 1) * sizeof *res->logits);
    if (nlog)
        model_get_logits(m, res->logits);
}

static void result_free(result_t *r)
{
    free(r->tpe);
    free(r->logits);
}

/* max |a - b| / max(max |b|, 1e-6) */
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

static void run_scenario(const scenario_t *sc)
{
    snprintf(label, sizeof label, "%s, ep %d, %d chunk(s)", sc->name, sc->ep, sc->chunks);
    const int failures_before = failures;
    const model_config_t mc = tiny_config(sc->capacity);
    const int L = mc.num_hidden_layers, E = mc.num_local_experts, K = mc.num_experts_per_tok;
    groups_t g;
    groups_create(&g, sc->ep, E);
    input_t in;
    make_input(&in, wrank, wrank == sc->empty_rank, mc.vocab_size);

    model_t *ref = model_create(&mc, ops_cpu(), MAXT);
    model_t *dist = model_create_ep(&mc, ops_cpu(), MAXT, 0, g.ep);
    model_set_a2a_chunks(dist, sc->chunks);
    model_set_keep_logits(ref, 1);
    model_set_keep_logits(dist, 1);
    model_init_weights(ref, 42);
    model_init_weights(dist, 42);
    if (sc->hot) {
        make_hot(ref, &mc);
        make_hot(dist, &mc);
    }
    result_t rr, rd;
    run(ref, &mc, &in, &rr);
    run(dist, &mc, &in, &rd);

    /* the ep model's expert tensors: exactly E / ep local ones, global names */
    const param_table_t *tr = model_params_table(ref), *td = model_params_table(dist);
    const int El = E / sc->ep;
    int held = 0, wrong = 0;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
            int has = param_table_find(td, name) != NULL;
            int mine = e / El == g.ep_rank;
            held += has;
            wrong += has != mine;
        }
    CHECK(wrong == 0 && held == L * El, "%d expert tensors misplaced, %d held (expected %d)", wrong, held, L * El);
    CHECK(td->numel[PARAM_GROUP_EXPERT] * (size_t)sc->ep == tr->numel[PARAM_GROUP_EXPERT],
          "expert buffer %zu elements, expected %zu / %d", td->numel[PARAM_GROUP_EXPERT],
          tr->numel[PARAM_GROUP_EXPERT], sc->ep);

    /* forward: identical routing and plan, same losses and logits */
    int same_tpe = 1;
    for (size_t i = 0; i < (size_t)L * E; i++)
        same_tpe &= rr.tpe[i] == rd.tpe[i];
    CHECK(same_tpe && rr.dropped == rd.dropped, "tokens per expert or dropped (%ld vs %ld) differ", rd.dropped,
          rr.dropped);
    CHECK(scalar_err(rd.lm_sum, rr.lm_sum) <= TOL, "lm_sum %.9g vs %.9g", rd.lm_sum, rr.lm_sum);
    CHECK(scalar_err(rd.aux, rr.aux) <= TOL && scalar_err(rd.z, rr.z) <= TOL, "aux/z %.9g %.9g vs %.9g %.9g",
          rd.aux, rd.z, rr.aux, rr.z);
    double lerr = rel_err(rd.logits, rr.logits, (size_t)in.mi.T * mc.vocab_size);
    CHECK(lerr <= TOL, "logits rel err %.3g", lerr);
    if (sc->hot && in.mi.T > 0) {
        /* every first choice is expert 0, every second expert 1 */
        const int T = in.mi.T;
        const int C = sc->capacity > 0 ? (int)ceil(sc->capacity * T * K / E) : T;
        const long kept = C < T ? C : T;
        CHECK(rd.dropped == L * 2 * (T - kept), "hot routing: dropped %ld, expected %ld", rd.dropped,
              (long)L * 2 * (T - kept));
        for (int l = 0; l < L; l++)
            CHECK(rd.tpe[(size_t)l * E] == kept && rd.tpe[(size_t)l * E + 1] == kept,
                  "hot routing: layer %d experts 0/1 got %ld/%ld rows, expected %ld", l, rd.tpe[(size_t)l * E],
                  rd.tpe[(size_t)l * E + 1], kept);
    }

    /* backward: dense tensors from this rank alone, experts summed over ep */
    double worst_dense = 0.0, worst_expert = 0.0;
    int nexpert = 0;
    for (int i = 0; i < tr->n; i++) {
        const param_view_t *v = &tr->views[i];
        float *gr = fb_malloc(v->numel * sizeof *gr), *gd = fb_malloc(v->numel * sizeof *gd);
        model_get_grad(ref, v, gr);
        const param_view_t *w = param_table_find(td, v->name);
        if (v->group == PARAM_GROUP_EXPERT)
            comm_allreduce(g.ep, gr, v->numel, COMM_F32, COMM_SUM);
        if (w) {
            model_get_grad(dist, w, gd);
            double err = rel_err(gd, gr, v->numel);
            if (v->group == PARAM_GROUP_EXPERT) {
                nexpert++;
                worst_expert = err > worst_expert ? err : worst_expert;
            } else {
                worst_dense = err > worst_dense ? err : worst_dense;
            }
            CHECK(err <= GRAD_TOL, "gradient of %s: rel err %.3g", v->name, err);
            model_get_param(dist, w, gd);
            model_get_param(ref, v, gr);
            CHECK(rel_err(gd, gr, v->numel) == 0.0, "parameter %s differs", v->name);
        }
        free(gr);
        free(gd);
    }
    /* model.recompute on the ep layer: bitwise the ep run's, statistics
     * counted once (read after the backward); the full recomputation's
     * repeated exchanges must line up, the rank without tokens included */
    for (int rc = MODEL_RECOMPUTE_SELECTIVE; rc <= MODEL_RECOMPUTE_FULL; rc++) {
        model_config_t mr = mc;
        mr.recompute = rc;
        model_t *rm = model_create_ep(&mr, ops_cpu(), MAXT, 0, g.ep);
        model_set_a2a_chunks(rm, sc->chunks);
        model_set_keep_logits(rm, 1);
        model_init_weights(rm, 42);
        if (sc->hot)
            make_hot(rm, &mr);
        result_t rx;
        run(rm, &mr, &in, &rx);
        const char *nm = rc == MODEL_RECOMPUTE_FULL ? "full" : "selective";
        CHECK(!memcmp(&rx.lm_sum, &rd.lm_sum, sizeof rx.lm_sum) && !memcmp(&rx.aux, &rd.aux, sizeof rx.aux) &&
                  !memcmp(&rx.z, &rd.z, sizeof rx.z) && rx.dropped == rd.dropped &&
                  !memcmp(rx.tpe, rd.tpe, (size_t)L * E * sizeof *rx.tpe),
              "recompute %s: losses or statistics differ from recompute none", nm);
        CHECK(model_activation_bytes(rm) < model_activation_bytes(dist), "recompute %s: %zu activation bytes, none %zu",
              nm, model_activation_bytes(rm), model_activation_bytes(dist));
        int differ = 0;
        for (int i = 0; i < td->n; i++) {
            const param_view_t *v = &td->views[i];
            float *ga = fb_malloc(v->numel * sizeof *ga), *gb = fb_malloc(v->numel * sizeof *gb);
            model_get_grad(rm, v, ga);
            model_get_grad(dist, v, gb);
            differ += memcmp(ga, gb, v->numel * sizeof *ga) != 0;
            free(ga);
            free(gb);
        }
        CHECK(differ == 0, "recompute %s: %d gradients differ bitwise from recompute none", nm, differ);
        result_free(&rx);
        model_free(rm);
    }

    int counts[2] = {failures - failures_before, nexpert};
    comm_allreduce(g.world, counts, 2, COMM_I32, COMM_SUM);
    double worst[2] = {worst_dense, worst_expert};
    comm_allreduce(g.world, worst, 2, COMM_F64, COMM_MAX);
    if (wrank == 0)
        printf("%s [%s]: loss, logits, tokens per expert, dropped = %ld (rank 0), dense gradients (max rel err "
               "%.2e) and %d expert gradients by name (max rel err %.2e) match the single-rank layer; recompute "
               "selective and full bitwise recompute none\n",
               counts[0] ? "FAILED" : "checked", label, rd.dropped, worst[0], counts[1], worst[1]);
    fflush(stdout);
    result_free(&rr);
    result_free(&rd);
    model_free(dist);
    model_free(ref);
    groups_free(&g);
}

/* The floor for bench/ep_alltoall.sh: `calls` blocking alltoallv of equal
 * pieces, `bytes` per call from each rank to the others in all. */
static int floor_mode(double bytes, int calls)
{
    comm_t *w = comm_create_world();
    const int P = comm_size(w);
    size_t per = (size_t)(bytes / 4.0 / (P > 1 ? P - 1 : 1));
    size_t *cnt = fb_malloc((size_t)P * sizeof *cnt), *dsp = fb_malloc((size_t)P * sizeof *dsp);
    for (int i = 0; i < P; i++) {
        cnt[i] = per;
        dsp[i] = (size_t)i * per;
    }
    float *s = fb_calloc(per * (size_t)P + 1, sizeof *s), *r = fb_calloc(per * (size_t)P + 1, sizeof *r);
    comm_alltoallv(w, s, cnt, dsp, r, cnt, dsp, COMM_F32); /* warm-up */
    comm_barrier(w);
    comm_stats_reset(w);
    for (int c = 0; c < calls; c++)
        comm_alltoallv(w, s, cnt, dsp, r, cnt, dsp, COMM_F32);
    const comm_stats_t *st = comm_stats(w, COMM_KIND_ALLTOALLV);
    double secs = st->wait_seconds;
    comm_allreduce(w, &secs, 1, COMM_F64, COMM_MAX);
    if (comm_rank(w) == 0)
        printf("floor: %d ranks, %d alltoallv calls, %.0f bytes sent per rank, %.6f s (slowest rank)\n", P, calls,
               (double)st->bytes, secs);
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    comm_free(&w);
    return 0;
}

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    wrank = parallel_rank();
    const int world = parallel_size();
    if (argc == 4 && !strcmp(argv[1], "floor")) {
        int rc = floor_mode(atof(argv[2]), atoi(argv[3]));
        parallel_finalize();
        return rc;
    }
    if (world < 2) {
        printf("SKIP: needs at least 2 ranks\n");
        parallel_finalize();
        return 77;
    }
    const int eps[2] = {world, world / 2};
    for (int i = 0; i < 2; i++) {
        const int ep = eps[i];
        if (ep < 2 || (i == 1 && ep == world))
            continue;
        const scenario_t list[] = {
            {"dropless", ep, 0.0, 1, -1, 0},
            {"capacity 1.0", ep, 1.0, 2, -1, 0},
            {"capacity 1.25, rank 1 without tokens", ep, 1.25, 3, 1, 0},
            {"dropless, rank 0 without tokens", ep, 0.0, 1, 0, 0},
            {"all tokens to experts 0/1, dropless (huge group)", ep, 0.0, 2, -1, 1},
            {"all tokens to experts 0/1, capacity 1.0 (overflow dropped)", ep, 1.0, 1, -1, 1},
            {"more chunks than rows", ep, 0.5, 8, world - 1, 0},
        };
        for (size_t s = 0; s < sizeof list / sizeof *list; s++)
            run_scenario(&list[s]);
    }
    double f = (double)failures;
    comm_allreduce(comm_world(), &f, 1, COMM_F64, COMM_SUM);
    const int total = (int)f;
    if (wrank == 0)
        printf("%s: %d failure(s) over all ranks\n", total ? "FAIL" : "PASS", total);
    parallel_finalize();
    return total ? 1 : 0;
}
