/* A pilot run's routing read back from its metrics.jsonl, for `fabula
 * plan time --routing-from` (docs/plan.md, "Capacity drops", "Routing
 * imbalance", "Routing spread"). */
#ifndef FABULA_PLAN_PLAN_ROUTING_H
#define FABULA_PLAN_PLAN_ROUTING_H

#include "config/config.h"
#include "plan/plan.h"

/* What a run's metrics.jsonl says of its routing: the share of expert
 * assignments it dropped (Σ dropped over Σ tokens x assignments per token,
 * over every line that has both) and each line's experts' loads
 * ("expert_tokens": MoE layers x experts rows computed), for the routing
 * imbalance of expert parallelism (docs/plan.md). */
typedef struct plan_routing {
    double dropped;
    int steps, layers, experts;
    double *loads; /* steps x layers x experts */
    /* the routing spread: Σ (n - 1) (sd / mean)^2 and Σ (n - 1) over the
     * MoE layers of every line with n >= 2 micro-batches; Σ tokens and Σ
     * micro-batches of those lines */
    double spread_sq, spread_dof, spread_tokens, spread_microbatches;
} plan_routing_t;

/* Reads path (`flag` names it in messages) against the config's model
 * mc; fatal on a file that is not such a run's (exit 3) or unreadable (4).
 * r->loads is the caller's to free. */
void plan_routing_read(const char *path, const char *flag, const model_config_t *mc, plan_routing_t *r);
/* w's routing loads (pointing into r) and spread from r. */
void plan_routing_apply(const plan_routing_t *r, plan_workload_t *w);
/* A dropped share given for a model that drops nothing: fatal, exit 2
 * (`flag` names where the share came from). */
void plan_routing_check_dropped(const model_config_t *mc, double dropped, const char *flag);

#endif
