/* The whole model on a 16-bit backend (ops_cpu16, ops_cuda) against fp32
 * (ops_cpu): one forward and backward on one packed micro-batch with uneven
 * samples, per model case; the loss parts, the kept logits and every
 * parameter gradient compared. Shared by tests/unit/test_model16.c and
 * tests/cuda/test_cuda_model.c; the cases, the routing feature and the
 * bounds are explained in model_compare.c. Plain C, no backend types. */
#ifndef FABULA_TESTS_MODEL_COMPARE_H
#define FABULA_TESTS_MODEL_COMPARE_H

#include <stddef.h>

#include "model/model.h"
#include "ops.h"

typedef struct model_compare_case {
    const char *name;
    model_config_t mc;
    int keep_logits;
    int routing_feature;    /* route on the built-in token class (model_compare.c) */
} model_compare_case_t;

/* What one forward and backward produced, on the host. */
typedef struct model_compare_run {
    double lm, aux, z;      /* lm: mean over the targets */
    int nviews;             /* parameter views of the case's table */
    float **grads;          /* [nviews], each the view's numel */
    float *logits;          /* [T, V] when the case keeps them, else NULL */
    long *tag_counts;       /* [nseq * L * E] routing choices per sample; NULL for a dense model */
    size_t ntag_counts;
} model_compare_run_t;

/* The packed micro-batch every comparison runs on (built on first use). */
const model_input_t *model_compare_input(void);

/* The cases compared with fp32 (dense GQA; MoE top-2 of 4 dropless; MoE
 * with tied embeddings and expert dropout; both MoE routing on the
 * feature): sets *cases, returns how many. */
int model_compare_cases(const model_compare_case_t **cases);

/* The loss scale of the comparisons: 2^16 for fp16, none (0) for bf16. */
double model_compare_loss_scale(fb_dtype_t dt);

/* One forward and backward of case c on ops, from the fixed initial
 * weights (and the routing feature when c asks for it). round_dt: round
 * the master weights to that 16-bit dtype first (FB_DTYPE_F32: leave them). */
void model_compare_run(const model_compare_case_t *c, const ops_t *ops, const model_input_t *in,
                       double loss_scale, fb_dtype_t round_dt, model_compare_run_t *r);
void model_compare_run_free(model_compare_run_t *r);

/* ||a - b|| / ||b|| (||a - b|| when b is 0); NaN when a has a NaN. */
double model_compare_rel_norm(const float *a, const float *b, size_t n);
/* |a - b| / |b| (0 when equal). */
double model_compare_rel_scalar(double a, double b);
/* Routing choices that differ between two runs, counted per sample. */
long model_compare_routing_diff(const model_compare_run_t *a, const model_compare_run_t *b);

/* Called with each case's 16-bit run before it is compared with fp32;
 * returns the failures it found. */
typedef int (*model_compare_each_fn)(const model_compare_case_t *c, const model_compare_run_t *h, fb_dtype_t dt,
                                     void *arg);

/* Every case on ops16 (whose act_dtype is dt) against fp32: a line per
 * comparison; returns the number that failed. */
int model_compare_vs_fp32(const ops_t *ops16, fb_dtype_t dt);
/* The same, calling each (when not NULL) with every 16-bit run. */
int model_compare_vs_fp32_each(const ops_t *ops16, fb_dtype_t dt, model_compare_each_fn each, void *arg);

#endif
