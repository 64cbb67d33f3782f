#!/bin/sh
# The trainer with 16-bit activations and compute weights, on the CPU
# (run.backend cpu16: the CPU kernels with bf16/fp16 storage, the numerics of
# the CUDA backend): 20 steps of the default job against the fp32 run, loss
# curves within 1e-2 relative (bf16) at every step; fp16 with its loss
# scaler too; and the 16-bit paths of the parallel machinery: 2 ranks with
# ZeRO-3 and expert parallelism 2 (bf16 activations in the all-to-all),
# against the 1-rank bf16 run, checkpointed and resumed; ZeRO-3 with the
# optimizer and parameters offloaded to the host, against the same run.
. "$FB_SRCDIR/tests/e2e/lib.sh"
CMP="$FB_SRCDIR/tests/e2e/compare_losses.py"

run_fabula 1 train --steps 20 --run-dir "$SCRATCH/fp32" --set run.resume=none
check "fp32 run exits 0" '[ $RC -eq 0 ]'
run_fabula 1 train --steps 20 --run-dir "$SCRATCH/bf16" --set run.resume=none --set run.backend=cpu16
cat "$SCRATCH/out.txt"
check "bf16 run exits 0" '[ $RC -eq 0 ]'
check "bf16 run says what it computes in" 'grep -q "cpu-bf16: the CPU kernels with bf16 storage" "$SCRATCH/out.txt"'
check "bf16 loss curve within 1e-2 of fp32" '$PYTHON "$CMP" "$SCRATCH/fp32/metrics.jsonl" "$SCRATCH/bf16/metrics.jsonl" 1e-2'

run_fabula 1 train --steps 20 --run-dir "$SCRATCH/fp16" --set run.resume=none --set run.backend=cpu16 \
    --set fp16.enabled=true
check "fp16 run exits 0" '[ $RC -eq 0 ]'
check "fp16 loss curve within 1e-2 of fp32" '$PYTHON "$CMP" "$SCRATCH/fp32/metrics.jsonl" "$SCRATCH/fp16/metrics.jsonl" 1e-2'

# Same global batch on 1 and 2 ranks (dropless, no aux loss: per-micro-batch
# statistics otherwise differ with the layout; see train_default.sh)
SAME="--set train_batch_size=8 --set train_micro_batch_size_per_gpu=4 --set model.capacity_factor=0 --set model.router_aux_loss_coef=0 --set run.backend=cpu16"
run_fabula 1 train --steps 10 --run-dir "$SCRATCH/one" --set run.resume=none $SAME
check "1-rank bf16 exits 0" '[ $RC -eq 0 ]'
run_fabula 2 train --steps 6 --run-dir "$SCRATCH/two" --set run.resume=none $SAME \
    --set zero_optimization.stage=3 --set parallel.expert_parallel_size=2 --set checkpoint.save_interval=3
check "2 ranks, ZeRO-3, ep 2, bf16: exits 0" '[ $RC -eq 0 ]'
run_fabula 2 train --steps 10 --run-dir "$SCRATCH/two" --set run.resume=auto $SAME \
    --set zero_optimization.stage=3 --set parallel.expert_parallel_size=2 --set checkpoint.save_interval=3
cat "$SCRATCH/out.txt"
check "resumed to step 10" '[ $RC -eq 0 ] && [ "$(wc -l < "$SCRATCH/two/metrics.jsonl")" -eq 10 ]'
check "2 ranks (ZeRO-3, ep 2, resumed) within 1e-2 of 1 rank, bf16" \
    '$PYTHON "$CMP" "$SCRATCH/one/metrics.jsonl" "$SCRATCH/two/metrics.jsonl" 1e-2'
run_fabula 2 train --steps 10 --run-dir "$SCRATCH/offload" --set run.resume=none $SAME \
    --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
check "2 ranks, ZeRO-3 with optimizer and parameter offload, bf16: within 1e-2 of 1 rank" \
    '[ $RC -eq 0 ] && $PYTHON "$CMP" "$SCRATCH/one/metrics.jsonl" "$SCRATCH/offload/metrics.jsonl" 1e-2'
finish
