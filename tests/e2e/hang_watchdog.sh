#!/bin/sh
# The hang watchdog (docs/reliability.md, "Hangs"): one rank made never to
# arrive at its step's collectives (monitor.debug_hang_step with
# debug_delay_rank) on 2 ranks (dp), 4 ranks with ep 2 and 4 ranks with pp 2.
# The job must end with exit 76 well before the test's timeout, and
# hang.txt / hang.json must name the rank that did not arrive, the
# collective and group the others wait in, and which ones wait elsewhere
# (checked against the layout by hang_watchdog_check.py); the job log's end
# record says failed with 76. A run without a hang and the same tight bound
# finishes (no false alarm); bad keys exit 2 naming them.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}
TIGHT="--set monitor.hang_min_s=3 --set monitor.hang_factor=2"

# hang NAME NP RANK STEP ARGS...: RANK never arrives at STEP
hang() {
    name=$1; np=$2; rank=$3; step=$4; shift 4
    t0=$(date +%s)
    (cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n "$np" "$FABULA" train --steps 8 --run-dir "$SCRATCH/$name" \
        --set run.resume=none --set checkpoint.save_interval=-1 $TIGHT \
        --set monitor.debug_hang_step="$step" --set monitor.debug_delay_rank="$rank" "$@") \
        >"$SCRATCH/$name.out" 2>&1
    RC=$?
    secs=$(($(date +%s) - t0))
    sed -n '/^hang:/,/^fabula: error: hang/p' "$SCRATCH/$name.out"
    check "$name: exit 76 (got $RC) in $secs s, under the test's 120 s timeout" '[ $RC -eq 76 ]'
}

hang dp2 2 1 3
check "dp2: the report names rank 1 not arrived, rank 0 waiting in dp@0's allreduce; job log: failed, 76" \
    '"$PY" "$FB_SRCDIR/tests/e2e/hang_watchdog_check.py" "$SCRATCH/dp2" 3 "1" "0:allreduce:dp@0" ""'

hang ep2 4 2 4 --set parallel.expert_parallel_size=2
check "ep2: rank 2 not arrived; ranks 0-1 in dp@0's allreduce; rank 3 in ep@2's alltoall" \
    '"$PY" "$FB_SRCDIR/tests/e2e/hang_watchdog_check.py" "$SCRATCH/ep2" 4 "2" "0,1:allreduce:dp@0" "3:alltoall:ep@2"'

hang pp2 4 1 3 --set parallel.pipeline_parallel_size=2
check "pp2: rank 1 not arrived; rank 0 in dp@0; rank 2 in dp@2; rank 3 receiving from stage 0 on pp@1" \
    '"$PY" "$FB_SRCDIR/tests/e2e/hang_watchdog_check.py" "$SCRATCH/pp2" 3 "1" "0:allreduce:dp@0" "2:allreduce:dp@2,3:recv:pp@1"'

# no hang, a bound of 10 s (100 times these steps): 12 steps finish and nothing is reported
(cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n 2 "$FABULA" train --steps 12 --run-dir "$SCRATCH/calm" \
    --set run.resume=none --set checkpoint.save_interval=-1 --set monitor.hang_min_s=10 --set monitor.hang_factor=2) \
    >"$SCRATCH/calm.out" 2>&1
RC=$?
check "no hang: 12 steps exit 0 (got $RC), no hang.txt" '[ $RC -eq 0 ] && [ ! -e "$SCRATCH/calm/hang.txt" ]'

expect_exit2 "hang_factor 1" monitor.hang_factor "from 2" 1 "$FABULA" train --dry-run --set monitor.hang_factor=1
expect_exit2 "hang_min_s 0" monitor.hang_min_s "from 1" 1 "$FABULA" train --dry-run --set monitor.hang_min_s=0
expect_exit2 "debug_hang_step without a rank" monitor.debug_hang_step "debug_delay_rank" 1 "$FABULA" train \
    --dry-run --set monitor.debug_hang_step=3
finish
