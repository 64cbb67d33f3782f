/* A checkpoint's saved config made loadable by a job other than the
 * training (`fabula eval`, `fabula generate`). */
#ifndef FABULA_CKPT_CKPT_JOB_CONFIG_H
#define FABULA_CKPT_CKPT_JOB_CONFIG_H

#include "config/config.h"

/* Collective: *cfg from `root`, a config for a job of parallel_size()
 * processes (`what` names it in messages): train_batch_size dropped and one
 * accumulation step, so the batch triple re-derives for this world; an
 * expert-parallel size that does not divide it becomes 1; with from_ckpt,
 * model.init_from is dropped (the checkpoint holds the weights and the
 * complete model section); then `sets`. Rank 0 speaks. Takes root. */
void ckpt_job_config(config_t *cfg, json_t *root, const char *what, int from_ckpt, const char *const *sets,
                     int nsets);
/* Collective: ckpt_job_config of CKPT's saved config; *step its step. A
 * config that cannot be read ends the job on every rank with its code. */
void ckpt_job_config_read(config_t *cfg, const char *ckpt, const char *const *sets, int nsets, long *step);

#endif
