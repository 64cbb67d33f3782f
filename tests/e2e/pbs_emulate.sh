#!/bin/sh
# pbs/train.pbs under an emulated PBS Pro server (tests/e2e/pbs_server.py:
# #PBS directives, PBS_NODEFILE, PBS_JOBID, PBS_O_WORKDIR, NCPUS, and
# stand-ins for qrerun, qsub, qstat, qsig), on 2 ranks of this machine:
#  - the layout comes from select=...:ncpus=...:mpiprocs=... (2 ranks x 1
#    thread; with -l select=1:ncpus=2:mpiprocs=1, 1 rank x 2 threads);
#  - a job signalled mid-run (qsig -s USR1, to the job shell, which forwards
#    it to mpiexec) writes a checkpoint, exits 75, asks qrerun for a rerun,
#    and the rerun resumes from that checkpoint in the same run dir (from the
#    job name) and finishes with per-step losses equal to an uninterrupted
#    job's, bit for bit;
#  - where qrerun is refused (no operator rights), the script submits itself
#    again under the same name, and that job resumes and finishes;
#  - FABULA_MAX_RESTARTS=0: a preempted job ends with 75, not rerun;
#  - qdel (SIGTERM to the job's whole session, as a MoM sends it): the ranks
#    write a checkpoint and exit 75, jobs.jsonl says preempted by SIGTERM,
#    and the job ends, not rerun (it used to be rerun like a preemption);
#  - the script's own warning: with -l walltime=00:00:30 and
#    FABULA_WARN_LEAD=24 it sends itself SIGUSR1 6 s into each run; each run
#    checkpoints and is rerun until the last finishes the job;
#  - FABULA_MIN_PROGRESS above what an attempt trained: preempted, not rerun;
#  - a bad config (exit 2) ends the job with 2, not rerun;
#  - pbs/prep.pbs writes the corpus on 2 ranks.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
EMU="$FB_SRCDIR/tests/e2e/pbs_server.py"
SCRIPT="$FB_SRCDIR/pbs/train.pbs"
STEPS=60
# the default config's data.train is relative to the source tree; the jobs
# run in $SCRATCH (PBS_O_WORKDIR), so their run dirs are $SCRATCH/runs/NAME
ARGS="$CKPT_ARGS --steps $STEPS --set data.train=$FB_SRCDIR/inputs/sample.jsonl"
VARS="FABULA=$FABULA,FABULA_SCRIPT=$SCRIPT"
cd "$SCRATCH" || exit 99
wait_for() { n=$(($1 * 10)); while [ $n -gt 0 ]; do eval "$2" && return 0; sleep 0.1; n=$((n - 1)); done; return 1; }
steps_logged() { [ -f "$SCRATCH/runs/$1/metrics.jsonl" ] && [ "$(wc -l <"$SCRATCH/runs/$1/metrics.jsonl")" -ge "$2" ]; }
# job SPOOL ARGS...: the emulator in the foreground, its status in $RC
job() {
    spool=$1; shift
    mkdir -p "$SCRATCH/$spool"
    OMP_NUM_THREADS=1 timeout 300 "$PY" "$EMU" --spool "$SCRATCH/$spool" "$@" >>"$SCRATCH/$spool.emu" 2>&1
    RC=$?
}
# runs SPOOL: the "JOBID NAME RUN EXIT" lines of its jobs.log, joined by ";"
runs() { tr '\n' ';' <"$SCRATCH/$1/jobs.log"; }
# preempt SPOOL: waits for 3 steps of job 1's run dir (runs/$2), then qsig -s USR1
preempt_later() {
    spool=$1; name=$2
    (wait_for 120 "steps_logged $name 3" && PBS_EMU_SPOOL="$SCRATCH/$spool" sh "$SCRATCH/$spool/bin/qsig" -s USR1 1.emulated) &
}
# same NAME: every step's loss (as printed) equals the uninterrupted job's
same() { [ -s "$SCRATCH/runs/ref/metrics.jsonl" ] && "$PY" "$FB_SRCDIR/tests/e2e/compare_losses.py" \
    "$SCRATCH/runs/ref/metrics.jsonl" "$SCRATCH/runs/$1/metrics.jsonl" 0 >"$SCRATCH/$1.cmp"; }

job s_ref -N ref -v "$VARS,FABULA_ARGS=$ARGS" "$SCRIPT"
check "uninterrupted job: exit 0, one run, $STEPS steps (got $RC: $(runs s_ref))" \
    '[ $RC -eq 0 ] && [ "$(runs s_ref)" = "1.emulated ref 1 0;" ] && steps_logged ref $STEPS'
check "... its layout from select=1:ncpus=2:mpiprocs=2: 2 ranks x 1 thread" \
    'grep -q "2 rank(s), 2 per node, x 1 thread(s), run dir $SCRATCH/runs/ref$" ref.o1 &&
     grep -q "fabula: run: 2 rank(s) x 1 thread(s)" ref.o1'

job s_layout -N layout -l select=1:ncpus=2:mpiprocs=1 -v "$VARS,FABULA_ARGS=$ARGS --steps 1" "$SCRIPT"
check "-l select=1:ncpus=2:mpiprocs=1 on the command line wins: 1 rank x 2 threads (exit $RC)" \
    '[ $RC -eq 0 ] && grep -q "fabula: run: 1 rank(s) x 2 thread(s)" layout.o1'

preempt_later s_pre pre
job s_pre -N pre -v "$VARS,FABULA_ARGS=$ARGS" "$SCRIPT"
check "preempted job: run 1 exits 75 after a checkpoint, asks qrerun, run 2 resumes and exits 0 ($(runs s_pre))" \
    '[ $RC -eq 0 ] && [ "$(runs s_pre)" = "1.emulated pre 1 75;1.emulated pre 2 0;" ] &&
     grep -q "preempted (SIGUSR1): checkpoint of step [0-9]* written, exit 75" pre.o1 &&
     grep -q "train.pbs: preempted after a checkpoint (exit 75): rerunning job 1.emulated (restart 1)" pre.o1 &&
     grep -q "train.pbs: job 1.emulated (pre) attempt 1:" pre.o1 &&
     grep -q "resumed from .*/runs/pre/checkpoints/step-[0-9]*.h5 at step [0-9]*" pre.o1'
check "... per-step losses equal the uninterrupted job's, bit for bit" 'same pre'

preempt_later s_sub sub
PBS_EMU_QRERUN=refuse job s_sub -N sub -v "$VARS,FABULA_ARGS=$ARGS" "$SCRIPT"
check "qrerun refused: the script resubmits itself, job 2 resumes in the same run dir and exits 0 ($(runs s_sub))" \
    '[ $RC -eq 0 ] && [ "$(runs s_sub)" = "1.emulated sub 1 75;2.emulated sub 1 0;" ] &&
     grep -q "train.pbs: qrerun refused: submitting the job again under the same name" sub.o1 &&
     grep -q "train.pbs: job 2.emulated (sub) attempt 1:" sub.o2 &&
     grep -q "resumed from .*/runs/sub/checkpoints/step-" sub.o2'
check "... per-step losses equal the uninterrupted job's, bit for bit" 'same sub'

preempt_later s_max max
job s_max -N max -v "$VARS,FABULA_MAX_RESTARTS=0,FABULA_ARGS=$ARGS" "$SCRIPT"
check "FABULA_MAX_RESTARTS=0: preempted, exit 75, not rerun ($(runs s_max))" \
    '[ $RC -eq 75 ] && [ "$(runs s_max)" = "1.emulated max 1 75;" ] && grep -q "not rerun: restarted 0 time(s) already" max.o1'

# qdel 3 steps into the run: the MoM's SIGTERM to the whole session
(wait_for 120 "steps_logged del 3" && PBS_EMU_SPOOL="$SCRATCH/s_del" sh "$SCRATCH/s_del/bin/qdel" 1.emulated) &
job s_del -N del -v "$VARS,FABULA_ARGS=$ARGS" "$SCRIPT"
check "qdel: checkpoint, exit 75, jobs.jsonl says SIGTERM, the job ends, not rerun ($(runs s_del))" \
    '[ $RC -eq 75 ] && [ "$(runs s_del)" = "1.emulated del 1 75;" ] &&
     grep -q "preempted (SIGTERM): checkpoint of step [0-9]* written, exit 75" del.o1 &&
     tail -n 1 "$SCRATCH/runs/del/jobs.jsonl" | grep -q "\"state\":\"preempted\".*\"signal\":\"SIGTERM\"" &&
     grep -q "train.pbs: preempted by SIGTERM after a checkpoint: not rerun" del.o1'

SLOW="--set model.hidden_size=256 --set model.intermediate_size=512 --set data.seq_len=256"
# 80 steps take about 9 s here, more on a loaded machine: a few runs
job s_wall -N wall -l walltime=00:00:30 \
    -v "$VARS,FABULA_WARN_LEAD=24,FABULA_MAX_RESTARTS=20,FABULA_ARGS=$ARGS $SLOW --steps 80" "$SCRIPT"
check "walltime 30 s, FABULA_WARN_LEAD=24: SIGUSR1 6 s into each run, checkpoint, rerun, the last run finishes ($(runs s_wall))" \
    '[ $RC -eq 0 ] && runs s_wall | grep -q "^1.emulated wall 1 75;1.emulated wall 2 " &&
     grep -q "train.pbs: walltime 00:00:30: the warning (SIGUSR1) in [56] s" wall.o1 &&
     grep -q "train.pbs: SIGUSR1 received: forwarded to mpiexec" wall.o1 &&
     grep -q "preempted (SIGUSR1): checkpoint of step [0-9]* written, exit 75" wall.o1 &&
     steps_logged wall 80 && tail -n 1 "$SCRATCH/runs/wall/jobs.jsonl" | grep -q "\"state\":\"finished\",\"step\":80,"'

preempt_later s_prog prog
job s_prog -N prog -v "$VARS,FABULA_MIN_PROGRESS=100000,FABULA_ARGS=$ARGS" "$SCRIPT"
check "FABULA_MIN_PROGRESS above the attempt's steps: preempted, exit 75, not rerun ($(runs s_prog))" \
    '[ $RC -eq 75 ] && [ "$(runs s_prog)" = "1.emulated prog 1 75;" ] &&
     grep -q "train.pbs: preempted, not rerun: this attempt trained [0-9]* step(s) (at step [0-9]*), fewer than FABULA_MIN_PROGRESS=100000" prog.o1'

job s_bad -N bad -v "$VARS,FABULA_ARGS=$ARGS --set model.hidden_size=0" "$SCRIPT"
check "bad config: the job ends with exit 2, not rerun ($(runs s_bad))" \
    '[ $RC -eq 2 ] && [ "$(runs s_bad)" = "1.emulated bad 1 2;" ] && grep -q "model.hidden_size" bad.o1 &&
     grep -q "train.pbs: fabula exited 2: not rerun" bad.o1'
job s_prep -N prep -v "FABULA=$FABULA,FABULA_ARGS=--output $SCRATCH/corpus.h5 $FB_SRCDIR/inputs/sample.jsonl" \
    "$FB_SRCDIR/pbs/prep.pbs"
check "pbs/prep.pbs: 2 ranks, exit 0, the corpus written (got $RC)" \
    '[ $RC -eq 0 ] && [ -s corpus.h5 ] && grep -q "prep.pbs: job 1.emulated: 2 rank(s), 2 per node" prep.o1'
wait
finish
