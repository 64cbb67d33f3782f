#include "parallel/groups.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/error.h"

#define EP_KEY "parallel.expert_parallel_size"
#define TP_KEY "parallel.tensor_parallel_size"
#define PP_KEY "parallel.pipeline_parallel_size"

/* A config error every rank detects alike: rank 0 prints it once and every
 * rank exits cleanly (fb_fatal_all). */
static _Noreturn void refuse(const comm_t *world, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void refuse(const comm_t *world, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (void)world;
    fb_fatal_all(FB_EXIT_USAGE, "%s", msg);
}

/* Every rank must build the same layout, or the splits below would pair
 * ranks that disagree on who their partners are. */
static void check_agreement(comm_t *world, int pp_size, int tp_size, int ep_size, int num_local_experts)
{
    int64_t lo[4] = {ep_size, num_local_experts, tp_size, pp_size}, hi[4] = {ep_size, num_local_experts, tp_size, pp_size};
    comm_allreduce(world, lo, 4, COMM_I64, COMM_MIN);
    comm_allreduce(world, hi, 4, COMM_I64, COMM_MAX);
    if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2] || lo[3] != hi[3]) {
        char msg[240];
        snprintf(msg, sizeof msg,
                 "ranks disagree on the layout: ep_size %lld..%lld, num_local_experts %lld..%lld, tp_size %lld..%lld, "
                 "pp_size %lld..%lld",
                 (long long)lo[0], (long long)hi[0], (long long)lo[1], (long long)hi[1], (long long)lo[2],
                 (long long)hi[2], (long long)lo[3], (long long)hi[3]);
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "groups_create", msg);
    }
}

static void validate(const comm_t *world, int pp, int tp, int ep, int experts)
{
    int n = comm_size(world);
    if (pp < 1)
        refuse(world, "config key '" PP_KEY "' = %d: expected a positive integer", pp);
    if (n % pp != 0)
        refuse(world, "config key '" PP_KEY "' = %d: expected a divisor of the world size (%d ranks)", pp, n);
    n /= pp;
    if (tp < 1)
        refuse(world, "config key '" TP_KEY "' = %d: expected a positive integer", tp);
    if (n % tp != 0)
        refuse(world, "config key '" TP_KEY "' = %d: expected a divisor of the world size (%d ranks)", tp, n);
    if (ep < 1)
        refuse(world, "config key '" EP_KEY "' = %d: expected a positive integer", ep);
    char why[1][GROUPS_EP_WHY];
    if (groups_ep_check(comm_size(world), tp, pp, ep, experts, why, 1) > 0)
        refuse(world, "config key '" EP_KEY "' = %d: expected %s", ep, why[0]);
}

int groups_ep_check(int world, int tp, int pp, int ep, int experts, char why[][GROUPS_EP_WHY], int max)
{
    int n = 0;
#define BROKEN(...) (n < max ? snprintf(why[n], GROUPS_EP_WHY, __VA_ARGS__) : 0, n++)
    if (experts <= 1 && ep > 1)
        BROKEN("1 for a dense model (model.num_local_experts = %d: no experts to distribute)", experts);
    if (world / tp / pp % ep != 0 && tp == 1 && pp == 1)
        BROKEN("a divisor of the world size (%d ranks)", world);
    else if (world / tp / pp % ep != 0 && pp == 1)
        BROKEN("a divisor of the world size (%d ranks) / " TP_KEY " = %d, i.e. of %d", world, tp, world / tp);
    else if (world / tp / pp % ep != 0)
        BROKEN("a divisor of the world size (%d ranks) / (" TP_KEY " = %d x " PP_KEY " = %d), i.e. of %d", world, tp,
               pp, world / tp / pp);
    if (experts > 1 && experts % ep != 0)
        BROKEN("a divisor of model.num_local_experts = %d", experts);
#undef BROKEN
    return n;
}

void groups_create(groups_t *g, int ep_size, int num_local_experts)
{
    groups_create_tp(g, 1, ep_size, num_local_experts);
}

void groups_create_tp(groups_t *g, int tp_size, int ep_size, int num_local_experts)
{
    groups_create_pp(g, 1, tp_size, ep_size, num_local_experts);
}

void groups_create_pp(groups_t *g, int pp_size, int tp_size, int ep_size, int num_local_experts)
{
    memset(g, 0, sizeof *g);
    g->world = comm_create_world();
    check_agreement(g->world, pp_size, tp_size, ep_size, num_local_experts);
    validate(g->world, pp_size, tp_size, ep_size, num_local_experts);

    /* rank = S pp_rank + q, q = tp_rank + tp (ep_rank + ep edp_rank), the
     * dp index q / tp; the colors below keep every group inside its stage
     * (tp and ep already are: S is a multiple of tp ep) */
    const int rank = comm_rank(g->world), size = comm_size(g->world), tp = tp_size, ep = ep_size;
    const int S = size / pp_size, stage = rank / S, q = rank % S;
    g->tp = comm_split(g->world, rank / tp, rank);
    g->dp = comm_split(g->world, stage * tp + q % tp, rank);
    g->ep = comm_split(g->world, rank / (tp * ep) * tp + rank % tp, rank);
    g->edp = comm_split(g->world, stage * tp * ep + q % (tp * ep), rank);
    g->pp = comm_split(g->world, q, rank);
    if (pp_size > 1)
        g->emb = comm_split(g->pp, stage == 0 || stage == pp_size - 1 ? 0 : 1, stage);
    comm_set_label(g->tp, "tp");
    comm_set_label(g->dp, "dp");
    comm_set_label(g->ep, "ep");
    comm_set_label(g->edp, "edp");
    comm_set_label(g->pp, "pp");
    comm_set_label(g->emb, "emb");

    g->world_rank = rank;
    g->world_size = size;
    g->pp_rank = comm_rank(g->pp);
    g->pp_size = comm_size(g->pp);
    g->tp_rank = comm_rank(g->tp);
    g->tp_size = comm_size(g->tp);
    g->dp_rank = comm_rank(g->dp);
    g->dp_size = comm_size(g->dp);
    g->ep_rank = comm_rank(g->ep);
    g->ep_size = comm_size(g->ep);
    g->edp_rank = comm_rank(g->edp);
    g->edp_size = comm_size(g->edp);
    /* The rest of fabula computes partners from these formulas. */
    FB_ASSERT(g->pp_rank == stage && g->pp_size == pp_size);
    FB_ASSERT(g->tp_rank == rank % tp && g->tp_size == tp);
    FB_ASSERT(g->dp_rank == q / tp && g->dp_size == S / tp);
    FB_ASSERT(g->ep_rank == q / tp % ep && g->ep_size == ep);
    FB_ASSERT(g->edp_rank == q / (tp * ep) && g->edp_size == S / (tp * ep));
}

void groups_attach_device(groups_t *g)
{
    g->dp_dev = comm_device_create(g->dp);
    g->ep_dev = comm_device_create(g->ep);
    g->edp_dev = comm_device_create(g->edp);
    /* a size-1 tp group carries nothing: no device comm for it */
    if (g->tp_size > 1)
        g->tp_dev = comm_device_create(g->tp);
    comm_set_label(g->dp_dev, "dp-dev");
    comm_set_label(g->ep_dev, "ep-dev");
    comm_set_label(g->edp_dev, "edp-dev");
    comm_set_label(g->tp_dev, "tp-dev");
}

void groups_free(groups_t *g)
{
    comm_free(&g->tp_dev);
    comm_free(&g->edp_dev);
    comm_free(&g->ep_dev);
    comm_free(&g->dp_dev);
    comm_free(&g->emb);
    comm_free(&g->pp);
    comm_free(&g->tp);
    comm_free(&g->edp);
    comm_free(&g->ep);
    comm_free(&g->dp);
    comm_free(&g->world);
    memset(g, 0, sizeof *g);
}
