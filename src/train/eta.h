/* The time a run has left, from its schedule of work per step: the
 * sequence-length warm-up and the length curriculum give later steps more
 * tokens (and longer samples) than the first ones, so "steps left x time
 * per step so far" underestimates a run that has them (docs/monitoring.md,
 * "ETA"). A step's work is the balancer's cost, sum over its samples of
 * len + c len^2 (docs/loader.md); its time is fitted as a + b x cost over
 * the steps this process ran. */
#ifndef FABULA_TRAIN_ETA_H
#define FABULA_TRAIN_ETA_H

#include <stdint.h>

#include "config/config.h"

/* The expected cost of the steps from one step on: piecewise constant. */
typedef struct eta_segment {
    long from;                  /* 0-based first step */
    double cost;                /* expected cost of each of its steps */
} eta_segment_t;

typedef struct eta {
    long steps;
    eta_segment_t *seg;
    int nseg;
    double *cum;                /* [nseg + 1] cost of the steps before segment i; cum[nseg] the run's */
    /* the fit: sums over measured steps of 1, cost, time, cost^2, cost x time */
    double n, sc, st, scc, sct;
} eta_t;

/* The schedule of `cfg` (run.steps, train_batch_size, the warm-up, the
 * curriculum, data.attention_cost resolved) over a corpus whose sample i is
 * lens[i] tokens long. */
void eta_init(eta_t *e, const config_t *cfg, const int64_t *lens, int64_t n);
void eta_free(eta_t *e);
/* The expected cost of 0-based step s. */
double eta_step_cost(const eta_t *e, long s);
/* The expected cost of steps [from, run.steps). */
double eta_cost_from(const eta_t *e, long from);
/* A measured step: its plan's cost and its time. */
void eta_add(eta_t *e, double cost, double seconds);
/* Seconds left after `done` steps (of run.steps), with `other` seconds of
 * each step outside the step time (evaluations, checkpoints, logging) on
 * average. Before any measured step: 0. */
double eta_seconds(const eta_t *e, long done, double other);

#endif
