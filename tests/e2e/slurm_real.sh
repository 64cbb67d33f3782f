#!/bin/sh
# slurm/train.sbatch and slurm/scaling.sh on a real one-node Slurm (Debian's
# slurm-wlm and munge; tools/install-deps.sh installs them): the test writes
# a slurm.conf for this machine's cores (JobRequeue=1, proctrack/linuxproc
# so that no cgroups are needed), starts munged, slurmctld and slurmd from a
# scratch folder, and stops them by pid whatever the outcome. Skipped (77)
# where they are missing or cannot start (not root, no munge), saying why.
#  - an uninterrupted 2-task job: exit 0;
#  - a 2-task job preempted mid-run with `scancel --signal=USR1 --batch`
#    (the batch shell, which forwards it to mpiexec): checkpoint, exit 75,
#    requeued by the script (`scontrol requeue`), started again
#    (SLURM_RESTART_COUNT=1; the requeue delay cut with StartTime=now),
#    resumed from that checkpoint in the same run dir (from the job name) and
#    finished: COMPLETED, Restarts=1, per-step losses equal the
#    uninterrupted job's bit for bit; launched by mpiexec (hydra) and by
#    srun --mpi=pmi2 (FABULA_LAUNCHER=srun);
#  - a plain `scancel` mid-run (SIGTERM to the batch shell and the job's
#    steps): the ranks write a checkpoint and exit 75, jobs.jsonl says
#    preempted by SIGTERM, and the job ends CANCELLED, not requeued
#    (Restarts=0; the script used to requeue it like a preemption);
#  - a bad config: FAILED with ExitCode 2, not requeued (Restarts=0);
#  - a hang (a rank that never arrives): the watchdog's exit 76, requeued
#    once, FAILED with ExitCode 76 after FABULA_MAX_RESTARTS;
#  - slurm/prep.sbatch on 2 tasks writes the corpus;
#  - slurm/scaling.sh --ranks "1 2" --wait: two points per sweep, the table
#    of `fabula report --scaling` (only where the binary has `report`).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
skip() { echo "SKIP: $*"; exit 77; }
for c in munged slurmctld slurmd sbatch scontrol scancel squeue sinfo; do
    command -v "$c" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$c" >/dev/null 2>&1 ||
        skip "no $c here (Debian: apt-get install slurm-wlm munge, as tools/install-deps.sh does)"
done
export PATH="$PATH:/usr/sbin:/sbin"
[ "$(id -u)" -eq 0 ] || skip "the daemons run as root here (SlurmUser=root): run the test as root"

# daemon state under /tmp: munge's socket path must stay short
D=$(mktemp -d /tmp/fabula-slurm.XXXXXX) || exit 99
PIDS=
JOBS=
cleanup() {
    for j in $JOBS; do scancel "$j" 2>/dev/null; done
    n=50
    while [ $n -gt 0 ] && [ -n "$JOBS" ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do sleep 0.2; n=$((n - 1)); done
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do
        n=50
        while [ $n -gt 0 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
        kill -KILL "$p" 2>/dev/null
    done
    # the daemons' logs stay with the test's scratch, for a failure
    mkdir -p "$SCRATCH/daemon-logs" && cp "$D"/*.log "$D/slurm.conf" "$SCRATCH/daemon-logs/" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
daemon_logs() { for f in "$D"/*.log; do echo "--- $f"; tail -n 15 "$f"; done; }

HOST=$(hostname -s)
# nproc honours OMP_NUM_THREADS, which the test harness sets to 1
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
[ "$CPUS" -ge 2 ] || skip "the jobs need 2 CPUs; this machine offers $CPUS"
MEM=$(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo)
port=$((20000 + $$ % 20000))
mkdir -p "$D/munge" "$D/state" "$D/spool" && chmod 700 "$D/munge" || exit 99
dd if=/dev/urandom of="$D/munge/key" bs=1024 count=1 2>/dev/null && chmod 400 "$D/munge/key" || exit 99
cat >"$D/slurm.conf" <<CONF
ClusterName=fabulatest
SlurmctldHost=$HOST
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
KillWait=10
MinJobAge=600
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF="$D/slurm.conf"

munged -F --socket="$D/munge/socket" --key-file="$D/munge/key" --pid-file="$D/munge/pid" \
    --log-file="$D/munged.log" --seed-file="$D/munge/seed" --force >"$D/munged.out.log" 2>&1 &
PIDS="$! $PIDS"
n=50; while [ $n -gt 0 ] && [ ! -S "$D/munge/socket" ]; do sleep 0.1; n=$((n - 1)); done
[ -S "$D/munge/socket" ] || { daemon_logs; skip "munged did not start (log above)"; }
slurmctld -D -c >"$D/slurmctld.out.log" 2>&1 &
PIDS="$! $PIDS"
slurmd -D >"$D/slurmd.out.log" 2>&1 &
PIDS="$! $PIDS"
n=150
while [ $n -gt 0 ] && ! sinfo -h -o %t 2>/dev/null | grep -q '^idle'; do sleep 0.2; n=$((n - 1)); done
sinfo -h -o %t 2>/dev/null | grep -q '^idle' || { daemon_logs; skip "slurmctld/slurmd did not bring the node up (logs above)"; }
echo "slurm up: node $HOST, $CPUS CPUs, daemons $PIDS"

cd "$SCRATCH" || exit 99
STEPS=60
ARGS="$CKPT_ARGS --steps $STEPS --set data.train=$FB_SRCDIR/inputs/sample.jsonl"
export FABULA OMP_NUM_THREADS=1
wait_for() { n=$(($1 * 10)); while [ $n -gt 0 ]; do eval "$2" && return 0; sleep 0.1; n=$((n - 1)); done; return 1; }
field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
ended() { case $(field "$1" JobState) in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return 0 ;; esac; return 1; }
steps_logged() { [ -f "runs/$1/metrics.jsonl" ] && [ "$(wc -l <"runs/$1/metrics.jsonl")" -ge "$2" ]; }
# submit NAME ARGS...: sbatch of slurm/train.sbatch with 2 tasks; the job id in $ID
submit() {
    name=$1; shift
    # shellcheck disable=SC2086
    ID=$(sbatch --parsable -J "$name" -n 2 --ntasks-per-node=2 --output="$SCRATCH/$name.out" \
        "$FB_SRCDIR/slurm/train.sbatch" "$@") || { echo "sbatch failed"; daemon_logs; }
    ID=${ID%%;*}
    JOBS="$JOBS $ID"
}
show() { echo "  $(scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|Reason|Restarts|ExitCode)=' | tr '\n' ' ')"; }

# shellcheck disable=SC2086
submit ref $ARGS
REF=$ID
wait_for 150 "ended $REF"
show "$REF"
check "uninterrupted job: COMPLETED, exit 0, $STEPS steps" \
    '[ "$(field $REF JobState)" = COMPLETED ] && [ "$(field $REF ExitCode)" = 0:0 ] && steps_logged ref $STEPS'

# preempted NAME LAUNCHER: a job preempted mid-run, requeued, resumed, finished
preempted() {
    name=$1; launcher=$2
    # shellcheck disable=SC2086
    FABULA_LAUNCHER=$launcher submit "$name" $ARGS
    PRE=$ID
    wait_for 120 "steps_logged $name 3" && scancel --signal=USR1 --batch "$PRE"
    wait_for 60 "grep -q 'requeueing job' $name.out"
    # requeued: pending with a BeginTime about two minutes ahead; start it
    # now, once slurmd has finished the old attempt's batch step and srun
    # step (a new step 0 while the old one's slurmstepd still ends made
    # srun --mpi=pmi2 fail at MPI_Finalize: "failed to send temp kvs")
    wait_for 60 "[ \"\$(field $PRE JobState)\" = PENDING ] && [ \"\$(field $PRE Restarts)\" = 1 ]"
    wait_for 30 "grep -q '\[$PRE.batch\] done with job' '$D/slurmd.log'"
    wait_for 30 "grep -q '\[$PRE.0\] done with job' '$D/slurmd.log'"
    # and once the requeue's credential revocation lies in the past: a
    # launch within its second was refused ("Job credential revoked", the
    # job FAILED with 1)
    sleep 2
    scontrol update JobId="$PRE" StartTime=now
    wait_for 150 "ended $PRE"
    show "$PRE"
    s=$(sed -n 's/.*preempted (SIGUSR1): checkpoint of step \([0-9]*\) written, exit 75.*/\1/p' "$name.out")
    check "$launcher: 2 ranks in one world; SIGUSR1 to the batch shell reached the ranks: checkpoint of step ${s:-?}, exit 75" \
        '[ -n "$s" ] && [ "$s" -lt $STEPS ] && grep -q "train.sbatch: SIGUSR1 received: forwarded to $launcher" $name.out &&
         [ "$(grep -c "^fabula: run: 2 rank(s)" $name.out)" = 2 ]'
    check "... requeued by the script, started again with SLURM_RESTART_COUNT=1 in the same run dir" \
        'grep -q "train.sbatch: preempted after a checkpoint (exit 75): requeueing job $PRE (restart 1)" $name.out &&
         grep -q "train.sbatch: job $PRE ($name) attempt 1 on .*by $launcher, run dir $SCRATCH/runs/$name$" $name.out'
    check "... resumed from that checkpoint and finished: COMPLETED, Restarts=1, exit 0" \
        'grep -q "resumed from $SCRATCH/runs/$name/checkpoints/step-$(printf %08d "${s:-0}").h5 at step $s" $name.out &&
         [ "$(field $PRE JobState)" = COMPLETED ] && [ "$(field $PRE Restarts)" = 1 ] && [ "$(field $PRE ExitCode)" = 0:0 ]'
    check "... per-step losses equal the uninterrupted job's, bit for bit" \
        '"$PY" "$FB_SRCDIR/tests/e2e/compare_losses.py" runs/ref/metrics.jsonl runs/$name/metrics.jsonl 0 >$name.cmp'
}
preempted pre mpiexec
# srun as the launcher (srun --mpi=pmi2; Debian's MPICH speaks that PMI)
preempted pre_srun srun

# a plain scancel: the job's end, with nothing lost
# shellcheck disable=SC2086
submit cancel $ARGS
CAN=$ID
wait_for 120 "steps_logged cancel 3" && scancel "$CAN"
wait_for 120 "ended $CAN"
wait_for 30 "grep -q 'not requeued' cancel.out"
show "$CAN"
s=$(sed -n 's/.*preempted (SIGTERM): checkpoint of step \([0-9]*\) written, exit 75.*/\1/p' cancel.out)
check "plain scancel: checkpoint of step ${s:-?}, jobs.jsonl says SIGTERM, CANCELLED, not requeued (Restarts=0)" \
    '[ -n "$s" ] && [ "$(field $CAN JobState)" = CANCELLED ] && [ "$(field $CAN Restarts)" = 0 ] &&
     grep -q "train.sbatch: preempted by SIGTERM after a checkpoint: not requeued" cancel.out &&
     tail -n 1 runs/cancel/jobs.jsonl | grep -q "\"state\":\"preempted\",\"step\":$s,.*\"signal\":\"SIGTERM\"" &&
     "$FABULA" ckpt verify -q "runs/cancel/checkpoints/step-$(printf %08d "$s").h5" >/dev/null'

# shellcheck disable=SC2086
submit bad $ARGS --set model.hidden_size=0
BAD=$ID
wait_for 120 "ended $BAD"
show "$BAD"
check "bad config: FAILED with ExitCode 2:0, not requeued (Restarts=0)" \
    '[ "$(field $BAD JobState)" = FAILED ] && [ "$(field $BAD ExitCode)" = 2:0 ] && [ "$(field $BAD Restarts)" = 0 ] &&
     grep -q "train.sbatch: fabula exited 2: not requeued" bad.out'

# a hang: rank 1 never arrives at step 3; the watchdog ends the attempt with
# 76, the script requeues it (one node: its host is the whole allocation,
# not excluded), the second attempt hangs alike, and FABULA_MAX_RESTARTS=1
# ends the job
# shellcheck disable=SC2086
FABULA_MAX_RESTARTS=1 submit hang $ARGS --set monitor.debug_hang_step=3 --set monitor.debug_delay_rank=1 \
    --set monitor.hang_min_s=3 --set monitor.hang_factor=2
HANG=$ID
wait_for 90 "grep -q 'requeueing job $HANG after the hang' hang.out 2>/dev/null"
wait_for 60 "[ \"\$(field $HANG JobState)\" = PENDING ] && [ \"\$(field $HANG Restarts)\" = 1 ]"
wait_for 30 "grep -q '\[$HANG.batch\] done with job' '$D/slurmd.log'"
sleep 2
scontrol update JobId="$HANG" StartTime=now
wait_for 120 "ended $HANG"
show "$HANG"
check "hang: exit 76 with hang.txt naming rank 1, requeued once without excluding the only node, then FAILED 76:0" \
    '[ "$(field $HANG JobState)" = FAILED ] && [ "$(field $HANG ExitCode)" = 76:0 ] && [ "$(field $HANG Restarts)" = 1 ] &&
     [ "$(grep -c "train.sbatch: a step hung (exit 76" hang.out)" = 2 ] &&
     grep -q "requeued without excluding them" hang.out &&
     grep -q "train.sbatch: not requeued (FABULA_HANG_REQUEUE=1, restart 1 of 1)" hang.out &&
     grep -q "not arrived: rank 1 " runs/hang/hang.txt'

ID=$(sbatch --parsable -J prep -n 2 --ntasks-per-node=2 --output="$SCRATCH/prep.out" "$FB_SRCDIR/slurm/prep.sbatch" \
    --output "$SCRATCH/corpus.h5" "$FB_SRCDIR/inputs/sample.jsonl")
ID=${ID%%;*}
JOBS="$JOBS $ID"
wait_for 120 "ended $ID"
show "$ID"
check "slurm/prep.sbatch on 2 tasks: COMPLETED, the corpus written" \
    '[ "$(field $ID JobState)" = COMPLETED ] && [ -s corpus.h5 ] && grep -q "prep.sbatch: fabula prep exited 0" prep.out'

if "$FABULA" report --help >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    timeout 300 "$FB_SRCDIR/slurm/scaling.sh" --ranks "1 2" --steps 4 --wait --out "$SCRATCH/scaling" -- \
        --set data.seq_len=64 --set model.hidden_size=64 --set model.intermediate_size=128 \
        --set model.num_hidden_layers=1 --set data.train="$FB_SRCDIR/inputs/sample.jsonl" >scaling.txt 2>&1
    rc=$?
    cat scaling.txt
    for j in $(sed -n 's/.*: job \([0-9]*\)[,:].*/\1/p' scaling.txt); do JOBS="$JOBS $j"; done
    # a row of the points' table: | ranks | runs (1) | tokens/s | ...
    rows() { awk -v t="$1" '/^## /{ on = index($0, t) > 0 } on && /^\| *[0-9]+ *\| 1 \|/' scaling.txt | wc -l; }
    check "slurm/scaling.sh on Slurm: exit 0, a strong and a weak table of 2 rows each, scaling.md and .svg" \
        '[ $rc -eq 0 ] && [ "$(rows strong)" = 2 ] && [ "$(rows weak)" = 2 ] &&
         [ -s scaling/strong/scaling.md ] && [ -s scaling/weak/scaling.svg ]'
else
    echo "scaling part not run: this fabula has no 'report' command (fabula report --scaling)"
fi
finish
