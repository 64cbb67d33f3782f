/* A resumed run's learning-rate schedule against the one its checkpoint
 * was trained with (docs/config.md, "Resuming with another schedule"). */
#ifndef FABULA_TRAIN_RESUME_SCHEDULE_H
#define FABULA_TRAIN_RESUME_SCHEDULE_H

#include "config/config.h"

/* Collective. When run.resume designates a checkpoint (its file, or the one
 * checkpoint.dir/latest names), its saved schedule against cfg's: the run
 * trains with cfg's (as DeepSpeed and the Hugging Face Trainer re-plan a
 * resumed schedule from the config), and a difference is said once at
 * start with what differs and the lr of the first step either way; a
 * scheduler.params.total_num_steps this run did not give, moved by another
 * --steps, is a warning with the --set that keeps the checkpoint's.
 * Rank 0 reads the file and speaks (when `verbose`); a checkpoint that
 * cannot be read is left to the resume itself to report. */
void train_resume_schedule(const config_t *cfg, int verbose);

/* Serial: the checkpoint run.resume designates (a new string) and its step
 * in *step, or NULL when the run starts at step 0 (run.resume "none", no
 * checkpoint in checkpoint.dir) or the file cannot be read (*why then says
 * why, else it is ""). */
char *train_resume_point(const config_t *cfg, long *step, char *why, size_t why_len);

#endif
