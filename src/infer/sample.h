/* The next token from a row of logits (docs/generate.md "Sampling"), with
 * the semantics of Hugging Face transformers' generate: repetition penalty,
 * then temperature, top-k, top-p, then one draw. */
#ifndef FABULA_INFER_SAMPLE_H
#define FABULA_INFER_SAMPLE_H

#include <stdint.h>

typedef struct sample_params {
    double temperature;         /* 0: greedy (argmax, the lowest id on ties) */
    int top_k;                  /* 0: off */
    double top_p;               /* 1: off; (0, 1] */
    double repetition_penalty;  /* 1: off; > 0 */
} sample_params_t;

/* In place on logits[V]: every id with seen[id] != 0 (the prompt's and the
 * output's tokens so far) has a positive logit divided by the penalty and a
 * negative one multiplied by it. seen NULL or penalty 1: no change. */
void sample_repetition_penalty(float *logits, int V, const uint8_t *seen, double penalty);

/* The distribution the draw uses, after the penalty: probs[V] (double,
 * summing to 1; 0 for every id filtered out) from logits / temperature
 * restricted to the top_k largest (ties with the k-th kept), then to the
 * smallest-probability tokens removed while their total stays <= 1 - top_p
 * (the most likely token always kept). temperature must be > 0. logits is
 * left penalised. */
void sample_distribution(float *logits, int V, const sample_params_t *sp, const uint8_t *seen, double *probs);

/* The id whose cumulative probability (in id order) first exceeds u * sum,
 * u in [0, 1): the inverse-CDF draw. */
int sample_draw(const double *probs, int V, double u);

/* The whole step: greedy (temperature 0) or a draw with uniform u. probs is
 * scratch [V]. */
int sample_next(float *logits, int V, const sample_params_t *sp, const uint8_t *seen, double u, double *probs);

#endif
