/* How many CPU threads each rank's kernels use: one rule for every command
 * that computes on the CPU (train, eval, generate, plan calibrate). */
#ifndef FABULA_TRAIN_TRAIN_THREADS_H
#define FABULA_TRAIN_TRAIN_THREADS_H

/* Sets the CPU kernels' thread count and returns it: OMP_NUM_THREADS when
 * set, else the node's processors shared among its ranks, instead of each
 * rank starting one thread per core (docs/cpu-threads.md). */
int train_choose_threads(void);

#endif
