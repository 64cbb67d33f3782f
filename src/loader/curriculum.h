/* The length curriculum: which samples a step draws, by length class and
 * training phase, and the sequence-length warm-up (docs/loader.md).
 *
 * Classes (full sample length, thresholds from data.curriculum):
 *   short   len <  short_threshold
 *   medium  short_threshold <= len < long_threshold
 *   long    long_threshold  <= len
 * Phase: the first one whose `until` exceeds progress = step / run.steps
 * (the last phase from progress 1 on). Each step draws `count` ids: per
 * class the largest-remainder rounding of mix * count, each class in the
 * order of its own seeded per-epoch permutation (sampler_permutation with
 * the class seed fb_hash2(seed, 1 + class)), so no sample repeats within an
 * epoch. A class with nothing left this epoch passes its share to the other
 * classes, nearest length first (short -> medium, long; medium -> short,
 * long; long -> medium, short). When every class is used up, the next epoch
 * starts (within the same call if need be). */
#ifndef FABULA_DATA_CURRICULUM_H
#define FABULA_DATA_CURRICULUM_H

#include <stdint.h>

#include "config/config.h"

typedef struct curriculum {
    loader_config_t cfg;               /* thresholds and phases (a copy) */
    uint64_t seed;
    int64_t epoch;
    int64_t size[LOADER_NCLASSES];     /* samples of each class */
    int64_t *members[LOADER_NCLASSES]; /* their ids, ascending */
    int64_t *perm[LOADER_NCLASSES];    /* this epoch's order of members (indices) */
    int64_t pos[LOADER_NCLASSES];      /* drawn this epoch */
} curriculum_t;

/* The class of a sample of length len. */
int curriculum_class(const loader_config_t *cfg, int64_t len);

/* The phase in force at progress (a fraction of the run, clamped to [0, 1]). */
const loader_phase_t *curriculum_phase(const loader_config_t *cfg, double progress);

/* Largest remainder: quota[k] = floor(mix[k] * count) plus one for the
 * count - sum(floor) classes with the largest fractional parts (lower class
 * first among equals); mix is normalised by its sum first. So
 * |quota[k] - mix[k] * count| < 1 and sum(quota) = count. */
void curriculum_quota(const double mix[LOADER_NCLASSES], int count, int quota[LOADER_NCLASSES]);

/* Classes the n samples by lens[i] (the length of sample i) and starts epoch
 * 0. n >= 1. */
void curriculum_init(curriculum_t *cur, const loader_config_t *cfg, const int64_t *lens, int64_t n, uint64_t seed);

/* The next `count` ids at `progress`, written to ids[0..count); drawn[k]
 * (when not NULL) gets how many came from class k. */
void curriculum_next(curriculum_t *cur, double progress, int count, int64_t *ids, int drawn[LOADER_NCLASSES]);

/* For checkpoints: the epoch and the per-class positions. */
void curriculum_state_get(const curriculum_t *cur, int64_t *epoch, int64_t pos[LOADER_NCLASSES]);
/* A state that does not fit the classes: exit FB_EXIT_DATA. */
void curriculum_state_set(curriculum_t *cur, int64_t epoch, const int64_t pos[LOADER_NCLASSES]);

void curriculum_free(curriculum_t *cur);

/* Sequence-length warm-up: the longest sample allowed at `step`.
 * Disabled: seq_len. Enabled: start + (seq_len - start) * step / steps,
 * rounded down to a multiple of 64, at least min(64, seq_len), at most
 * seq_len; seq_len itself from step `steps` on. */
int curriculum_max_len(const loader_config_t *cfg, int seq_len, long step);

/* The length a sample is cut to under the warm-up: min(len, max_len). */
static inline int64_t curriculum_effective_len(int64_t len, int max_len) { return len < max_len ? len : max_len; }

#endif
