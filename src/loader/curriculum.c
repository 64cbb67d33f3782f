#include "loader/curriculum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader/sampler.h"
#include "rng.h" /* fb_hash2: an independent seed per class */
#include "util/error.h"

#define WARMUP_ROUND 64

int curriculum_class(const loader_config_t *cfg, int64_t len)
{
    if (len < cfg->short_threshold)
        return LOADER_SHORT;
    return len < cfg->long_threshold ? LOADER_MEDIUM : LOADER_LONG;
}

const loader_phase_t *curriculum_phase(const loader_config_t *cfg, double progress)
{
    FB_ASSERT(cfg->nphases >= 1);
    for (int i = 0; i < cfg->nphases; i++)
        if (progress < cfg->phases[i].until)
            return &cfg->phases[i];
    return &cfg->phases[cfg->nphases - 1];
}

void curriculum_quota(const double mix[LOADER_NCLASSES], int count, int quota[LOADER_NCLASSES])
{
    FB_ASSERT(count >= 0);
    double sum = 0.0, frac[LOADER_NCLASSES];
    for (int k = 0; k < LOADER_NCLASSES; k++)
        sum += mix[k];
    FB_ASSERT(sum > 0.0);
    int given = 0;
    for (int k = 0; k < LOADER_NCLASSES; k++) {
        double share = mix[k] / sum * count;
        double f = floor(share);
        quota[k] = (int)f;
        frac[k] = share - f;
        given += quota[k];
    }
    /* Normalised shares sum to count up to rounding, so 0..3 seats are left. */
    while (given < count) {
        int best = 0;
        for (int k = 1; k < LOADER_NCLASSES; k++)
            if (frac[k] > frac[best])
                best = k;
        quota[best]++;
        frac[best] = -1.0;
        given++;
    }
    while (given > count) {
        /* Only when rounding pushed the floors past count: take from the largest. */
        int best = 0;
        for (int k = 1; k < LOADER_NCLASSES; k++)
            if (quota[k] > quota[best])
                best = k;
        quota[best]--;
        given--;
    }
}

static uint64_t class_seed(uint64_t seed, int k) { return fb_hash2(seed, 1u + (uint64_t)k); }

static void start_epoch(curriculum_t *cur, int64_t epoch)
{
    cur->epoch = epoch;
    for (int k = 0; k < LOADER_NCLASSES; k++) {
        cur->pos[k] = 0;
        if (cur->size[k] > 0)
            sampler_permutation(cur->perm[k], cur->size[k], class_seed(cur->seed, k), epoch);
    }
}

void curriculum_init(curriculum_t *cur, const loader_config_t *cfg, const int64_t *lens, int64_t n, uint64_t seed)
{
    FB_ASSERT(n >= 1);
    memset(cur, 0, sizeof *cur);
    cur->cfg = *cfg;
    cur->seed = seed;
    for (int64_t i = 0; i < n; i++)
        cur->size[curriculum_class(cfg, lens[i])]++;
    for (int k = 0; k < LOADER_NCLASSES; k++) {
        size_t m = (size_t)(cur->size[k] > 0 ? cur->size[k] : 1);
        cur->members[k] = fb_malloc(m * sizeof *cur->members[k]);
        cur->perm[k] = fb_malloc(m * sizeof *cur->perm[k]);
    }
    int64_t fill[LOADER_NCLASSES] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        int k = curriculum_class(cfg, lens[i]);
        cur->members[k][fill[k]++] = i;
    }
    start_epoch(cur, 0);
}

static int64_t left(const curriculum_t *cur, int k) { return cur->size[k] - cur->pos[k]; }

/* Takes up to `want` ids of class k; returns how many. */
static int take(curriculum_t *cur, int k, int want, int64_t *ids)
{
    int got = 0;
    while (got < want && left(cur, k) > 0)
        ids[got++] = cur->members[k][cur->perm[k][cur->pos[k]++]];
    return got;
}

void curriculum_next(curriculum_t *cur, double progress, int count, int64_t *ids, int drawn[LOADER_NCLASSES])
{
    /* The other classes of k, nearest length first. */
    static const int fallback[LOADER_NCLASSES][2] = {{LOADER_MEDIUM, LOADER_LONG},
                                                     {LOADER_SHORT, LOADER_LONG},
                                                     {LOADER_MEDIUM, LOADER_SHORT}};
    FB_ASSERT(count >= 0);
    const loader_phase_t *ph = curriculum_phase(&cur->cfg, progress);
    int local[LOADER_NCLASSES] = {0, 0, 0};
    int done = 0;
    while (done < count) {
        if (left(cur, LOADER_SHORT) + left(cur, LOADER_MEDIUM) + left(cur, LOADER_LONG) == 0)
            start_epoch(cur, cur->epoch + 1);
        int quota[LOADER_NCLASSES];
        curriculum_quota(ph->mix, count - done, quota);
        int shortfall[LOADER_NCLASSES];
        for (int k = 0; k < LOADER_NCLASSES; k++) {
            int got = take(cur, k, quota[k], ids + done);
            local[k] += got;
            done += got;
            shortfall[k] = quota[k] - got;
        }
        for (int k = 0; k < LOADER_NCLASSES; k++)
            for (int f = 0; f < 2 && shortfall[k] > 0; f++) {
                int j = fallback[k][f];
                int got = take(cur, j, shortfall[k], ids + done);
                local[j] += got;
                done += got;
                shortfall[k] -= got;
            }
    }
    if (drawn)
        memcpy(drawn, local, sizeof local);
}

void curriculum_state_get(const curriculum_t *cur, int64_t *epoch, int64_t pos[LOADER_NCLASSES])
{
    *epoch = cur->epoch;
    memcpy(pos, cur->pos, sizeof cur->pos);
}

void curriculum_state_set(curriculum_t *cur, int64_t epoch, const int64_t pos[LOADER_NCLASSES])
{
    int ok = epoch >= 0;
    for (int k = 0; k < LOADER_NCLASSES; k++)
        ok &= pos[k] >= 0 && pos[k] <= cur->size[k];
    if (!ok)
        fb_fatal(FB_EXIT_DATA,
                 "curriculum state (epoch %lld, positions %lld/%lld/%lld) does not fit classes of %lld/%lld/%lld "
                 "samples; was the checkpoint made with other data or data.curriculum settings?",
                 (long long)epoch, (long long)pos[0], (long long)pos[1], (long long)pos[2], (long long)cur->size[0],
                 (long long)cur->size[1], (long long)cur->size[2]);
    start_epoch(cur, epoch);
    memcpy(cur->pos, pos, sizeof cur->pos);
}

void curriculum_free(curriculum_t *cur)
{
    for (int k = 0; k < LOADER_NCLASSES; k++) {
        free(cur->members[k]);
        free(cur->perm[k]);
    }
    memset(cur, 0, sizeof *cur);
}

int curriculum_max_len(const loader_config_t *cfg, int seq_len, long step)
{
    FB_ASSERT(seq_len >= 1 && step >= 0);
    if (!cfg->warmup || step >= cfg->warmup_steps || cfg->warmup_start >= seq_len)
        return seq_len;
    double raw = cfg->warmup_start + (double)(seq_len - cfg->warmup_start) * (double)step / (double)cfg->warmup_steps;
    long len = (long)floor(raw / WARMUP_ROUND) * WARMUP_ROUND;
    long lo = seq_len < WARMUP_ROUND ? seq_len : WARMUP_ROUND;
    if (len < lo)
        len = lo;
    return len > seq_len ? seq_len : (int)len;
}
