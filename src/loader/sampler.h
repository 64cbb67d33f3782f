/* The order in which samples are visited: epoch after epoch, each a seeded
 * permutation of all samples. The permutation of epoch e depends only on
 * (seed, e, n), never on rank count, thread count or what ran before, so a
 * run resumed from (epoch, position) continues exactly where it stopped. */
#ifndef FABULA_DATA_SAMPLER_H
#define FABULA_DATA_SAMPLER_H

#include <stdint.h>

typedef struct sampler {
    uint64_t seed;
    int64_t epoch;    /* current epoch, from 0 */
    int64_t position; /* ids of this epoch already handed out, 0..n */
    int64_t n;        /* samples */
    int64_t *perm;    /* the current epoch's permutation of 0..n-1 */
} sampler_t;

/* Epoch 0, position 0. n_samples must be in [1, 2^32). */
void sampler_init(sampler_t *s, int64_t n_samples, uint64_t seed);

/* Writes the next `count` sample ids to ids[0..count), moving on to the next
 * epoch's permutation whenever the current one is used up (a call may span
 * several epochs). */
void sampler_next(sampler_t *s, int count, int64_t *ids);

/* Where the sampler stands, for checkpoints. */
void sampler_state_get(const sampler_t *s, int64_t *epoch, int64_t *position);

/* Jumps to (epoch, position), as after handing out `position` ids of epoch
 * `epoch`. A state that does not fit this sample count (epoch < 0, position
 * outside [0, n]): exit FB_EXIT_DATA. */
void sampler_state_set(sampler_t *s, int64_t epoch, int64_t position);

void sampler_free(sampler_t *s);

/* The permutation of epoch `epoch` for (n, seed), written to perm[0..n):
 * a Fisher-Yates shuffle with the swap partner of step i drawn from
 * fb_hash2(seed, epoch * 2^32 + i). */
void sampler_permutation(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch);

#endif
