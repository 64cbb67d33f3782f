#!/bin/sh
# Resharding: one run of 20 steps cut into four layouts, each resuming from
# the previous one's checkpoint with no conversion step:
#   steps  1-5   4 ranks, ep 2, ZeRO 3
#   steps  6-10  2 ranks, ep 1, ZeRO 1
#   steps 11-15  4 ranks, ep 4, ZeRO 2
#   steps 16-20  1 rank,  ZeRO 0
# With the default router (capacity 1.25, load-balancing and z losses on)
# the step's micro-batches, and so the tokens each expert keeps, do not
# depend on the layout, and the data position in a checkpoint (the sampler
# and the deferred samples) does not either (docs/loader.md): every loss must
# equal that of one uninterrupted 1-rank run within 1e-5 relative, with the
# same tokens per expert and dropped assignments at every step, and the
# final parameters and moments must match it closely. Expert parallelism is tested only when this build trains with
# parallel.expert_parallel_size > 1; otherwise those legs run with ep 1.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh" # compare

ctrain 1 ref --steps 20
check "uninterrupted reference run (1 rank)" '[ $RC -eq 0 ]'

# does this build train with expert parallelism?
ctrain 2 epprobe --steps 1 --set parallel.expert_parallel_size=2 --set checkpoint.save_interval=-1
if [ $RC -eq 0 ]; then EP2=2; EP4=4; else EP2=1; EP4=1; echo "note: expert parallelism does not train here; ep legs use ep 1"; fi

ctrain 4 chain --steps 5 --set zero_optimization.stage=3 --set parallel.expert_parallel_size=$EP2
check "steps 1-5 on 4 ranks, ep $EP2, ZeRO 3: checkpoint of step 5" '[ $RC -eq 0 ] && [ "$(clatest chain)" = 5 ]'
ctrain 2 chain --steps 10 --set zero_optimization.stage=1
check "steps 6-10 on 2 ranks, ep 1, ZeRO 1: resumed at step 5" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 10 ]'
ctrain 4 chain --steps 15 --set zero_optimization.stage=2 --set parallel.expert_parallel_size=$EP4
check "steps 11-15 on 4 ranks, ep $EP4, ZeRO 2: resumed at step 10" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000010.h5 at step 10" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 15 ]'
ctrain 1 chain --steps 20 --set zero_optimization.stage=0
check "steps 16-20 on 1 rank, ZeRO 0: resumed at step 15" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000015.h5 at step 15" "$SCRATCH/chain.out" && [ "$(clatest chain)" = 20 ]'

check "the four layouts together: 20 losses, each within 1e-5 of the uninterrupted run" "cwithin ref chain 1e-5"
check "the same tokens per expert and dropped assignments as the uninterrupted run, step by step" \
    '[ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/ref/metrics.jsonl")" -gt 0 ] && compare ref chain 1e-5 expert_tokens dropped layer_dropped'
check "final parameters and Adam moments match the uninterrupted run's" \
    '"$CKPT_TOOL" compare "$SCRATCH/ref/checkpoints/step-00000020.h5" "$SCRATCH/chain/checkpoints/step-00000020.h5" 1e-5'
check "the resharded checkpoints verify" \
    'for s in 10 15 20; do "$FABULA" ckpt verify -q "$SCRATCH/chain/checkpoints/step-000000$s.h5" || exit 1; done'
check "checkpoint.keep_last 3: steps 10, 15, 20 kept, step 5 removed" \
    '[ "$(ls "$SCRATCH/chain/checkpoints" | tr "\n" " ")" = "latest step-00000010.h5 step-00000015.h5 step-00000020.h5 " ]'
finish
