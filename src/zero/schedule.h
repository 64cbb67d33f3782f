/* Learning-rate schedules with DeepSpeed's semantics (WarmupLR,
 * WarmupDecayLR, WarmupCosineLR from deepspeed/runtime/lr_schedules.py), so
 * a ds_config.json "scheduler" block gives the same lr per update here.
 *
 * The schedule is a pure function of the update index: nothing to save in a
 * checkpoint beyond the number of applied updates.
 */
#ifndef FABULA_TRAIN_SCHEDULE_H
#define FABULA_TRAIN_SCHEDULE_H

#include "config/config.h"

/* The lr DeepSpeed's engine applies in optimizer update `step` (0-based:
 * step 0 is the first update). `step` counts applied updates only: like
 * DeepSpeed, an update skipped for an fp16 overflow does not advance the
 * schedule. SCHED_CONSTANT returns o->lr. WarmupCosineLR scales o->lr.
 * See schedule.c for the exact mapping onto DeepSpeed's iteration counter. */
double schedule_lr(const sched_config_t *s, const optim_config_t *o, long step);

/* DeepSpeed's get_lr() with the scheduler's last_batch_iteration equal to
 * `iteration` (>= 0): the value scheduler.step() installs after the update
 * with index `iteration`, i.e. the lr of update `iteration + 1`. */
double schedule_lr_at_iteration(const sched_config_t *s, const optim_config_t *o, long iteration);

#endif
