#include "loader/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h" /* fb_hash2: counter-based, so an epoch's order needs no state */
#include "util/error.h"

#define SAMPLER_MAX_N (INT64_C(1) << 32)

void sampler_permutation(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch)
{
    FB_ASSERT(n >= 1 && n < SAMPLER_MAX_N && epoch >= 0);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    const uint64_t base = (uint64_t)epoch << 32;
    for (int64_t i = n - 1; i > 0; i--) {
        /* The modulo bias is below n / 2^64: invisible at any corpus size. */
        int64_t j = (int64_t)(fb_hash2(seed, base + (uint64_t)i) % (uint64_t)(i + 1));
        int64_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

void sampler_init(sampler_t *s, int64_t n_samples, uint64_t seed)
{
    FB_ASSERT(n_samples >= 1 && n_samples < SAMPLER_MAX_N);
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->n = n_samples;
    s->perm = fb_malloc((size_t)n_samples * sizeof *s->perm);
    sampler_permutation(s->perm, s->n, s->seed, 0);
}

void sampler_next(sampler_t *s, int count, int64_t *ids)
{
    FB_ASSERT(count >= 0);
    for (int i = 0; i < count; i++) {
        if (s->position == s->n) {
            s->epoch++;
            s->position = 0;
            sampler_permutation(s->perm, s->n, s->seed, s->epoch);
        }
        ids[i] = s->perm[s->position++];
    }
}

void sampler_state_get(const sampler_t *s, int64_t *epoch, int64_t *position)
{
    *epoch = s->epoch;
    *position = s->position;
}

void sampler_state_set(sampler_t *s, int64_t epoch, int64_t position)
{
    if (epoch < 0 || position < 0 || position > s->n)
        fb_fatal(FB_EXIT_DATA,
                 "sampler state (epoch %lld, position %lld) does not fit a corpus of %lld samples; "
                 "was the checkpoint made with other data or data.* settings?",
                 (long long)epoch, (long long)position, (long long)s->n);
    if (epoch != s->epoch)
        sampler_permutation(s->perm, s->n, s->seed, epoch);
    s->epoch = epoch;
    s->position = position;
}

void sampler_free(sampler_t *s)
{
    free(s->perm);
    memset(s, 0, sizeof *s);
}
