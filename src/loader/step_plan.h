/* Which samples each step trains on, and how they are split: the sampler
 * (or the length curriculum) offers train_batch_size samples, last step's
 * deferred ones first; the whole offer is packed into at most
 * M = gradient_accumulation_steps x ranks micro-batches of
 * max_tokens_per_batch tokens (M = train_batch_size / micro batch, the same
 * on every layout: the micro-batches, and so capacity and the router's
 * losses, do not depend on the number of ranks, the ep size or the ZeRO
 * stage); the balancer then gives each data-parallel rank at most
 * gradient_accumulation_steps whole micro-batches (uniform / greedy / lpt).
 * Everything is a pure function of the seed and the step, so every rank
 * computes the same global plan without communicating (docs/loader.md),
 * and a plan needs no MPI world: `fabula plan sampler` runs it for simulated
 * rank counts (step_plan_stats.h). */
#ifndef FABULA_TRAIN_STEP_PLAN_H
#define FABULA_TRAIN_STEP_PLAN_H

#include <stdint.h>

#include "config/config.h"
#include "loader/balance.h"
#include "loader/curriculum.h"
#include "loader/pack.h"
#include "loader/sampler.h"

typedef struct step_plan {
    const config_t *cfg;
    int dp_size, dp_rank, nmicro; /* nmicro: micro-batches each rank runs */
    int nbins_max;              /* nmicro x dp_size */
    int64_t nsamples;
    const int64_t *lens;        /* every sample's length */
    double attention_cost;
    int64_t capacity;           /* tokens per micro-batch */
    sampler_t sampler;
    curriculum_t cur;
    int use_curriculum;
    int64_t *offer, *offer_lens, noffer;
    int64_t *deferred, ndeferred;
    pack_plan_t pack;           /* the step's micro-batches, all ranks */
    double *bin_cost;           /* sum of balance_cost over each one's samples */
    balance_plan_t bal;         /* which rank runs which */
    /* this step */
    int max_len;                /* sequence-length warm-up cap */
    double tokens, targets;     /* over all ranks, after the cap */
    double imbalance;           /* max/mean - 1 over ranks of the balancer's cost */
    double imbalance_tokens;    /* the same of its tokens */
    int64_t bins;               /* micro-batches used, all ranks */
    double packing;             /* real tokens / (micro-batches used x capacity), all ranks */
    long used;                  /* samples trained on this step, all ranks */
} step_plan_t;

/* The plan of rank dp_rank of dp_size data-parallel ranks over a corpus
 * whose sample i is lens[i] tokens long (kept by pointer). Reads cfg (kept
 * by pointer): train_batch_size, gradient_accumulation_steps, run.seed and
 * run.steps, data.seq_len and the loader keys, data.attention_cost resolved
 * (config_resolve_attention_cost). */
void step_plan_init(step_plan_t *p, const config_t *cfg, const int64_t *lens, int64_t nsamples, int dp_size,
                    int dp_rank);
void step_plan_free(step_plan_t *p);
/* Plans optimizer step `step` (0-based). */
void step_plan_next(step_plan_t *p, long step);
/* This rank's micro-batch m (0 <= m < nmicro): ids and their capped lengths,
 * and as the value its index among the step's micro-batches (the same on
 * every layout), or -1 and n = 0 for an empty one (which still takes part in
 * the collectives). */
int step_plan_micro(const step_plan_t *p, int m, const int64_t **ids, const int64_t **lens, int *n);

/* Where the data stream stands between two steps, for checkpoints: the
 * sampler's epoch and position, the curriculum's (when enabled), and the
 * samples deferred to the next step (the packer's, which does not know the
 * layout). None of it depends on the number of ranks, so a checkpoint
 * resumes at any layout and continues with the same micro-batches. */
typedef struct step_plan_state {
    int64_t nsamples;                           /* of the corpus the state refers to */
    int64_t sampler_epoch, sampler_position;
    int curriculum;                             /* the curriculum fields are meaningful */
    int64_t curriculum_epoch, curriculum_pos[LOADER_NCLASSES];
    int64_t ndeferred;
    const int64_t *deferred;                    /* get: points into the plan */
} step_plan_state_t;

void step_plan_state_get(const step_plan_t *p, step_plan_state_t *s);
/* Whether a state fits this plan: 0, or -1 with what differs in why[]
 * (another corpus size, the curriculum on one side only, more deferred
 * samples than train_batch_size, ids out of range, a position beyond the
 * corpus). */
int step_plan_state_check(const step_plan_t *p, const step_plan_state_t *s, char *why, size_t why_len);
/* Restores a state saved by step_plan_state_get; one that does not fit:
 * exit FB_EXIT_DATA with what differs. */
void step_plan_state_set(step_plan_t *p, const step_plan_state_t *s);

#endif
