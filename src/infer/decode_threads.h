/* How many threads decode a token: chosen by timing. A decode step is many
 * small kernel calls; on a node other work keeps busy, each parallel region
 * waits for a descheduled thread (and spinning threads take the cores the
 * others need), so the default thread count decoded a small model 20 to
 * 500 times slower than one thread or a passive wait policy (issue 46),
 * while on a quiet node the threads are the faster. The output does not
 * depend on the thread count (docs/cpu-threads.md), so the decoder times
 * its tokens at both counts now and then and decodes at the faster
 * (docs/generate.md, "Speed"). Pure bookkeeping: the caller sets the
 * threads and times the tokens. */
#ifndef FABULA_INFER_DECODE_THREADS_H
#define FABULA_INFER_DECODE_THREADS_H

/* The first round times pairs of tokens (the full count, then one thread),
 * at most this many pairs; it ends early when one count's mean is this
 * much faster. Later rounds time the other count's tokens only, this many,
 * against the mean of the run that preceded them. */
#define DECODE_THREADS_MAX_PAIRS 3
#define DECODE_THREADS_CLEAR 1.25
#define DECODE_THREADS_PROBES 2
/* Tokens between rounds: from 64, doubling while the choice stands, up to
 * 4096; and at least 20 times the last round's extra time, so that probing
 * costs at most 5% of the decode. */
#define DECODE_THREADS_RUN_MIN 64
#define DECODE_THREADS_RUN_MAX 4096

typedef struct decode_threads {
    int max;                    /* the full count */
    int adapt;                  /* 0: `max` throughout */
    int probing, probes;        /* a round is on; its tokens so far */
    double sum[2];              /* this round's seconds at [0] max, [1] one thread */
    int count[2];
    double est[2];              /* seconds a token at [0] max, [1] one thread; < 0 unknown */
    int choice;                 /* threads between rounds */
    int rounds;                 /* rounds decided */
    long run_len;               /* tokens of the current run */
    long run_tokens;
    double run_time, extra;     /* the run's seconds; the last round's cost beyond the faster count */
    long tokens_at[2];          /* tokens decoded at [0] max, [1] one thread */
    int current;                /* threads of the token being decoded */
} decode_threads_t;

/* `max` threads available; adapt 0 keeps them (the user set the count). */
void decode_threads_init(decode_threads_t *d, int max, int adapt);
/* The thread count for the next token. */
int decode_threads_next(decode_threads_t *d);
/* That token's whole cycle took `seconds`: its decode step and the serial
 * work after it up to the next step (sampling, streaming), which the idle
 * threads of a spinning pool slow down on a busy node. */
void decode_threads_done(decode_threads_t *d, double seconds);

#endif
