/* How a run of a reference job is judged against one of its curves
 * (docs/validation-format.md "The rule"): every recorded quantity of every
 * step compared. */
#ifndef FABULA_VALIDATE_COMPARE_H
#define FABULA_VALIDATE_COMPARE_H

#include "io/curve_bands.h"
#include "io/loss_curve.h"

/* Another backend (the GPU's bf16 against the CPU backend's cpu16 twin):
 * not measured yet, no GPU has run the suite; bf16 keeps 8 bits of
 * mantissa, so per-step losses move by ~1e-2 over tens of steps, and a
 * wrong kernel shows as whole tenths. Losses, the gradient norm and the
 * validation loss only: routing may flip on ties under another rounding. */
#define VALIDATE_TOL_OTHER_BACKEND 0.1

/* the real quantities, then the two counts */
#define VALIDATE_NQ (CURVE_NREAL + 2)
#define VALIDATE_Q_DROPPED CURVE_NREAL
#define VALIDATE_Q_TOKENS (CURVE_NREAL + 1)

/* "loss", ..., "valid_lm_loss", "dropped", "tokens_per_expert" */
const char *validate_quantity_name(int q);

typedef struct validate_qresult {
    int compared;           /* 0: not compared under this rule (routing on another backend) */
    double max_diff;        /* max over the steps of |run - curve| (counts: summed |differences| of the step) */
    long worst_step;        /* 1-based step of max_diff; 0 when every value is equal */
    double tolerance;       /* 0: equal values required */
    double run_value, curve_value; /* at the worst step (counts: the first differing count) */
    long first_out;         /* the first step outside its tolerance; 0: none */
    int pass;
} validate_qresult_t;

/* On another layout or BLAS, the routing of the first this many steps must
 * be the curve's: a wrong dispatch or capacity shows at step 1, while a
 * near-tie of two router logits that rounding turns the other way (the
 * earliest measured here: step 17 of expert-dropout on another OpenBLAS
 * kernel set) makes two trainings from then on, which are not compared. */
#define VALIDATE_MIN_SAME_ROUTING 10

typedef struct validate_result {
    long steps;
    long compared;          /* steps whose real quantities were compared: all, or those before routing_flip */
    long routing_flip;      /* the first step whose routing (counts) differs; 0: none */
    const char *rule;       /* which rule applied, in words */
    int exact;              /* the bit-exact rule */
    validate_qresult_t q[VALIDATE_NQ];
    int pass;
} validate_result_t;

/* Compares the first `steps` records of `run` with those of `ref` (both of
 * the same job; steps <= both lengths). The rule: bit-exact when backend,
 * precision, world size and BLAS line are the curve's; on another world
 * size or BLAS, the job's bands on the steps before the first one whose
 * routing differs, which must come after VALIDATE_MIN_SAME_ROUTING steps;
 * VALIDATE_TOL_OTHER_BACKEND on another backend (counts not compared).
 * `blas` is this run's BLAS line. */
validate_result_t validate_compare(const loss_curve_t *run, long steps, const loss_curve_t *ref,
                                   const curve_bands_t *bands, const char *blas);

/* The BLAS of the CPU backend as kernels_print_backends names it, from the
 * text it printed: "OpenBLAS 0.3.21 ... Prescott MAX_THREADS=64" (a new
 * string; "unknown" when the text has none). */
char *validate_blas_line(const char *backends_text);

#endif
