#!/bin/sh
# Slurm across two "nodes" on one machine (docs/batch.md, docs/parallel.md
# "Groups and nodes"): two network namespaces with their own address on a
# private bridge and their own host name, one slurmd in each (entered with
# nsenter, which keeps /sys and its cgroup mount, unlike `ip netns exec`),
# munged and slurmctld outside them on the bridge's address. Checked:
#   - slurm/train.sbatch on 2 nodes x 1 task (srun --mpi=pmi2): COMPLETED,
#     the ranks on nodeA and nodeB, dp groups across nodes;
#   - the same job preempted mid-run with `scancel --signal=USR1 --batch`:
#     checkpoint, exit 75, requeued by the script, resumed on both nodes and
#     finished: COMPLETED, Restarts=1, per-step losses equal to the
#     uninterrupted job's bit for bit;
#   - slurm/scaling.sh --ranks-per-node 1: its 2-rank point is a 2-node job.
# Skipped (77) where Slurm, munge, root, namespaces, veth or a bridge are
# missing. Everything started here is stopped by pid, the namespaces and
# the bridge removed.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
skip() { echo "SKIP: $*"; exit 77; }
export PATH="$PATH:/usr/sbin:/sbin"
for c in munged slurmctld slurmd sbatch scontrol scancel squeue sinfo ip nsenter unshare; do
    command -v "$c" >/dev/null 2>&1 || skip "no $c here (Debian: slurm-wlm, munge, iproute2, util-linux)"
done
[ "$(id -u)" -eq 0 ] || skip "namespaces and the daemons need root"

. "$FB_SRCDIR/tests/e2e/netns_lib.sh"
netns_names s 150
D=$(mktemp -d /tmp/fabula-nsslurm.XXXXXX) || exit 99
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
    netns_remove
    mkdir -p "$SCRATCH/daemon-logs" && cp "$D"/*.log "$D/slurm.conf" "$SCRATCH/daemon-logs/" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
daemon_logs() { for f in "$D"/*.log; do echo "--- $f"; tail -n 15 "$f"; done; }

netns_setup >"$SCRATCH/setup.txt" 2>&1 ||
    { cat "$SCRATCH/setup.txt"; skip "this kernel refuses network namespaces, veth or bridges"; }

HOST=$(hostname -s)
MEM=$(awk '/MemTotal/ { print int($2 / 1024 / 4) }' /proc/meminfo)
port=$((20000 + ($$ * 7) % 20000))
mkdir -p "$D/munge" "$D/state" && chmod 700 "$D/munge" || exit 99
dd if=/dev/urandom of="$D/munge/key" bs=1024 count=1 2>/dev/null && chmod 400 "$D/munge/key" || exit 99
cat >"$D/slurm.conf" <<CONF
ClusterName=fabulans
SlurmctldHost=$HOST(${SUB}1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool-%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd-%n.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
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
NodeName=nodeA NodeAddr=$IPA CPUs=1 RealMemory=$MEM State=UNKNOWN
NodeName=nodeB NodeAddr=$IPB CPUs=1 RealMemory=$MEM State=UNKNOWN
PartitionName=test Nodes=nodeA,nodeB Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF="$D/slurm.conf"

munged -F --socket="$D/munge/socket" --key-file="$D/munge/key" --pid-file="$D/munge/pid" \
    --log-file="$D/munged.log" --seed-file="$D/munge/seed" --force >"$D/munged.out.log" 2>&1 &
PIDS="$! $PIDS"
n=50; while [ $n -gt 0 ] && [ ! -S "$D/munge/socket" ]; do sleep 0.1; n=$((n - 1)); done
[ -S "$D/munge/socket" ] || { daemon_logs; skip "munged did not start (log above)"; }
slurmctld -D -c >"$D/slurmctld.out.log" 2>&1 &
PIDS="$! $PIDS"
for x in A B; do
    ns=$NETA
    [ $x = B ] && ns=$NETB
    nsenter --net="/var/run/netns/$ns" unshare --uts sh -c "hostname node$x; exec slurmd -D -N node$x" \
        >"$D/slurmd-node$x.out.log" 2>&1 &
    PIDS="$! $PIDS"
done
n=150
while [ $n -gt 0 ] && [ "$(sinfo -h -N -o %t 2>/dev/null | grep -c '^idle')" != 2 ]; do
    sleep 0.2
    n=$((n - 1))
done
[ "$(sinfo -h -N -o %t 2>/dev/null | grep -c '^idle')" = 2 ] ||
    { daemon_logs; skip "slurmctld and the two slurmd did not bring both nodes up (logs above)"; }
echo "slurm up: nodeA $IPA, nodeB $IPB, controller on ${SUB}1; daemons $PIDS"

cd "$SCRATCH" || exit 99
STEPS=40
ARGS="$CKPT_ARGS --steps $STEPS --set data.train=$FB_SRCDIR/inputs/sample.jsonl"
export FABULA OMP_NUM_THREADS=1 FABULA_LAUNCHER=srun
wait_for() { n=$(($1 * 10)); while [ $n -gt 0 ]; do eval "$2" && return 0; sleep 0.1; n=$((n - 1)); done; return 1; }
field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
ended() { case $(field "$1" JobState) in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return 0 ;; esac; return 1; }
steps_logged() { [ -f "runs/$1/metrics.jsonl" ] && [ "$(wc -l <"runs/$1/metrics.jsonl")" -ge "$2" ]; }
show() { echo "  $(scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|Reason|Restarts|ExitCode|NodeList)=' | tr '\n' ' ')"; }
# submit NAME ARGS...: slurm/train.sbatch on 2 nodes x 1 task; the job id in $ID
submit() {
    name=$1
    shift
    # shellcheck disable=SC2086
    ID=$(sbatch --parsable -J "$name" -N 2 --ntasks-per-node=1 --output="$SCRATCH/$name.out" \
        "$FB_SRCDIR/slurm/train.sbatch" "$@") || { echo "sbatch failed"; daemon_logs; }
    ID=${ID%%;*}
    JOBS="$JOBS $ID"
}

# shellcheck disable=SC2086
submit ref $ARGS
REF=$ID
wait_for 150 "ended $REF"
show "$REF"
check "2 nodes x 1 task: COMPLETED, exit 0, $STEPS steps, dp groups across nodes" \
    '[ "$(field $REF JobState)" = COMPLETED ] && [ "$(field $REF ExitCode)" = 0:0 ] && steps_logged ref $STEPS &&
     grep -q "^fabula: nodes: 2 nodes x 1 rank; dp groups across nodes$" ref.out &&
     { [ "$(field $REF NodeList)" = "node[A-B]" ] || [ "$(field $REF NodeList)" = "nodeA,nodeB" ]; }'

# shellcheck disable=SC2086
submit pre $ARGS
PRE=$ID
wait_for 120 "steps_logged pre 3" && scancel --signal=USR1 --batch "$PRE"
wait_for 60 "grep -q 'requeueing job' pre.out"
# requeued: pending with a BeginTime ahead; started now, once both slurmd
# have finished the old attempt's steps and its credential is revoked in the
# past (slurm_real.sh says why)
wait_for 60 "[ \"\$(field $PRE JobState)\" = PENDING ] && [ \"\$(field $PRE Restarts)\" = 1 ]"
wait_for 30 "grep -q '\[$PRE.batch\] done with job' '$D/slurmd-nodeA.log'"
wait_for 30 "grep -q '\[$PRE.0\] done with job' '$D/slurmd-nodeB.log'"
sleep 2
scontrol update JobId="$PRE" StartTime=now
wait_for 150 "ended $PRE"
show "$PRE"
s=$(sed -n 's/.*preempted (SIGUSR1): checkpoint of step \([0-9]*\) written, exit 75.*/\1/p' pre.out)
check "SIGUSR1 to the batch shell reached the ranks on both nodes: checkpoint of step ${s:-?}, exit 75, requeued" \
    '[ -n "$s" ] && [ "$s" -lt $STEPS ] && grep -q "train.sbatch: preempted after a checkpoint (exit 75): requeueing job $PRE (restart 1)" pre.out'
check "... resumed on the 2 nodes and finished: COMPLETED, Restarts=1, losses equal the uninterrupted job's bit for bit" \
    'grep -q "resumed from $SCRATCH/runs/pre/checkpoints/step-$(printf %08d "${s:-0}").h5 at step $s" pre.out &&
     [ "$(field $PRE JobState)" = COMPLETED ] && [ "$(field $PRE Restarts)" = 1 ] &&
     [ "$(grep -c "^fabula: nodes: 2 nodes x 1 rank; dp groups across nodes$" pre.out)" = 2 ] &&
     "$PY" "$FB_SRCDIR/tests/e2e/compare_losses.py" runs/ref/metrics.jsonl runs/pre/metrics.jsonl 0 >pre.cmp'

if "$FABULA" report --help >/dev/null 2>&1; then
    timeout 300 "$FB_SRCDIR/slurm/scaling.sh" --sweep weak --ranks "1 2" --ranks-per-node 1 --steps 4 --wait \
        --out "$SCRATCH/scaling" -- --set data.seq_len=64 --set model.hidden_size=64 --set model.intermediate_size=128 \
        --set model.num_hidden_layers=1 --set data.train="$FB_SRCDIR/inputs/sample.jsonl" >scaling.txt 2>&1
    rc=$?
    cat scaling.txt
    for j in $(sed -n 's/.*: job \([0-9]*\)[,:].*/\1/p' scaling.txt); do JOBS="$JOBS $j"; done
    # the 2-rank point's job log: 2 ranks, 1 on the node of rank 0
    check "slurm/scaling.sh --ranks-per-node 1: exit 0, two points, the 2-rank one on 2 nodes" \
        '[ $rc -eq 0 ] && [ "$(awk "/^\| *[12] *\| 1 \|/" scaling.txt | wc -l)" -eq 2 ] &&
         "$PY" -c "import json, sys; j = json.loads(open(sys.argv[1]).readline()); assert j[\"ranks\"] == 2 and j[\"node_ranks\"] == 1, j" \
             scaling/weak-n2/jobs.jsonl'
fi
finish
