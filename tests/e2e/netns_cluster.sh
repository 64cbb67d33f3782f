#!/bin/sh
# A multi-node job on one machine (docs/parallel.md "Groups and nodes"): two
# "nodes" as network namespaces, each with its own address on a private
# bridge and its own host name, and MPICH's Hydra launching across them
# through its ssh launcher, whose "ssh" (written here) enters the namespace
# instead of logging in. Hydra then sees two hosts, MPI two nodes
# (MPI_COMM_TYPE_SHARED), and ranks on different nodes talk over the
# bridge. Checked:
#   - dp across nodes: tp 2 x dp 2 on 2 nodes x 2 ranks prints its tp groups
#     inside a node and its dp groups across, and trains the losses of the
#     same layout on one node, digit for digit;
#   - pp across nodes: pp 2 x tp 2, the same;
#   - a layout placed across nodes (round-robin hosts) warns that tp groups
#     span nodes;
#   - preemption of the allocation: SIGUSR1 to every rank on both nodes, a
#     checkpoint, exit 75; the job run again resumes and ends with the
#     uninterrupted run's losses;
#   - a rank on the other node that never arrives: the watchdog names it and
#     its host, exit 76;
#   - the loss of a node: its ranks SIGKILLed together; the job ends within
#     60 s with a message, `latest` names a checkpoint that verifies, and the
#     run resumes from it on one node.
# Skipped (77) without root, ip netns, veth or a bridge, or with a launcher
# other than Hydra. Everything made here (namespaces, bridge, processes in
# them) is removed on exit.
. "$FB_SRCDIR/tests/e2e/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "SKIP: no ip or unshare"; exit 77; }
$MPIEXEC -info 2>/dev/null | grep -q "Launchers available:.*ssh" || { echo "SKIP: the launcher is not Hydra"; exit 77; }

. "$FB_SRCDIR/tests/e2e/netns_lib.sh"
netns_names n 200
trap 'netns_remove' EXIT
trap 'netns_remove; exit 1' INT TERM
netns_setup >"$SCRATCH/setup.txt" 2>&1 ||
    { cat "$SCRATCH/setup.txt"; echo "SKIP: this kernel refuses network namespaces, veth or bridges"; exit 77; }

# Hydra's ssh launcher runs: SSH [-x] HOST COMMAND...; here HOST picks the
# namespace, which gets the host name nodeA or nodeB in its own UTS namespace
{
    echo '#!/bin/sh'
    echo 'while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done'
    echo "case \$1 in $IPA) ns=$NETA name=nodeA ;; $IPB) ns=$NETB name=nodeB ;;"
    echo '*) echo "netns ssh: unknown host $1" >&2; exit 255 ;; esac'
    echo 'shift'
    echo 'exec ip netns exec $ns unshare --uts sh -c "hostname $name; $*"'
} >"$SCRATCH/ssh.sh"
chmod +x "$SCRATCH/ssh.sh"
# across: 2 nodes x 2 ranks, ranks 0-1 on nodeA, 2-3 on nodeB
ACROSS="$MPIEXEC -launcher ssh -launcher-exec $SCRATCH/ssh.sh -iface $BR -hosts $IPA:2,$IPB:2 -n 4"
ROUND="$MPIEXEC -launcher ssh -launcher-exec $SCRATCH/ssh.sh -iface $BR -hosts $IPA:1,$IPB:1 -n 4"
ONE="$MPIEXEC -n 4"
MODEL="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32 --set steps_per_print=1"
# no checkpoint unless a case needs one: 4 ranks on 2 cores write one in about 5 s
NOCKPT="--set checkpoint.save_interval=-1"

# train LAUNCH NAME STEPS ARGS...: from the source tree, output NAME.txt, status RC
train() {
    launch=$1 name=$2 steps=$3
    shift 3
    (cd "$FB_SRCDIR" && timeout 300 $launch env OMP_NUM_THREADS=1 "$FABULA" train $MODEL \
        --set run.steps="$steps" --set run.run_dir="$SCRATCH/$name" "$@") >>"$SCRATCH/$name.txt" 2>&1
    RC=$?
}
# the losses of a run, as metrics.jsonl wrote them
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$SCRATCH/$1/metrics.jsonl"; }

train "$ACROSS" dp2 6 $NOCKPT --set parallel.tensor_parallel_size=2 --set run.resume=none
grep -E "^fabula: nodes" "$SCRATCH/dp2.txt"
[ $RC -eq 0 ] || tail -n 20 "$SCRATCH/dp2.txt"
check "tp 2 x dp 2 on 2 nodes: tp groups inside a node, dp groups across nodes" \
    '[ $RC -eq 0 ] && grep -q "^fabula: nodes: 2 nodes x 2 ranks; tp groups inside a node; dp groups across nodes$" "$SCRATCH/dp2.txt"'
train "$ONE" dp1 6 $NOCKPT --set parallel.tensor_parallel_size=2 --set run.resume=none
check "... the same layout on one node says so" \
    'grep -q "^fabula: nodes: 1 node x 4 ranks; tp groups inside a node; dp groups inside a node$" "$SCRATCH/dp1.txt"'
check "... and trains the same 6 losses, digit for digit" \
    '[ "$(losses dp2 | wc -l)" -eq 6 ] && [ "$(losses dp2)" = "$(losses dp1)" ]'

train "$ACROSS" pp2 6 $NOCKPT --set parallel.tensor_parallel_size=2 --set parallel.pipeline_parallel_size=2 --set run.resume=none
grep -E "^fabula: nodes" "$SCRATCH/pp2.txt"
train "$ONE" pp1 6 $NOCKPT --set parallel.tensor_parallel_size=2 --set parallel.pipeline_parallel_size=2 --set run.resume=none
check "pp 2 x tp 2 on 2 nodes: tp groups inside a node, pp groups across, the one-node losses" \
    'grep -q "^fabula: nodes: 2 nodes x 2 ranks; tp groups inside a node; pp groups across nodes$" "$SCRATCH/pp2.txt" &&
     [ "$(losses pp2 | wc -l)" -eq 6 ] && [ "$(losses pp2)" = "$(losses pp1)" ]'

train "$ROUND" rr 2 $NOCKPT --set parallel.tensor_parallel_size=2 --set run.resume=none
check "hosts round-robin: the tp groups span nodes, and a warning says so" \
    '[ $RC -eq 0 ] && grep -q "tp groups across nodes" "$SCRATCH/rr.txt" && grep -q "warning: tp groups span nodes" "$SCRATCH/rr.txt"'

# a hung rank on the other node: rank 2 (nodeB) never arrives at step 3;
# the watchdog names it and its host, and the job ends with 76
T0=$(date +%s)
train "$ACROSS" hang 8 $NOCKPT --set run.resume=none --set monitor.hang_min_s=3 --set monitor.hang_factor=2 \
    --set monitor.debug_hang_step=3 --set monitor.debug_delay_rank=2
T1=$(date +%s)
sed -n '/^hang:/,/^fabula: error: hang/p' "$SCRATCH/hang.txt"
check "rank 2 hung on nodeB: exit 76 in $((T1 - T0)) s; hang.json names rank 2 and host nodeB, ranks 0, 1, 3 in dp@0's allreduce" \
    '[ $RC -eq 76 ] && ${PYTHON:-/usr/bin/python3} "$FB_SRCDIR/tests/e2e/hang_watchdog_check.py" "$SCRATCH/hang" 3 "2" \
         "0,1,3:allreduce:dp@0" "" &&
     ${PYTHON:-/usr/bin/python3} -c "import json, sys; h = json.load(open(sys.argv[1])); assert h[\"suspect_hosts\"] == [\"nodeB\"], h" \
         "$SCRATCH/hang/hang.json"'

# the ranks' pids on the given nodes (the fabula processes, not the proxies)
rank_pids() {
    for n in "$@"; do
        for p in $(ip netns pids "$n"); do
            [ "$(cat /proc/"$p"/comm 2>/dev/null)" = fabula ] && echo "$p"
        done
    done
}
# wait_steps NAME K: until NAME's metrics.jsonl has K records (60 s at most)
wait_steps() {
    i=0
    while [ "$(cat "$SCRATCH/$1/metrics.jsonl" 2>/dev/null | wc -l)" -lt "$2" ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

# preemption of the allocation: USR1 to every rank, as a scheduler does
LONG="--set parallel.tensor_parallel_size=2 --set checkpoint.save_interval=-1"
train "$ONE" ref 60 $LONG --set run.resume=none
(train "$ACROSS" pre 60 $LONG --set run.resume=none; echo $RC >"$SCRATCH/pre.rc") &
wait_steps pre 3
PIDS=$(rank_pids $NETA $NETB)
echo "USR1 to $PIDS"
kill -USR1 $PIDS 2>/dev/null
wait
RC=$(cat "$SCRATCH/pre.rc")
check "SIGUSR1 to every rank on both nodes: a checkpoint, exit 75" \
    '[ "$RC" -eq 75 ] && [ -s "$SCRATCH/pre/checkpoints/latest" ]'
train "$ACROSS" pre 60 $LONG --set run.resume=auto
check "run again on the 2 nodes: it resumes and ends with the uninterrupted run's 60 losses" \
    '[ $RC -eq 0 ] && [ "$(losses pre | sort -n -u | wc -l)" -eq 60 ] && [ "$(losses pre | sort -n -u)" = "$(losses ref | sort -n)" ]'

# the loss of a node: all its ranks SIGKILLed together
(train "$ACROSS" kill 3000 --set parallel.tensor_parallel_size=2 --set checkpoint.save_interval=5 \
    --set run.resume=none; echo $RC >"$SCRATCH/kill.rc") &
wait_steps kill 12
T0=$(date +%s)
kill -9 $(rank_pids $NETB) 2>/dev/null
wait
T1=$(date +%s)
RC=$(cat "$SCRATCH/kill.rc")
tail -n 5 "$SCRATCH/kill.txt"
LATEST=$(cat "$SCRATCH/kill/checkpoints/latest" 2>/dev/null)
check "nodeB's ranks SIGKILLed: the job ends within 60 s ($((T1 - T0)) s), non-zero, with a message" \
    '[ "$RC" -ne 0 ] && [ $((T1 - T0)) -le 60 ] && grep -q -i "terminat\|killed" "$SCRATCH/kill.txt"'
check "... latest names a checkpoint that verifies ($LATEST)" \
    '[ -n "$LATEST" ] && "$FABULA" ckpt verify -q "$SCRATCH/kill/checkpoints/$LATEST" >"$SCRATCH/verify.txt" 2>&1'
train "$ONE" kill 20 --set parallel.tensor_parallel_size=2 --set run.resume=auto
check "... and the run resumes from it on one node" '[ $RC -eq 0 ] && grep -q "resum" "$SCRATCH/kill.txt"'
finish
