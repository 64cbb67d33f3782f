#!/bin/sh
# 20 training steps of the default job on the CUDA backend (bf16) against
# the same 20 on the CPU backend (fp32): the loss curves must agree within
# 1e-2 relative at every step; then an fp16 run (dynamic loss scaling) must
# train too. Skips (77) without a CUDA device.
. "$FB_SRCDIR/tests/e2e/lib.sh"

if ! "$FABULA" --version 2>/dev/null | grep -q "device 0:"; then
    echo "SKIP: no CUDA device"
    exit 77
fi
for be in cpu cuda; do
    run_fabula 1 train --steps 20 --run-dir "$SCRATCH/$be" --set run.backend=$be --set run.resume=none
    cat "$SCRATCH/out.txt"
    check "train on $be exits 0" '[ $RC -eq 0 ]'
done
check "loss curves within 1e-2 relative" \
    '$PYTHON "$FB_SRCDIR/tests/e2e/compare_losses.py" "$SCRATCH/cpu/metrics.jsonl" "$SCRATCH/cuda/metrics.jsonl" 1e-2'

run_fabula 1 train --steps 20 --run-dir "$SCRATCH/fp16" --set run.backend=cuda --set run.resume=none \
    --set fp16.enabled=true
cat "$SCRATCH/out.txt"
check "fp16 run exits 0" '[ $RC -eq 0 ]'
check "fp16 logs its loss scale" 'grep -q "\"loss_scale\"" "$SCRATCH/fp16/metrics.jsonl"'
check "fp16 loss curve within 5e-2 of the CPU's" \
    '$PYTHON "$FB_SRCDIR/tests/e2e/compare_losses.py" "$SCRATCH/cpu/metrics.jsonl" "$SCRATCH/fp16/metrics.jsonl" 5e-2'
finish
