#!/bin/sh
# The ETA follows the schedule of work per step (docs/monitoring.md, "ETA";
# issue 46): under the sequence-length warm-up (64 tokens to 1024 over the
# run) later steps hold 16 times the tokens of the first, so "steps left x
# time per step so far" falls far short. metrics.jsonl's eta_s at the middle
# step must be within a factor of 2 of the time the run then took; that
# naive estimate is checked to be off by more, so the case does test the
# schedule.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}
R="$SCRATCH/warmup"
run_fabula 1 train --steps 16 --run-dir "$R" --set steps_per_print=4 --set data.seq_len=1024 \
    --set data.seq_len_warmup.enabled=true --set data.seq_len_warmup.start=64 --set data.seq_len_warmup.steps=16 \
    --set checkpoint.save_interval=-1
check "exit 0" '[ $RC -eq 0 ]'
grep "^step " "$SCRATCH/out.txt" | sed 's/^/  | /'
"$PY" - "$R/metrics.jsonl" >"$SCRATCH/eta.txt" <<'PYEOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
end = r[-1]["elapsed"]
m = r[7]  # after step 8 of 16
actual = end - m["elapsed"]
naive = (16 - m["step"]) * m["elapsed"] / m["step"]
print("step %d: eta_s %.3f, actual %.3f, naive %.3f" % (m["step"], m["eta_s"], actual, naive))
print("ratio %.3f naive %.3f" % (m["eta_s"] / actual, naive / actual))
PYEOF
cat "$SCRATCH/eta.txt"
ratio=$(sed -n 's/^ratio \([0-9.]*\) naive.*/\1/p' "$SCRATCH/eta.txt")
naive=$(sed -n 's/^ratio [0-9.]* naive \([0-9.]*\)/\1/p' "$SCRATCH/eta.txt")
check "the naive estimate is off by more than a factor 2 here (ratio $naive)" \
    '[ -n "$naive" ] && "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) < 0.5)" "$naive"'
check "eta_s at step 8 is within a factor 2 of the time left (ratio $ratio)" \
    '[ -n "$ratio" ] && "$PY" -c "import sys; sys.exit(not 0.5 <= float(sys.argv[1]) <= 2.0)" "$ratio"'
check "the console's ETA is printed on each print step" '[ "$(grep -c "^step .* | ETA [0-9]*:[0-9][0-9]:[0-9][0-9]$" "$SCRATCH/out.txt")" -eq 5 ]'
finish
