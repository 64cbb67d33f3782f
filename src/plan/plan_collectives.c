/* The alpha-beta model of a collective (Hockney; the ring and tree costs of
 * Thakur, Rabenseifner and Gropp, "Optimization of Collective
 * Communication Operations in MPICH", 2005): a message costs alpha (the
 * link's latency) plus its bytes over the link's bandwidth. The formulas
 * are in docs/plan.md, "Time"; tests/e2e/plan_time.sh recomputes them. */
#include <math.h>

#include "plan/plan.h"
#include "util/error.h"

double plan_coll_time(plan_coll_t c, int n, double bytes, const plan_link_t *link)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    const double a = link->latency_s, bw = link->bandwidth > 0 ? link->bandwidth : INFINITY;
    const double share = (double)(n - 1) / (double)n;
    switch (c) {
    case PLAN_COLL_ALLREDUCE_RING:
        /* reduce-scatter then all-gather round the ring: 2(n-1) steps of B/n */
        return 2.0 * (n - 1) * a + 2.0 * share * bytes / bw;
    case PLAN_COLL_ALLREDUCE_TREE:
        /* reduce up and broadcast down a binary tree, pipelined: 2 log2 n
         * hops of latency, the whole buffer through each rank's link twice */
        return 2.0 * ceil(log2((double)n)) * a + 2.0 * bytes / bw;
    case PLAN_COLL_ALLREDUCE: {
        const double r = plan_coll_time(PLAN_COLL_ALLREDUCE_RING, n, bytes, link);
        const double t = plan_coll_time(PLAN_COLL_ALLREDUCE_TREE, n, bytes, link);
        return r < t ? r : t;
    }
    case PLAN_COLL_REDUCE_SCATTER:
    case PLAN_COLL_ALLGATHER:
        /* n - 1 ring steps of B/n each */
        return (n - 1) * a + share * bytes / bw;
    case PLAN_COLL_ALLTOALL:
        /* pairwise exchange: n - 1 rounds, each sending B/n to one peer */
        return (n - 1) * a + share * bytes / bw;
    case PLAN_COLL_P2P:
        return a + bytes / bw;
    }
    FB_ASSERT(0);
    return 0.0;
}

const plan_link_t *plan_group_link(const plan_machine_t *m, int stride, int n, int *inter)
{
    const int fits = (long)stride * (long)n <= (long)m->devices_per_node;
    if (inter)
        *inter = !fits && n > 1;
    return fits ? &m->intra : &m->inter;
}

const char *plan_comm_role_name(plan_comm_role_t r)
{
    static const char *const names[PLAN_COMM_N] = {
        "dp_grad", "edp_grad", "dp_param_gather", "zero3_gather", "ep_alltoall", "tp", "pp", "grad_norm",
    };
    FB_ASSERT(r >= 0 && r < PLAN_COMM_N);
    return names[r];
}
