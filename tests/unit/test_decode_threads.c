/* src/infer/decode_threads: the choice of the decode's thread count by
 * timing (issue 46: at its default threads `fabula generate` decoded 20 to
 * 500 times slower on a busy node than on one thread), on constructed
 * token times: the faster count wins the first round, later rounds time the
 * other count against the run's own mean, come back after 64 tokens and 20
 * times their extra cost, further apart while the choice stands; one lucky
 * probe does not undo a run's measurement; a count the user set is kept. */
#include <stdio.h>

#include "infer/decode_threads.h"
#include "testlib.h"

/* Runs n tokens whose cycle takes t_max seconds on the full count and t_one
 * on one thread; returns the tokens decoded on one thread. */
static long run(decode_threads_t *d, int n, double t_max, double t_one)
{
    long one = 0;
    for (int i = 0; i < n; i++) {
        const int k = decode_threads_next(d);
        one += k == 1;
        decode_threads_done(d, k == 1 ? t_one : t_max);
    }
    return one;
}

int main(void)
{
    decode_threads_t d;
    /* a busy node: 40 ms a token on 4 threads, 0.2 ms on one */
    decode_threads_init(&d, 4, 1);
    EXPECT(decode_threads_next(&d) == 4, "the first probe is on the full count");
    decode_threads_done(&d, 0.040);
    EXPECT(decode_threads_next(&d) == 1, "then one thread");
    decode_threads_done(&d, 0.0002);
    EXPECT(!d.probing && d.choice == 1, "one clear pair decides: one thread (choice %d)", d.choice);
    /* the round's extra cost, 39.6 ms, keeps the next round 20 x 39.6 ms of
     * decoding away: about 3960 tokens of 0.2 ms, not 64 */
    long one = run(&d, 3900, 0.040, 0.0002);
    EXPECT(one == 3900 && !d.probing, "3900 tokens on one thread, no probe yet (%ld)", one);
    run(&d, 100, 0.040, 0.0002);
    EXPECT(d.tokens_at[0] == 1 + DECODE_THREADS_PROBES && d.choice == 1 && d.run_len == 128,
           "then a round of %d tokens on 4 threads, the same choice, a run twice as long: %ld, %ld, run %ld",
           DECODE_THREADS_PROBES, d.tokens_at[0], d.tokens_at[1], d.run_len);

    /* a quiet node: the threads are faster; a close pair takes up to 3 */
    decode_threads_init(&d, 2, 1);
    run(&d, 2, 0.010, 0.011);
    EXPECT(d.probing, "10 ms against 11 ms is not clear: another pair");
    run(&d, 4, 0.010, 0.011);
    EXPECT(!d.probing && d.choice == 2 && d.run_len == 64, "after 3 pairs the faster, 2 threads, a run of 64 "
           "(choice %d, run %ld)", d.choice, d.run_len);
    run(&d, 64, 0.010, 0.011);
    EXPECT(d.probing, "a round after 64 tokens when probing costs little");
    EXPECT(decode_threads_next(&d) == 1, "a later round times the other count only");
    decode_threads_done(&d, 0.011);
    run(&d, 1, 0.010, 0.011);
    EXPECT(!d.probing && d.choice == 2 && d.run_len == 128, "the same choice: runs double (%ld)", d.run_len);
    /* the node gets busy during the run: its own mean says so, and the next
     * round moves to one thread; runs start over at 64 */
    run(&d, 128, 0.050, 0.001);
    run(&d, 2, 0.050, 0.001);
    EXPECT(d.choice == 1 && d.run_len == 64, "load: one thread (choice %d, run %ld)", d.choice, d.run_len);
    /* still busy, but a round's 2 threads happen to be fast: half way from
     * the run's 50 ms to 0.5 ms stays above one thread's 1 ms */
    run(&d, 64, 0.050, 0.001);
    run(&d, 2, 0.0005, 0.001);
    EXPECT(d.choice == 1, "a lucky round does not undo a run (estimate %g s)", d.est[0]);
    /* the node quietens down: within rounds the threads come back */
    for (int r = 0; r < 12 && d.choice == 1; r++)
        run(&d, (int)d.run_len + 2, 0.0005, 0.001);
    EXPECT(d.choice == 2, "quiet again: 2 threads (estimate %g s)", d.est[0]);

    /* OMP_NUM_THREADS set, or one thread only: nothing to choose */
    decode_threads_init(&d, 4, 0);
    EXPECT(run(&d, 100, 0.040, 0.0002) == 0 && d.tokens_at[0] == 100, "a set count is kept");
    decode_threads_init(&d, 1, 1);
    EXPECT(run(&d, 10, 0.040, 0.040) == 10 && !d.probing, "one thread: always one");
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
