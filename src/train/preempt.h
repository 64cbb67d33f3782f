/* Preemption: a batch system's warning signal (run.preempt_signals:
 * SIGUSR1, or SIGTERM before the kill, by default) or Ctrl-C (SIGINT)
 * becomes a checkpoint at the next step boundary and the exit code
 * FB_EXIT_PREEMPTED (75), so that the job script can requeue the run.
 *
 * The handler only sets a flag (async-signal-safe); the ranks agree on it
 * once per step with one small allreduce, because the signal may reach only
 * some of them (or reach them during different steps). A second signal
 * during the save sets the flag again and changes nothing: the save itself
 * is atomic.
 *
 * Ctrl-C: a terminal sends SIGINT to its whole foreground process group
 * (mpiexec, its proxies and every rank) and the launcher forwards it once
 * more, so one key press reaches a rank two or more times within
 * milliseconds. SIGINTs within PREEMPT_CTRL_C_WINDOW_S of the first count
 * as that one Ctrl-C; a SIGINT after that is a second Ctrl-C and ends the
 * process at once with the default action (the checkpoints already
 * written stay as they are; a save it interrupts leaves only a temporary
 * name). */
#ifndef FABULA_TRAIN_PREEMPT_H
#define FABULA_TRAIN_PREEMPT_H

#define PREEMPT_CTRL_C_WINDOW_S 1.0

/* Called first of all, before MPI_Init: catches every signal
 * run.preempt_signals may name (USR1, USR2, TERM, HUP, XCPU) and SIGINT,
 * remembering each, so that a signal during MPI_Init or the config's
 * reading is not lost. (MPICH's SIGUSR1 handler, installed in MPI_Init,
 * passes the signal on to the one it replaced: this one.) Also ignores
 * SIGXFSZ, so that a write over a file-size limit fails with EFBIG
 * (reported, exit 4) instead of killing the rank. */
void preempt_catch_early(void);

/* Once the config is read: the `n` signals in `sigs` (run.preempt_signals)
 * and SIGINT preempt from now on. Every other caught signal gets back the
 * action it had before preempt_catch_early (its default), unless an MPI
 * library has installed its own handler on top since (MPICH's for SIGUSR1),
 * which is kept. A signal caught early that is not in the list then takes
 * that action: a SIGTERM left off the list ends the run as it would have
 * without fabula. */
void preempt_install(const int *sigs, int n);
/* The signal this process received first, or 0 (not collective). */
int preempt_pending(void);
/* Collective over the world: on every rank, the highest signal number any
 * rank received (0: none). */
int preempt_agree(void);
/* "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "SIGXCPU" or "signal N". */
const char *preempt_signal_name(int sig);

#endif
