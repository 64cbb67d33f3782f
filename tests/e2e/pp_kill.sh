#!/bin/sh
# A rank killed in a pipeline-parallel run (issue 17, "a killed rank in a
# pipeline does not hang the others"): 4 ranks, pp 4, a run long enough to
# still be training; once its first steps are logged, the rank of stage 1
# (a middle stage: it has both a sender waiting on it and a receiver it
# feeds) gets SIGKILL. mpiexec must then return nonzero within BOUND
# seconds of the kill: the other stages, blocked in receives from it or
# sends to it, are ended with it rather than left waiting. The rank is
# found by its PMI_RANK in the environment of the launched processes, so
# only this test's own processes are touched. What ends the survivors is
# the launcher's job teardown (MPICH's Hydra, Open MPI's mpirun), with
# fabula's waits (spin or yield) never masking signals.
. "$FB_SRCDIR/tests/e2e/lib.sh"
BOUND=30
export OMP_NUM_THREADS=1

(cd "$FB_SRCDIR" && exec timeout 300 $MPIEXEC -n 4 "$FABULA" train --steps 100000 --run-dir "$SCRATCH/run" \
    --set checkpoint.save_interval=-1 --set 'run.resume="none"' --set model.num_hidden_layers=4 \
    --set model.num_local_experts=0 --set model.hidden_size=64 --set model.intermediate_size=128 \
    --set data.seq_len=64 --set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 \
    --set parallel.pipeline_parallel_size=4) >"$SCRATCH/out.txt" 2>&1 &
job=$!

# the processes under this job's launcher whose environment says PMI_RANK=$1
rank_pid() {
    for pid in $(ps -e -o pid=); do
        [ -r "/proc/$pid/environ" ] || continue
        [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$FABULA")" ] || continue
        # an ancestor must be this test's job
        a=$pid
        while [ "$a" -gt 1 ] && [ "$a" != "$job" ]; do
            a=$(ps -o ppid= -p "$a" 2>/dev/null | tr -d ' ')
            [ -n "$a" ] || a=1
        done
        [ "$a" = "$job" ] || continue
        if tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "PMI_RANK=$1"; then
            echo "$pid"
            return 0
        fi
    done
    return 1
}

# training under way: a few steps in the metrics log
n=0
while [ "$n" -lt 120 ] && [ "$(cat "$SCRATCH/run/metrics.jsonl" 2>/dev/null | wc -l)" -lt 3 ]; do
    sleep 1
    n=$((n + 1))
done
check "the pp 4 run is training" '[ -s "$SCRATCH/run/metrics.jsonl" ] && kill -0 $job 2>/dev/null'
pids=""
for r in 0 1 2 3; do
    pids="$pids $(rank_pid $r)"
done
victim=$(rank_pid 1)
check "the job's 4 ranks found, rank 1 (stage 1) among them" '[ -n "$victim" ] && [ $(echo $pids | wc -w) -eq 4 ]'
if [ -n "$victim" ]; then
    t0=$(date +%s)
    kill -KILL "$victim"
    # the job's own end, or the bound: a watchdog ends the launcher then
    (sleep "$BOUND"; kill -TERM $job 2>/dev/null) &
    dog=$!
    wait $job
    rc=$?
    t1=$(date +%s)
    kill "$dog" 2>/dev/null
    echo "mpiexec exited $rc, $((t1 - t0)) s after the kill"
    check "mpiexec returns nonzero within $BOUND s of the kill" '[ $rc -ne 0 ] && [ $((t1 - t0)) -lt $BOUND ]'
    sleep 1
    left=""
    for p in $pids; do
        kill -0 "$p" 2>/dev/null && left="$left $p"
    done
    check "no rank of the job left running" '[ -z "$left" ]'
    for p in $left; do
        kill -KILL "$p" 2>/dev/null
    done
else
    kill -TERM $job 2>/dev/null
    wait $job
fi
finish
