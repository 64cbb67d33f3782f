#!/bin/sh
# Expert parallelism with the token exchange split into chunks
# (parallel.moe_a2a_chunks: the all-to-all of one chunk overlaps the expert
# compute of another): ep = 2 and 4 on 4 ranks, each ZeRO stage, and with
# optimizer and parameter offload, give the losses and tokens per expert of
# the single-rank run (dropless, aux 0: docs/zero.md); the same layout run
# twice gives bit-identical losses. Every launch runs under a timeout.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh"

train 1 ref $DROPLESS
check "reference run (1 rank, dropless)" '[ $RC -eq 0 ]'
for ep in 2 4; do
    for stage in 0 1 2 3; do
        name="ep$ep-z$stage-c3"
        train 4 $name $DROPLESS --set parallel.expert_parallel_size=$ep --set parallel.moe_a2a_chunks=3 \
            --set zero_optimization.stage=$stage --set zero_optimization.overlap_comm=true
        check "4 ranks, ep $ep, ZeRO $stage, 3 chunks: losses within 1e-5 of 1 rank, same tokens per expert" \
            "[ $RC -eq 0 ] && compare ref $name 1e-5 expert_tokens"
    done
done
train 4 ep2-z2-off $DROPLESS --set parallel.expert_parallel_size=2 --set parallel.moe_a2a_chunks=2 \
    --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
check "ep 2, ZeRO 2, optimizer offload, 2 chunks" "[ $RC -eq 0 ] && compare ref ep2-z2-off 1e-5 expert_tokens"
train 4 ep4-z3-off $DROPLESS --set parallel.expert_parallel_size=4 --set parallel.moe_a2a_chunks=2 \
    --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
check "ep 4, ZeRO 3, optimizer and parameter offload, 2 chunks" "[ $RC -eq 0 ] && compare ref ep4-z3-off 1e-5 expert_tokens"
train 4 ep4-z3-c3-again $DROPLESS --set parallel.expert_parallel_size=4 --set parallel.moe_a2a_chunks=3 \
    --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=true
check "same layout twice: bit-identical losses" "[ $RC -eq 0 ] && compare ep4-z3-c3 ep4-z3-c3-again 0 expert_tokens"
finish
