#!/bin/sh
# The global-batch load-balancing loss (model.router_aux_loss_scope
# "global_batch", docs/model.md "Losses"): the same losses, dropped
# assignments and expert token counts at 1, 2 (ZeRO 1; ZeRO 2 with overlap
# and offload) and 4 ranks (ep 2 ZeRO 3; ep 4 ZeRO 3 with offload) within
# 1e-5; bit-identical when a layout runs twice; an aux loss that differs
# from the micro-batch scope on the same run; a bad value refused.
# (The loss itself is checked against the PyTorch reference by
# validation.sh, case moe_global.)
. "$FB_SRCDIR/tests/e2e/lib.sh"

STEPS=12
train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps $STEPS --run-dir "$SCRATCH/$name" --set train_batch_size=8 \
        --set train_micro_batch_size_per_gpu=2 --set data.seq_len=64 --set model.hidden_size=64 \
        --set model.intermediate_size=128 --set model.router_aux_loss_coef=0.05 "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || { echo "--- $name failed:"; tail -n 20 "$SCRATCH/$name.out"; }
}
field() { sed -n "s/.*\"$2\": *\([-0-9.e+]*\).*/\1/p" "$SCRATCH/$1/metrics.jsonl"; }
experts() { sed -n 's/.*"expert_tokens": *\(\[\[[^"]*\]\]\).*/\1/p' "$SCRATCH/$1/metrics.jsonl"; }
same() { # A B TOL FIELD: every FIELD of B within TOL relative of A's
    field "$1" "$4" >"$SCRATCH/a.txt"; field "$2" "$4" >"$SCRATCH/b.txt"
    [ "$(wc -l <"$SCRATCH/b.txt")" -eq $STEPS ] &&
    paste "$SCRATCH/a.txt" "$SCRATCH/b.txt" | awk -v tol="$3" '
        {d = $1 - $2; if (d < 0) d = -d; if (d > tol * ($1 < 0 ? -$1 : $1)) bad = 1}
        END {exit bad}'
}
routing_same() { # A B: dropped and per-expert token counts identical at every step
    [ "$(field "$1" dropped)" = "$(field "$2" dropped)" ] && [ "$(experts "$1")" = "$(experts "$2")" ] &&
    [ -n "$(experts "$1")" ]
}

G="--set model.router_aux_loss_scope=global_batch"
train 1 g1 $G
check "global_batch, 1 rank" '[ $RC -eq 0 ]'
train 2 g2 $G --set zero_optimization.stage=1
check "global_batch, 2 ranks ZeRO 1: losses within 1e-5 of 1 rank" "same g1 g2 1e-5 loss"
check "global_batch, 2 ranks: aux loss within 1e-5" "same g1 g2 1e-5 aux_loss"
check "global_batch, 2 ranks: dropped and expert tokens identical" "routing_same g1 g2"
train 4 g4 $G --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3
check "global_batch, 4 ranks ep 2 ZeRO 3: losses within 1e-5 of 1 rank" "same g1 g4 1e-5 loss"
check "global_batch, 4 ranks ep 2: dropped and expert tokens identical" "routing_same g1 g4"
train 2 g2off $G --set zero_optimization.stage=2 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.offload_optimizer.device=cpu
check "global_batch, 2 ranks ZeRO 2, overlap, optimizer offload: losses within 1e-5, routing identical" \
    "same g1 g2off 1e-5 loss && routing_same g1 g2off"
train 4 g4ep4 $G --set parallel.expert_parallel_size=4 --set zero_optimization.stage=3 \
    --set zero_optimization.offload_param.device=cpu --set zero_optimization.offload_optimizer.device=cpu
check "global_batch, 4 ranks ep 4 ZeRO 3, parameter and optimizer offload: losses within 1e-5, routing identical" \
    "same g1 g4ep4 1e-5 loss && routing_same g1 g4ep4"
train 2 g2again $G --set zero_optimization.stage=1
check "global_batch, same layout twice: bit-identical losses" "same g2 g2again 0 loss"

train 1 m1
check "micro_batch (default), 1 rank" '[ $RC -eq 0 ]'
a1=$(field g1 aux_loss | head -n 1) m1=$(field m1 aux_loss | head -n 1)
echo "step 1 aux loss: global_batch $a1, micro_batch $m1"
check "step 1: the global-batch aux loss differs from the micro-batch one (same weights, same batch)" \
    "awk -v g=$a1 -v m=$m1 'BEGIN{d = g - m; exit !(d > 1e-4 || d < -1e-4)}'"
check "step 1: the same LM loss under both scopes (same weights, same batch)" \
    "[ \"$(field g1 lm_loss | head -n 1)\" = \"$(field m1 lm_loss | head -n 1)\" ]"

run_fabula 1 train --dry-run --set model.router_aux_loss_scope=global
check "a bad scope: exit 2 naming the key" \
    '[ $RC -eq 2 ] && grep -q "model.router_aux_loss_scope" "$SCRATCH/out.txt" && grep -q "global_batch" "$SCRATCH/out.txt"'
finish
