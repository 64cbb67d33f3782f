/* `fabula generate`'s loop (docs/generate.md): prefill a prompt once, then
 * for each sample decode token by token from the shared prefill, stream the
 * text as it comes and stop at a stop token or the length limit. */
#ifndef FABULA_INFER_GENERATE_H
#define FABULA_INFER_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "infer/decoder.h"
#include "infer/sample.h"
#include "tokenizer/tokenizer.h"

typedef struct gen_options {
    const int32_t *prompt;      /* what conditions the samples (genre token included) */
    int nprompt;                /* >= 1 */
    int max_new_tokens;         /* >= 1; nprompt + max_new_tokens <= the decoder's max_len */
    sample_params_t sp;
    uint64_t seed;              /* draw k of sample s uses fb_hash2(seed, s << 32 | k) */
    int num_samples;
    const int32_t *stop;        /* ids that end a sample (kept in ids_out, not printed) */
    int nstop;
    FILE *ids_out;              /* one line of ids per sample, or NULL */
    int threads;                /* the CPU threads to decode with */
    int adapt_threads;          /* 1: each token on `threads` or on 1, the faster by timing (decode_threads.h) */
} gen_options_t;

typedef struct gen_stats {
    int prompt_tokens;
    double prefill_s;
    long decoded;               /* tokens generated, all samples */
    double decode_s;
    long decoded_at[2];         /* of the decode steps: [0] on `threads`, [1] on one thread */
} gen_stats_t;

/* Writes each sample's text to `out` (valid UTF-8, a newline after each
 * sample), flushed token by token. Returns 0, or FB_EXIT_IO when writing
 * `out` or ids_out failed. */
int generate(decoder_t *d, const tokenizer_t *tok, const gen_options_t *o, FILE *out, gen_stats_t *st);

#endif
