#!/bin/sh
# Checkpoints under tensor and pipeline parallelism (docs/checkpoint.md,
# "Tensor and pipeline parallelism"): one run of 20 steps of a 2-layer MoE
# cut into four layouts, each resuming the previous one's checkpoint:
#   steps  1-5   4 ranks, tp 2 x pp 2, ZeRO 1
#   steps  6-10  2 ranks, dp 2, ZeRO 3
#   steps 11-15  4 ranks, ep 2 x tp 2 (dp 2), ZeRO 2
#   steps 16-20  1 rank,  ZeRO 0
# Every loss equals that of one uninterrupted 1-rank run within 1e-5
# relative, and each leg's checkpoint holds, tensor by tensor (parameters
# and both Adam moments), the values of the 1-rank run's checkpoint of the
# same step within 1e-5 (ckpt_tool compare: plain HDF5 reads of whole
# tensors) and verifies (`fabula ckpt verify` recomputes each whole tensor's
# checksum serially: the sum the slices' writers combined must be it).
# Also dp 2 x tp 2 with ZeRO 3 (shard boundaries inside the tp slices) and
# pp 2 alone: their step-5 checkpoints are the 1-rank run's, and a pp 2 run
# with every transfer collective (checkpoint.collective "all") resumes the
# tp one's checkpoint and continues its losses.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
TP=parallel.tensor_parallel_size
PP=parallel.pipeline_parallel_size
# two layers, so that pp 2 has a layer a stage; every checkpoint kept
CKPT_ARGS="$CKPT_ARGS --set model.num_hidden_layers=2 --set checkpoint.keep_last=0"
# same_as_ref DIR STEP: DIR's checkpoint of STEP holds the 1-rank run's values and verifies
same_as_ref() { same_ckpt ref "$1" "$2"; }

ctrain 1 ref --steps 20 --set checkpoint.save_interval=5
check "uninterrupted reference run (1 rank), checkpoints every 5 steps" '[ $RC -eq 0 ] && [ -f "$(ck ref 15)" ]'

ctrain 4 chain --steps 5 --set zero_optimization.stage=1 --set $TP=2 --set $PP=2
check "steps 1-5 on 4 ranks, tp 2 x pp 2, ZeRO 1: checkpoint of step 5" '[ $RC -eq 0 ] && [ "$(clatest chain)" = 5 ]'
check "... it holds the 1-rank run's step-5 tensors and verifies" 'same_as_ref chain 5'
ctrain 2 chain --steps 10 --set zero_optimization.stage=3
check "steps 6-10 on 2 ranks, dp 2, ZeRO 3: resumed at step 5" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 10 ]'
check "... its step-10 checkpoint holds the 1-rank run's tensors" 'same_as_ref chain 10'
ctrain 4 chain --steps 15 --set zero_optimization.stage=2 --set $TP=2 --set parallel.expert_parallel_size=2
check "steps 11-15 on 4 ranks, ep 2 x tp 2, ZeRO 2: resumed at step 10" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000010.h5 at step 10" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 15 ]'
check "... its step-15 checkpoint holds the 1-rank run's tensors and verifies" 'same_as_ref chain 15'
ctrain 1 chain --steps 20 --set zero_optimization.stage=0
check "steps 16-20 on 1 rank, ZeRO 0: resumed at step 15" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000015.h5 at step 15" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 20 ]'
check "the four layouts together: 20 losses, each within 1e-5 of the uninterrupted run" "cwithin ref chain 1e-5"
check "final parameters and Adam moments match the uninterrupted run's" 'same_as_ref chain 20'
check "the tp x pp run recorded its layout" \
    '"$FABULA" ckpt info "$(ck chain 5)" | grep -q "^layout       4 rank(s): dp 1, ep 1, edp 1, tp 2, pp 2; ZeRO stage 1"'

ctrain 4 tp2 --steps 5 --set checkpoint.save_interval=5 --set $TP=2 --set zero_optimization.stage=3
check "dp 2 x tp 2, ZeRO 3 (4 ranks): its step-5 checkpoint holds the 1-rank run's tensors and verifies" \
    '[ $RC -eq 0 ] && same_as_ref tp2 5'
ctrain 2 pp2 --steps 5 --set checkpoint.save_interval=5 --set $PP=2
check "pp 2 alone (2 ranks): its step-5 checkpoint holds the 1-rank run's tensors and verifies" \
    '[ $RC -eq 0 ] && same_as_ref pp2 5'
ctrain 2 tp2 --steps 10 --set checkpoint.save_interval=5 --set $PP=2 --set 'checkpoint.collective="all"'
check "pp 2 resumes the dp 2 x tp 2 checkpoint: steps 1-10 within 1e-5 of the uninterrupted run" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/tp2.out" &&
     [ "$(closses tp2 | wc -l)" -eq 10 ] && cprefix ref tp2 1e-5 && same_as_ref tp2 10'
finish
