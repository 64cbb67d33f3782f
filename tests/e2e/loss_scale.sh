#!/bin/sh
# The fp16 loss scaler (src/zero/loss_scale.c) against an independent
# transcription of DeepSpeed's DynamicLossScaler (validation/loss_scale_ref.py):
# the reference writes each case's trajectory, tests/unit/test_loss_scale
# replays the same overflows and compares every step exactly.
. "$FB_SRCDIR/tests/e2e/lib.sh"
BIN="${FB_BUILDDIR:-.}/tests/unit/test_loss_scale"
[ -x "$BIN" ] || { echo "tests/unit/test_loss_scale not built"; exit 1; }
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "SKIP: no Python ($PY) for validation/loss_scale_ref.py"; exit 77; }
REF="$FB_SRCDIR/validation/loss_scale_ref.py"

FILES=""
# ref NAME ARGS...: the reference trajectory of one case, into $SCRATCH/NAME.txt.
ref() {
    name=$1; shift
    if "$PY" "$REF" --case "$name" "$@" >"$SCRATCH/$name.txt" 2>"$SCRATCH/$name.err"; then
        FILES="$FILES $SCRATCH/$name.txt"
    else
        fail "reference for $name: $(cat "$SCRATCH/$name.err")"
    fi
}

# The scale doubles after a window of clean steps, halves on an overflow.
ref window_raise --initial-scale-power 4 --loss-scale-window 3 --hysteresis 1 --pattern '0*10,1,0*8'
ref window_one --initial-scale-power 2 --loss-scale-window 1 --hysteresis 1 --pattern '0*5,1,0*5,1,1,0*3'
# Hysteresis 2 and 3: the first overflows only use up the count; without
# consecutive_hysteresis it refills at a window raise, with it at any clean step.
ref hyst2 --initial-scale-power 10 --loss-scale-window 4 --hysteresis 2 \
    --pattern '1,0*2,1,0*5,1,1,1,0*9,1,0,1,0*6'
ref hyst2_consecutive --initial-scale-power 10 --loss-scale-window 4 --hysteresis 2 --consecutive-hysteresis 1 \
    --pattern '1,0*2,1,0*5,1,1,1,0*9,1,0,1,0*6'
ref hyst3_alternating --initial-scale-power 12 --loss-scale-window 5 --hysteresis 3 \
    --pattern '1,0,1,0,1,0,1,0,1,0,1,0*12,1,1,1,1'
ref hyst3_alternating_consecutive --initial-scale-power 12 --loss-scale-window 5 --hysteresis 3 \
    --consecutive-hysteresis 1 --pattern '1,0,1,0,1,0,1,0,1,0,1,0*12,1,1,1,1'
# The floor: reached, held through further overflows (which still skip).
ref min_floor --initial-scale-power 3 --loss-scale-window 5 --hysteresis 1 --min-loss-scale 2 \
    --pattern '1*6,0*12,1*4'
ref min_floor_odd --initial-scale-power 5 --loss-scale-window 2 --hysteresis 2 --min-loss-scale 3 \
    --pattern '1*12,0*7,1*3'
# A static scale never moves, but an overflow still skips the step.
ref static --loss-scale 128 --pattern '0*3,1,0*2,1*2,0*4'
# fp16 off: factor 1, nothing skipped.
ref disabled --enabled 0 --pattern '0,1,1,0,1'
# Long runs at DeepSpeed's defaults and at a short window.
ref random_defaults --pattern 'random:20000:0.002:7'
ref random_defaults_consecutive --consecutive-hysteresis 1 --pattern 'random:20000:0.002:7'
ref random_short --initial-scale-power 20 --loss-scale-window 7 --hysteresis 3 --min-loss-scale 0.25 \
    --pattern 'random:3000:0.08:11'

"$BIN" $FILES >"$SCRATCH/out.txt" 2>&1
rc=$?
cat "$SCRATCH/out.txt"
check "every case matches DeepSpeed's update rule step by step" \
    '[ $rc -eq 0 ] && grep -q "^PASS" "$SCRATCH/out.txt" && [ $(grep -c "case(s) replayed" "$SCRATCH/out.txt") -eq 13 ]'

# The comparison must be able to fail: older DeepSpeed raised the scale one
# step earlier after an overflow, which the replay has to report.
"$PY" "$REF" --case legacy --rule legacy --initial-scale-power 4 --loss-scale-window 3 --hysteresis 1 \
    --pattern '0*10,1,0*8' >"$SCRATCH/legacy.txt" 2>&1
"$BIN" "$SCRATCH/legacy.txt" >"$SCRATCH/legacy_out.txt" 2>&1
rc=$?
check "a trajectory with another raise rule is reported as a mismatch" \
    '[ $rc -eq 1 ] && grep -q "^MISMATCH .* cur_scale" "$SCRATCH/legacy_out.txt"'
# A truncated reference is an error, not an empty pass.
head -n 5 "$SCRATCH/hyst2.txt" >"$SCRATCH/truncated.txt"
"$BIN" "$SCRATCH/truncated.txt" >"$SCRATCH/truncated_out.txt" 2>&1
rc=$?
check "a truncated reference file is refused" '[ $rc -eq 2 ]'
finish
