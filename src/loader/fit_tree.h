/* The open micro-batches of a best-fit packer, ordered by (room left, index),
 * so that "the micro-batch with the least room that still fits a sample, the
 * lower index among equals" is found in O(log n) instead of a scan: a
 * step's global batch at 1,024 ranks is thousands of micro-batches.
 *
 * A treap over the micro-batch indices 0..cap): priorities are a hash of
 * the index, so the shape, like everything in the step plan, is a pure
 * function of its input. */
#ifndef FABULA_LOADER_FIT_TREE_H
#define FABULA_LOADER_FIT_TREE_H

#include <stdint.h>

typedef struct fit_tree {
    int root;            /* -1: empty */
    int cap;
    int *left, *right;
    int64_t *room;       /* key of node i: (room[i], i) */
    uint64_t *prio;
} fit_tree_t;

/* Empties the tree and makes room for indices 0..n); `t` starts zeroed and
 * may be reused. */
void fit_tree_reset(fit_tree_t *t, int n);
/* Adds micro-batch i (not in the tree) with `room` tokens left. */
void fit_tree_insert(fit_tree_t *t, int i, int64_t room);
/* Removes micro-batch i (in the tree). */
void fit_tree_remove(fit_tree_t *t, int i);
/* The micro-batch with the least room >= need, the lower index among equal
 * rooms; -1 when none has. */
int fit_tree_best(const fit_tree_t *t, int64_t need);
void fit_tree_free(fit_tree_t *t);

#endif
