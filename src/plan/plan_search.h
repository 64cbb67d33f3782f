/* The layout search (docs/plan.md, "Layout search"): every layout of a
 * world that plan_layout_check accepts and the global batch divides, kept
 * when plan_memory fits the machine, ranked by plan_time's tokens/s. */
#ifndef FABULA_PLAN_PLAN_SEARCH_H
#define FABULA_PLAN_PLAN_SEARCH_H

#include <stddef.h>

#include "plan/plan.h"

#define PLAN_SEARCH_MAX_TOP 100

typedef struct plan_search_opts {
    int world;
    double headroom;            /* fraction of device memory left free */
    long long global_batch_tokens; /* tokens of one optimizer step over all data-parallel ranks */
    int top;                    /* candidates kept, 1..PLAN_SEARCH_MAX_TOP */
    int keep_zero;              /* 1: the config's ZeRO stage and offload, not searched */
    const struct plan_candidate *ref; /* or NULL: a layout whose rank among the feasible ones is counted */
} plan_search_opts_t;

typedef struct plan_candidate {
    plan_layout_t lay;
    plan_memory_t mem;
    plan_time_t time;
    double headroom;            /* 1 - device bytes / device memory */
} plan_candidate_t;

/* Why layouts were dropped: each layout counts once, under the first test
 * it fails. */
typedef struct plan_search_stats {
    long long evaluated;        /* layouts given to plan_layout_check */
    long long invalid;          /* plan_layout_check refused */
    long long batch;            /* the global batch does not divide into dp x micro-batch tokens */
    long long device;           /* over device memory */
    long long host;             /* over host memory */
    /* skipped, not evaluated: over device memory already with a smaller
     * micro-batch or more recomputation */
    long long pruned;
    long long feasible;
    long long ref_beaten_by;    /* feasible layouts ranked before opts.ref */
} plan_search_stats_t;

/* The micro-batch sizes the search tries, in samples of data.seq_len. */
extern const int plan_search_micro_samples[];
extern const int plan_search_n_micro_samples;

/* What one micro-batch of `tokens` packed windows of data.seq_len looks
 * like to plan_time: full windows, no imbalance (the planner's data). */
void plan_search_workload(const config_t *cfg, int tokens, plan_workload_t *w);

/* Whether `mem` fits `mach` leaving `headroom` of device memory free; on
 * the same memory (host_link_bandwidth 0) device and host add up. Fills
 * *free_frac with the device memory left. 0 fits, 1 device over, 2 host over. */
int plan_search_fits(const plan_memory_t *mem, const plan_machine_t *mach, double headroom, double *free_frac);

/* The candidate of one layout: its memory, fit (plan_search_fits' code
 * returned) and time; the time is computed even when it does not fit. */
int plan_search_evaluate(const config_t *cfg, const plan_machine_t *mach, double headroom, const plan_layout_t *lay,
                         plan_candidate_t *c);

/* Runs the search; best[0..n) best first, n returned (0: nothing fits). */
int plan_search(const config_t *cfg, const plan_machine_t *mach, const plan_search_opts_t *o, plan_candidate_t *best,
                plan_search_stats_t *st);

/* One sentence on why a (called aname) beats b (bname): the layout fields that differ and the
 * time term (compute, exposed communication, bubble, imbalance) that makes
 * most of the difference, or memory headroom when the times tie. */
void plan_search_explain(const plan_candidate_t *a, const char *aname, const plan_candidate_t *b, const char *bname,
                         char *buf, size_t n);

/* "dp=8,tp=8,pp=16,..." in plan_layout_parse's syntax. */
void plan_search_layout_spec(const plan_layout_t *lay, char *buf, size_t n);

#endif
