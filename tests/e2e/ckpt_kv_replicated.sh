#!/bin/sh
# Checkpoints with kv heads replicated over tensor parallelism
# (docs/checkpoint.md, "Tensor and pipeline parallelism"; docs/parallel.md,
# "Replicated kv heads"): the checkpoint MoE with 8 heads and 2 kv heads,
# one run of 20 steps cut into three layouts, each resuming the previous
# one's checkpoint:
#   steps  1-5   4 ranks, tp 4 (each kv head on 2 ranks), ZeRO 1
#   steps  6-10  4 ranks, tp 4, ZeRO 3: every sharer reads its kv head back
#   steps 11-20  1 rank,  ZeRO 0
# Every loss equals that of one uninterrupted 1-rank run within 1e-5
# relative; the tp 4 checkpoints hold, tensor by tensor (parameters and
# both Adam moments), the 1-rank run's values of the same step within 1e-5
# and verify (`fabula ckpt verify` recomputes each tensor's checksum: a kv
# slice written by both its sharers would count twice in the stored sum).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
TP=parallel.tensor_parallel_size
CKPT_ARGS="$CKPT_ARGS --set model.num_attention_heads=8 --set model.num_key_value_heads=2 --set checkpoint.keep_last=0"
# same_as_ref DIR STEP: DIR's checkpoint of STEP holds the 1-rank run's values and verifies
same_as_ref() { same_ckpt ref "$1" "$2"; }

ctrain 1 ref --steps 20 --set checkpoint.save_interval=5
check "uninterrupted reference run (1 rank, 8 heads, 2 kv heads), checkpoints every 5 steps" \
    '[ $RC -eq 0 ] && [ -f "$(ck ref 10)" ]'
ctrain 4 chain --steps 5 --set checkpoint.save_interval=5 --set zero_optimization.stage=1 --set $TP=4
check "steps 1-5 on 4 ranks, tp 4 (2 kv heads), ZeRO 1: checkpoint of step 5" \
    '[ $RC -eq 0 ] && [ "$(clatest chain)" = 5 ]'
check "... it holds the 1-rank run's step-5 tensors and verifies" 'same_as_ref chain 5'
ctrain 4 chain --steps 10 --set checkpoint.save_interval=5 --set zero_optimization.stage=3 --set $TP=4
check "steps 6-10 on 4 ranks, tp 4, ZeRO 3: resumed at step 5" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 10 ]'
check "... its step-10 checkpoint holds the 1-rank run's tensors and verifies" 'same_as_ref chain 10'
ctrain 1 chain --steps 20 --set checkpoint.save_interval=5 --set zero_optimization.stage=0
check "steps 11-20 on 1 rank, ZeRO 0: resumed at step 10" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000010.h5 at step 10" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 20 ]'
check "the three layouts together: 20 losses, each within 1e-5 of the uninterrupted run" "cwithin ref chain 1e-5"
check "final parameters and Adam moments match the uninterrupted run's" 'same_as_ref chain 20'
finish
