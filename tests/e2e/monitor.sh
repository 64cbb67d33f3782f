#!/bin/sh
# The step monitor (docs/monitoring.md): phase times, model FLOPs from the
# real sample lengths and MFU against monitor.peak_flops, the gather of every
# rank at print steps (and every step with wall_clock_breakdown), the
# measured sgemm peak, the PAPI line, monitor.enabled false, the compact
# console and monitor.verbose, and the keys' bad values.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}

# 64 novels of 127 bytes: each one sample of exactly 128 tokens (the byte
# tokenizer adds one), so sum(len^2) = samples x 128^2 (T^2 would be 8x more)
"$PY" -c '
import json
for i in range(64):
    print(json.dumps({"id": "n%d" % i, "genre": "fantasy", "content": ("abcdefgh"[i % 8] + " word") * 21 + "x"}))' \
    >"$SCRATCH/equal.jsonl"
R="$SCRATCH/flops"
run_fabula 1 train --steps 4 --run-dir "$R" --set steps_per_print=2 --set data.train="$SCRATCH/equal.jsonl" \
    --set monitor.peak_flops=1e10
cat "$SCRATCH/out.txt"
check "1 rank: exit 0" '[ $RC -eq 0 ]'
check "the peak from monitor.peak_flops is printed" 'grep -q "peak 1e+10 FLOP/s per rank (monitor.peak_flops)" "$SCRATCH/out.txt"'
# exactly one PAPI line, on rank 0: "no hardware counters ...; continuing
# with timers only" here (no PMU), "counting ... per phase on ..." elsewhere
check "PAPI: exactly one line, whether counters work or not" \
    '[ "$(grep -c "^fabula: PAPI: " "$SCRATCH/out.txt")" -eq 1 ] && grep -Eq "^fabula: PAPI: (no hardware counters available here \(.+\); continuing with timers only|counting .* per phase on the main thread)" "$SCRATCH/out.txt"'
check "metrics: ranks.counters (with ipc) only where PAPI counts" \
    'if grep -q "^fabula: PAPI: no hardware counters" "$SCRATCH/out.txt"; then ! grep -q "\"counters\"" "$R/metrics.jsonl"; else grep -q "\"ipc\"" "$R/metrics.jsonl"; fi'
# issue 46: one line per print step, the verdict's name on it; its
# evidence and advice printed when it first appears or changes, not every
# time (the 3-line block of about 645 characters was every print step)
check "compact console: one line per print step (1, 2, 4) with the verdict's name, under 160 characters" \
    '[ "$(grep -c "^step " "$SCRATCH/out.txt")" -eq 3 ] &&
     [ "$(grep -Ec "^step .* \| (compute|communication|pipeline|imbalance|input|memory|io|cpu) \| ETA [0-9:]+$" "$SCRATCH/out.txt")" -eq 3 ] &&
     [ "$(grep "^step " "$SCRATCH/out.txt" | awk "length > 159" | wc -l)" -eq 0 ]'
check "compact console: no breakdown line, a verdict line only when the verdict changes" \
    '! grep -q "^  time data" "$SCRATCH/out.txt" && n=$(grep -c "^  bottleneck: " "$SCRATCH/out.txt") &&
     [ "$n" -ge 1 ] && [ "$n" -le "$(grep -Eo " \| [a-z]+ \| ETA" "$SCRATCH/out.txt" | uniq | wc -l)" ]'
check "the run's split and verdict in the summary" \
    'grep -q "^fabula: monitor over the run: data" "$SCRATCH/out.txt" && grep -q "^fabula: bottleneck over the run: " "$SCRATCH/out.txt"'
"$PY" "$FB_SRCDIR/tests/e2e/monitor_check.py" "$R" flops 1e10 128 >"$SCRATCH/check1.txt" 2>&1
rc=$?
grep FAIL "$SCRATCH/check1.txt"; tail -n 1 "$SCRATCH/check1.txt"
check "metrics: phases, model FLOPs from sum(len^2), MFU, RSS, gathers at print steps" '[ $rc -eq 0 ]'

# 2 ranks, wall_clock_breakdown: every step gathered and printed; the
# measured sgemm peak
R="$SCRATCH/ranks"
run_fabula 2 train --steps 3 --run-dir "$R" --set steps_per_print=10 --set wall_clock_breakdown=true
check "2 ranks, wall_clock_breakdown: exit 0" '[ $RC -eq 0 ]'
check "2 ranks: one PAPI line (rank 0 only)" '[ "$(grep -c "^fabula: PAPI: " "$SCRATCH/out.txt")" -eq 1 ]'
check "the measured sgemm peak is printed" 'grep -Eq "monitor: peak [0-9.]+ GFLOP/s per rank \(sgemm" "$SCRATCH/out.txt"'
check "wall_clock_breakdown: a breakdown line every step" '[ "$(grep -c "^  time data" "$SCRATCH/out.txt")" -eq 3 ]'
check "wall_clock_breakdown is no longer noted as without effect" \
    '! grep "accepted without effect" "$SCRATCH/out.txt" | grep -q wall_clock_breakdown'
"$PY" "$FB_SRCDIR/tests/e2e/monitor_check.py" "$R" ranks 2 >"$SCRATCH/check2.txt" 2>&1
rc=$?
grep FAIL "$SCRATCH/check2.txt"; tail -n 1 "$SCRATCH/check2.txt"
check "metrics: every step gathered over 2 ranks, min <= mean <= max, slowest rank" '[ $rc -eq 0 ]'

R="$SCRATCH/verbose"
run_fabula 1 train --steps 4 --run-dir "$R" --set steps_per_print=2 --set data.train="$SCRATCH/equal.jsonl" \
    --set monitor.peak_flops=1e10 --set monitor.verbose=true
check "monitor.verbose: exit 0, the loss parts, a breakdown and a verdict line at steps 1, 2, 4" \
    '[ $RC -eq 0 ] && [ "$(grep -c "^step .*(lm [0-9.]* aux [0-9.]* z [0-9.]*)" "$SCRATCH/out.txt")" -eq 3 ] &&
     [ "$(grep -c "^  time data .*slowest rank" "$SCRATCH/out.txt")" -eq 3 ] && [ "$(grep -c "^  bottleneck: " "$SCRATCH/out.txt")" -eq 3 ]'

R="$SCRATCH/off"
run_fabula 1 train --steps 2 --run-dir "$R" --set monitor.enabled=false
check "monitor.enabled false: exit 0, says so" '[ $RC -eq 0 ] && grep -q "fabula: monitor: off" "$SCRATCH/out.txt"'
check "monitor.enabled false: no phase times, MFU or verdict in metrics" \
    '! grep -Eq "\"(time|mfu|ranks|bottleneck)\"" "$R/metrics.jsonl" && [ "$(wc -l < "$R/metrics.jsonl")" -eq 2 ]'
check "monitor.enabled false: no breakdown line" '! grep -q "^  time data" "$SCRATCH/out.txt"'

for bad in "monitor.verbose=2" "monitor.peak_flops=-1" "monitor.debug_delay_rank=2" "monitor.debug_delay_s=-0.5" \
    "monitor.debug_delay_data_s=1e9" "monitor.enabled=3"; do
    run_fabula 2 train --steps 1 --run-dir "$SCRATCH/bad" --set "$bad"
    key=${bad%%=*}
    check "$bad: exit 2 naming $key" '[ $RC -eq 2 ] && grep -q "$key" "$SCRATCH/out.txt"'
done
finish
