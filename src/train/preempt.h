/* Preemption: a batch system's warning signal (SIGUSR1, or SIGTERM before
 * the kill) becomes a checkpoint at the next step boundary and the exit code
 * FB_EXIT_PREEMPTED (75), so that the job script can requeue the run.
 *
 * The handler only sets a flag (async-signal-safe); the ranks agree on it
 * once per step with one small allreduce, because the signal may reach only
 * some of them (or reach them during different steps). A second signal
 * during the save sets the flag again and changes nothing: the save itself
 * is atomic. */
#ifndef FABULA_TRAIN_PREEMPT_H
#define FABULA_TRAIN_PREEMPT_H

/* Installs the handlers of SIGUSR1 and SIGTERM, and ignores SIGXFSZ so that
 * a write over a file-size limit fails with EFBIG (reported, exit 4)
 * instead of killing the rank. */
void preempt_install(void);
/* This process received SIGUSR1 or SIGTERM (not collective). */
int preempt_pending(void);
/* Collective over the world: 1 on every rank when any rank received one. */
int preempt_agree(void);

#endif
