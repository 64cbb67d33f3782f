/* Preemption: a batch system's warning signal (run.preempt_signals:
 * SIGUSR1, or SIGTERM before the kill, by default) or Ctrl-C (SIGINT) becomes a checkpoint at the next step
 * boundary and the exit code FB_EXIT_PREEMPTED (75), so that the job script
 * can requeue the run. A second SIGINT ends the process at once (the default
 * action), leaving the checkpoints as they are: a save in progress writes a
 * temporary name only.
 *
 * The handler only sets a flag (async-signal-safe); the ranks agree on it
 * once per step with one small allreduce, because the signal may reach only
 * some of them (or reach them during different steps). A second signal
 * during the save sets the flag again and changes nothing: the save itself
 * is atomic. */
#ifndef FABULA_TRAIN_PREEMPT_H
#define FABULA_TRAIN_PREEMPT_H

/* Installs the handlers of the `n` signals in `sigs` (run.preempt_signals)
 * and of SIGINT, and ignores SIGXFSZ
 * so that a write over a file-size limit fails with EFBIG (reported, exit
 * 4) instead of killing the rank. Called before the run loads its data and
 * checkpoint (which can take long), so that a signal then is remembered and
 * honoured at the first step boundary; with SIGUSR1 in the list it also
 * replaces the handler MPICH installs in MPI_Init. A signal not in the list
 * keeps the action it had (MPICH's handler, or the default). */
void preempt_install(const int *sigs, int n);
/* The signal this process received first, or 0 (not collective). */
int preempt_pending(void);
/* Collective over the world: on every rank, the highest signal number any
 * rank received (0: none). */
int preempt_agree(void);
/* "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "SIGXCPU" or "signal N". */
const char *preempt_signal_name(int sig);

#endif
