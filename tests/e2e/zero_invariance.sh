#!/bin/sh
# Data parallelism and ZeRO: for 20 steps of the tiny MoE with the default
# router (capacity factor 1.25, load-balancing loss 0.01, z-loss 0.001),
# 1, 2 and 4 ranks x ZeRO stages 0-3, with and without overlap and offload,
# give the losses of the single-rank run within 1e-5 relative and, step by
# step, the same tokens per expert and the same dropped assignments (in all
# and per layer): the step's micro-batches do not depend on the layout
# (docs/loader.md), and capacity and the router's losses are computed per
# micro-batch. The same layout run twice gives bit-identical losses; and each
# rank's memory matches the ZeRO formulas; data.packing "balanced" is
# layout-free as well. Every launch runs under a timeout.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh"
SAME="expert_tokens dropped layer_dropped"

# memory: NAME STAGE N -> checks the "memory bytes" line against the formulas
memory_ok() {
    line=$(grep "memory bytes" "$SCRATCH/$1.out")
    echo "$1: $line"
    echo "$line" | awk -v s="$2" -v n="$3" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        P = v["parameters"]
        p = (s == 3) ? 4 * P / n : 4 * P
        g = (s >= 2) ? 4 * P / n : 4 * P
        o = (s >= 1) ? 8 * P / n : 8 * P
        tol = 64 * n
        bad = (v["params"] - p > tol || p - v["params"] > tol) ||
              (v["grads"] - g > tol || g - v["grads"] > tol) ||
              (v["optimizer"] - o > tol || o - v["optimizer"] > tol)
        exit bad }'
}

train 1 ref --set zero_optimization.stage=0
check "reference run (1 rank, stage 0): capacity drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/ref/metrics.jsonl")" -gt 0 ]'
for np in 1 2 4; do
    for stage in 0 1 2 3; do
        name="np$np-z$stage"
        train $np $name --set zero_optimization.stage=$stage --set zero_optimization.overlap_comm=true \
            --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.allgather_bucket_size=30000
        check "$np rank(s), ZeRO $stage, overlap: losses within 1e-5 of 1 rank, same tokens per expert and drops" "[ $RC -eq 0 ] && compare ref $name 1e-5 $SAME"
        check "$np rank(s), ZeRO $stage: memory matches the formula" "memory_ok $name $stage $np"
    done
done
train 2 np2-z2-sync --set zero_optimization.stage=2 --set zero_optimization.overlap_comm=false
check "2 ranks, ZeRO 2, no overlap" "[ $RC -eq 0 ] && compare ref np2-z2-sync 1e-5 $SAME"
train 4 np4-z1-sync --set zero_optimization.stage=1 --set zero_optimization.overlap_comm=false
check "4 ranks, ZeRO 1, no overlap" "[ $RC -eq 0 ] && compare ref np4-z1-sync 1e-5 $SAME"
train 2 np2-z2-off --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
check "2 ranks, ZeRO 2, optimizer offload" "[ $RC -eq 0 ] && compare ref np2-z2-off 1e-5 $SAME"
train 4 np4-z3-off --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
check "4 ranks, ZeRO 3, optimizer and parameter offload" "[ $RC -eq 0 ] && compare ref np4-z3-off 1e-5 $SAME"
train 2 np2-z3-again --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.allgather_bucket_size=30000
check "same layout twice: bit-identical losses" "[ $RC -eq 0 ] && compare np2-z3 np2-z3-again 0 $SAME"
# data.packing "balanced" (for one or two micro-batches per rank) is layout-free too
train 1 bal-ref --set data.packing=balanced --set zero_optimization.stage=0
train 4 np4-bal --set data.packing=balanced --set zero_optimization.stage=2
check "balanced packing: 4 ranks, ZeRO 2 within 1e-5 of 1 rank" "[ $RC -eq 0 ] && compare bal-ref np4-bal 1e-5 $SAME"
finish
