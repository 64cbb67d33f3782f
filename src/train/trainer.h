/* The training loop: builds the model, data and optimizer from a validated
 * config and runs cfg->run.steps optimizer steps. A caller that wants each
 * step's record (the benchmarks, `fabula validate`) drives the steps itself
 * through trainer_open, trainer_step and trainer_close; trainer_run is the
 * three in a loop. */
#ifndef FABULA_TRAIN_TRAINER_H
#define FABULA_TRAIN_TRAINER_H

#include "config/config.h"
#include "train/train_log.h"
/* train_choose_threads, which eval, generate and calibrate found here */
#include "train/train_threads.h"

typedef struct trainer trainer_t;

/* Opens the job cfg describes (after model_config_resolve; cfg must outlive
 * the trainer), collective over the world: the data, the model and its
 * optimizer state (resumed from a checkpoint when the run dir has one), the
 * run dir, its logs and the set-up lines on the console. A bad input ends
 * the job on every rank with one message. */
trainer_t *trainer_open(const config_t *cfg);

/* Runs the run's next optimizer step on every rank (collective): its
 * micro-batches, the update, the metrics line, a validation pass and a
 * checkpoint when they are due, then the ranks' agreement on a preemption
 * signal. Returns 1 with the step's record in *rec (its pointers valid to
 * the next call), or 0 when no step was run: the run's steps are done, a
 * signal preempted it, or this step diverged (nothing logged). A preempted
 * step returns 1; the call after it returns 0. */
int trainer_step(trainer_t *tr, step_record_t *rec);

/* Ends the run (collective): the final checkpoint when it went well, the
 * end-of-run lines, the logs closed; frees tr. Returns the process exit
 * code: FB_EXIT_OK, FB_EXIT_PREEMPTED or FB_EXIT_DIVERGED. */
int trainer_close(trainer_t *tr);

/* Runs the job cfg describes. Returns the process exit code (trainer_close). */
int trainer_run(const config_t *cfg);

/* trainer_run that also stores each step's loss (the one logged) in
 * losses[step - 1], for the steps this call runs (`fabula validate` compares
 * them bit for bit, which metrics.jsonl's 9 digits cannot). losses holds
 * cfg->run.steps entries, on every rank; NULL stores nothing. */
int trainer_run_losses(const config_t *cfg, double *losses);

#endif
