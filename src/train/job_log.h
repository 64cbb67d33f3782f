/* RUN_DIR/jobs.jsonl: how every training job in a run directory started and
 * ended, whatever the launcher reports (MPICH's mpiexec exits 0 after
 * forwarding a signal whose ranks exited 75). One JSON line when a job
 * starts and one when it ends (docs/run-dir.md, "jobs.jsonl"):
 *   {"event":"start", "time", "host", "pid", "ranks", "node_ranks", "node_cpus",
 *    "threads", "job_id", "step", "steps"}
 *   {"event":"end", "time", "state": "finished" | "preempted" | "failed",
 *    "step", "steps_done", "exit_code", "signal", "checkpoint_step", "message"}
 * A start with no end after it is a job that was killed (SIGKILL, a node
 * lost, the time limit's hard kill). The batch scripts decide whether to
 * requeue from the last end line (slurm/train.sbatch, pbs/train.pbs). */
#ifndef FABULA_TRAIN_JOB_LOG_H
#define FABULA_TRAIN_JOB_LOG_H

/* Every rank, once the run directory is locked: a fatal error from here on
 * (fb_fatal on any rank, fb_fatal_all) is recorded as a "failed" end line
 * by the failing rank (by rank 0 for fb_fatal_all). */
void job_log_open(const char *run_dir, int rank, int world);
/* Rank 0 (others return): the start line, once the run knows the step it
 * starts from and the step it runs to. node_ranks, node_cpus: the ranks on
 * rank 0's node and the CPUs they may run on (0: unknown); threads: each
 * rank's threads. They let a reader tell an oversubscribed run (a scaling
 * point whose ranks share cores) from a slow one. */
void job_log_start(long step, long steps, int node_ranks, int node_cpus, int threads);
/* Every rank: the last step completed and the last step checkpointed (-1:
 * none), for a failure's end line. */
void job_log_progress(long step, long checkpoint_step);
/* Rank 0 (others return): the end line of a job that returns `code`
 * (0 finished, 75 preempted by `sig`, any other failed with `message`),
 * made durable (fsync); then the fatal note is cleared on every rank. */
void job_log_end(int code, int sig, const char *message);

#endif
