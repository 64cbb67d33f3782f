/* Incremental decoding of one sequence with a KV cache (docs/generate.md):
 * the forward of docs/model.md for new tokens only, each layer's keys and
 * values of the earlier positions read back from the cache. The prompt goes
 * in as one call (the prefill), then one token per call; positions continue
 * from the cache's length. Same ops, same order as model_forward, so the
 * logits match a full forward over the whole sequence to rounding. */
#ifndef FABULA_INFER_DECODER_H
#define FABULA_INFER_DECODER_H

#include <stdint.h>

#include "model/model.h"

typedef struct decoder decoder_t;

/* A decoder for sequences of at most max_len tokens over `m`'s weights
 * (read, never written). `m` must hold all of its parameters itself:
 * created without ZeRO's hooks and without expert parallelism; it must
 * outlive the decoder. Every weight is read from m's buffers as they are
 * when this is called (a 16-bit backend gets its rounded copy here). */
decoder_t *decoder_create(model_t *m, int max_len);
void decoder_free(decoder_t *d);

/* Tokens in the cache. */
int decoder_len(const decoder_t *d);
int decoder_max_len(const decoder_t *d);
/* Logits per step (the model's vocab_size). */
int decoder_vocab_size(const decoder_t *d);
/* Forgets the positions from `len` on (0: a new sequence); the cache rows
 * before stay valid, so several continuations of one prompt share its
 * prefill. */
void decoder_truncate(decoder_t *d, int len);

/* Appends tokens[0..n) at positions len..len+n-1 (len + n <= max_len) and
 * writes the logits that follow the last of them, [vocab_size] fp32 on the
 * host. MoE layers route every token as the training forward does (router,
 * top-k, renormalised weights) but keep every assignment: capacity does not
 * apply at inference. */
void decoder_append(decoder_t *d, const int32_t *tokens, int n, float *logits);

#endif
