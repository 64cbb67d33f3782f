/* The training loop: builds the model, data and optimizer from a validated
 * config and runs cfg->run.steps optimizer steps. */
#ifndef FABULA_TRAIN_TRAINER_H
#define FABULA_TRAIN_TRAINER_H

#include "config/config.h"
/* train_choose_threads, which eval, generate and calibrate found here */
#include "train/train_threads.h"

/* Runs the job cfg describes (after train_config_resolve). Returns the
 * process exit code (FB_EXIT_OK, or FB_EXIT_DIVERGED). */
int trainer_run(const config_t *cfg);

/* trainer_run that also stores each step's loss (the one logged) in
 * losses[step - 1], for the steps this call runs (`fabula validate` compares
 * them bit for bit, which metrics.jsonl's 9 digits cannot). losses holds
 * cfg->run.steps entries, on every rank; NULL stores nothing. */
int trainer_run_losses(const config_t *cfg, double *losses);

#endif
