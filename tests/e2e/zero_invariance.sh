#!/bin/sh
# Data parallelism and ZeRO: for 20 steps of the tiny MoE, 1, 2 and 4 ranks x
# ZeRO stages 0-3, with and without overlap and offload, give the losses of
# the single-rank run within 1e-5 relative; the same layout run twice gives
# bit-identical losses; and each rank's memory matches the ZeRO formulas.
# The balancer (lpt) groups samples differently for each rank count, and
# capacity and the load-balancing loss are per-micro-batch statistics, so the
# model here is dropless and the aux coefficient 0 (docs/zero.md).
. "$FB_SRCDIR/tests/e2e/lib.sh"

STEPS=20
losses() { sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$1/metrics.jsonl"; }
train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps $STEPS --run-dir "$SCRATCH/$name" --set train_batch_size=8 \
        --set train_micro_batch_size_per_gpu=2 --set model.capacity_factor=0 --set model.router_aux_loss_coef=0 \
        --set data.seq_len=64 --set model.hidden_size=64 --set model.intermediate_size=128 "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || { echo "--- $name failed:"; tail -n 20 "$SCRATCH/$name.out"; }
}
same() { # A B TOL: every loss of B within TOL relative of A's
    losses "$SCRATCH/$1" > "$SCRATCH/a.txt"; losses "$SCRATCH/$2" > "$SCRATCH/b.txt"
    [ "$(wc -l < "$SCRATCH/b.txt")" -eq $STEPS ] &&
    paste "$SCRATCH/a.txt" "$SCRATCH/b.txt" | awk -v tol="$3" '
        {d = $1 - $2; if (d < 0) d = -d; if (d > tol * ($1 < 0 ? -$1 : $1)) bad = 1}
        END {exit bad}'
}
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
check "reference run (1 rank, stage 0)" '[ $RC -eq 0 ]'
for np in 1 2 4; do
    for stage in 0 1 2 3; do
        name="np$np-z$stage"
        train $np $name --set zero_optimization.stage=$stage --set zero_optimization.overlap_comm=true \
            --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.allgather_bucket_size=30000
        check "$np rank(s), ZeRO $stage, overlap: losses within 1e-5 of 1 rank" "same ref $name 1e-5"
        check "$np rank(s), ZeRO $stage: memory matches the formula" "memory_ok $name $stage $np"
    done
done
train 2 np2-z2-sync --set zero_optimization.stage=2 --set zero_optimization.overlap_comm=false
check "2 ranks, ZeRO 2, no overlap" "same ref np2-z2-sync 1e-5"
train 4 np4-z1-sync --set zero_optimization.stage=1 --set zero_optimization.overlap_comm=false
check "4 ranks, ZeRO 1, no overlap" "same ref np4-z1-sync 1e-5"
train 2 np2-z2-off --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
check "2 ranks, ZeRO 2, optimizer offload" "same ref np2-z2-off 1e-5"
train 4 np4-z3-off --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
check "4 ranks, ZeRO 3, optimizer and parameter offload" "same ref np4-z3-off 1e-5"
train 2 np2-z3-again --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.allgather_bucket_size=30000
check "same layout twice: bit-identical losses" "same np2-z3 np2-z3-again 0"
finish
