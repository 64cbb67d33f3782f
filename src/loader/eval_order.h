/* The order in which an evaluation takes a split's samples (run.eval_samples,
 * `fabula eval --samples N`): the first N of it, whatever N, spread over
 * every novel and genre of the split (docs/loader.md, "Validation samples").
 *
 *  - within a novel, its samples in the bit-reversed order of their position
 *    (0, m/2, m/4, 3m/4, ... of its m samples: the index j of 0..P-1, P the
 *    power of two >= m, read with its bits reversed, those >= m skipped), so
 *    any prefix covers the novel from beginning to end;
 *  - the novels interleaved by genre: the first novel (in file order) of
 *    each genre in genre order, then the second of each, and so on;
 *  - in rounds: round r takes the r-th sample of every novel that has one,
 *    in that novel order.
 * So the first N samples cover min(N, novels) novels and every genre once N
 * reaches the number of genres, every novel gets an equal share (until its
 * samples run out), and the order depends on the split alone: not on the
 * rank count, the seed or the step. */
#ifndef FABULA_LOADER_EVAL_ORDER_H
#define FABULA_LOADER_EVAL_ORDER_H

#include <stdint.h>

/* Sample i (0..n-1) belongs to novel[i] (any ids: equal ids, one novel; a
 * novel's samples in ascending i are in text order) of genre genre[i] (the
 * same for all samples of a novel). Writes the order, a permutation of
 * 0..n-1, to order[0..n). */
void eval_order_make(const int32_t *novel, const uint8_t *genre, int64_t n, int64_t *order);

/* How many distinct novels and genres the first `count` entries of `order`
 * cover. */
void eval_order_coverage(const int32_t *novel, const uint8_t *genre, const int64_t *order, int64_t count,
                         int64_t *novels, int *genres);

#endif
