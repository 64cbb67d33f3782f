#!/bin/sh
# fp16 dynamic loss scaling on the CPU backend, which computes in fp32: a
# power-of-two loss scale commutes with every fp32 rounding (no overflow
# there), so the run must reproduce the plain run's losses bit for bit while
# its logged scale follows DeepSpeed's rule (validation/loss_scale_ref.py,
# with no overflows), and the scaler's state must survive a resume.
. "$FB_SRCDIR/tests/e2e/lib.sh"

losses() { sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$1"; }
scales() { sed -n 's/.*"loss_scale": *\([-0-9.e+]*\).*/\1/p' "$1"; }
FP16="--set fp16.enabled=true --set fp16.initial_scale_power=8 --set fp16.loss_scale_window=3"

run_fabula 1 train --steps 12 --run-dir "$SCRATCH/plain" --set run.resume=none
check "plain run exits 0" '[ $RC -eq 0 ]'
run_fabula 1 train --steps 12 --run-dir "$SCRATCH/fp16" --set run.resume=none $FP16
cat "$SCRATCH/out.txt"
check "fp16 run exits 0" '[ $RC -eq 0 ]'
check "fp16 on the CPU is said to compute in fp32" 'grep -q "computes in fp32; fp16" "$SCRATCH/out.txt"'
check "losses identical to the plain run" '[ "$(losses "$SCRATCH/plain/metrics.jsonl")" = "$(losses "$SCRATCH/fp16/metrics.jsonl")" ]'
check "no step skipped" '! grep -q "\"skipped\": true" "$SCRATCH/fp16/metrics.jsonl"'

# the scale each step used = the reference's scale before that step
"$PYTHON" "$FB_SRCDIR/validation/loss_scale_ref.py" --case cpu --initial-scale-power 8 --loss-scale-window 3 \
    --hysteresis 2 --pattern '0*12' >"$SCRATCH/ref.txt"
awk 'BEGIN { print 256 } $1 == "step" { print $5 }' "$SCRATCH/ref.txt" | head -n 12 |
    "$PYTHON" -c 'import sys; [print(float.fromhex(l) if "x" in l else float(l)) for l in sys.stdin.read().split()]' \
    >"$SCRATCH/expected.txt"
scales "$SCRATCH/fp16/metrics.jsonl" | "$PYTHON" -c 'import sys; [print(float(l)) for l in sys.stdin.read().split()]' \
    >"$SCRATCH/got.txt"
echo "loss scale per step (fabula / reference):"
paste "$SCRATCH/got.txt" "$SCRATCH/expected.txt"
check "loss scale follows DeepSpeed's rule" 'cmp -s "$SCRATCH/got.txt" "$SCRATCH/expected.txt"'

# 6 steps, checkpoint, resume to 12: the same scales as the straight run
run_fabula 1 train --steps 6 --run-dir "$SCRATCH/resumed" --set run.resume=none $FP16
check "first half exits 0" '[ $RC -eq 0 ]'
run_fabula 1 train --steps 12 --run-dir "$SCRATCH/resumed" --set run.resume=auto $FP16
check "resumed half exits 0" '[ $RC -eq 0 ]'
check "resumed scales equal the straight run's" \
    '[ "$(scales "$SCRATCH/resumed/metrics.jsonl" | tail -n 6)" = "$(scales "$SCRATCH/fp16/metrics.jsonl" | tail -n 6)" ]'
finish
