#include "infer/decode_threads.h"

#include <string.h>

/* index of a thread count: 0 the full count, 1 one thread */
#define SLOT(d, n) ((n) == 1 && (d)->max > 1)

void decode_threads_init(decode_threads_t *d, int max, int adapt)
{
    memset(d, 0, sizeof *d);
    d->max = max > 1 ? max : 1;
    d->adapt = adapt && d->max > 1;
    d->probing = d->adapt;
    d->choice = d->max;
    d->est[0] = d->est[1] = -1.0;
    d->run_len = DECODE_THREADS_RUN_MIN;
    d->current = d->max;
}

int decode_threads_next(decode_threads_t *d)
{
    const int other = d->choice == 1 ? d->max : 1;
    if (!d->probing)
        d->current = d->choice;
    else if (d->rounds == 0) /* pairs, the full count first: a pair sees the same load */
        d->current = d->probes % 2 == 0 ? d->max : 1;
    else
        d->current = other;
    d->tokens_at[SLOT(d, d->current)]++;
    return d->current;
}

static void start_run(decode_threads_t *d, int pick)
{
    if (d->rounds > 0 && pick == d->choice)
        d->run_len = d->run_len * 2 <= DECODE_THREADS_RUN_MAX ? d->run_len * 2 : DECODE_THREADS_RUN_MAX;
    else
        d->run_len = DECODE_THREADS_RUN_MIN;
    d->choice = pick;
    d->rounds++;
    d->probing = 0;
    d->run_tokens = 0;
    d->run_time = 0.0;
}

void decode_threads_done(decode_threads_t *d, double seconds)
{
    if (!d->adapt)
        return;
    if (!d->probing) {
        d->run_tokens++;
        d->run_time += seconds;
        if (d->run_tokens >= d->run_len && d->run_time >= 20.0 * d->extra) {
            /* the run measured its count better than any probe */
            d->est[SLOT(d, d->choice)] = d->run_time / (double)d->run_tokens;
            d->probing = 1;
            d->probes = 0;
            memset(d->sum, 0, sizeof d->sum);
            memset(d->count, 0, sizeof d->count);
        }
        return;
    }
    const int k = SLOT(d, d->current);
    d->sum[k] += seconds;
    d->count[k]++;
    d->probes++;
    if (d->rounds == 0) {
        if (d->probes % 2 != 0)
            return;
        const double m0 = d->sum[0] / d->count[0], m1 = d->sum[1] / d->count[1];
        const double hi = m0 > m1 ? m0 : m1, lo = m0 > m1 ? m1 : m0;
        if (hi < DECODE_THREADS_CLEAR * lo && d->probes < 2 * DECODE_THREADS_MAX_PAIRS)
            return;
        d->est[0] = m0;
        d->est[1] = m1;
        d->extra = (d->sum[0] + d->sum[1]) - d->probes * lo;
        start_run(d, m1 < m0 ? 1 : d->max);
        return;
    }
    if (d->probes < DECODE_THREADS_PROBES)
        return;
    /* the other count's estimate moves half way to what its probes say, so
     * one lucky pair on a loaded node does not undo what a whole run
     * measured, and a node that quietens down is followed within rounds */
    const double m = d->sum[k] / d->count[k], mine = d->est[SLOT(d, d->choice)];
    d->est[k] = d->est[k] >= 0 ? 0.5 * (d->est[k] + m) : m;
    d->extra = m > mine ? (m - mine) * d->probes : 0.0;
    start_run(d, d->est[k] < mine ? d->current : d->choice);
}
