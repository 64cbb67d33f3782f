#!/bin/sh
# Where ZeRO keeps the model states (docs/zero.md, "Mixed precision"): for
# every stage x offload in fp32 (run.backend cpu), bf16 and fp16 (cpu16, the
# CUDA backend's storage), on 1, 2 and 4 ranks, one training step's memory
# is measured three ways that must agree: train's start-up "memory bytes:"
# line equals `plan memory` field by field and the run's peak RSS is within
# 10% of the plan plus the process baseline (memory_lib.sh); and
# zero_placement_ref.py restates the placement from the model config alone
# and, in mixed precision, DeepSpeed's count and place of each state.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/memory_lib.sh"
measure_baselines

OO="--set zero_optimization.offload_optimizer.device=cpu"
OP="--set zero_optimization.offload_param.device=cpu"

# placed NAME NP ACT_BYTES ARGS...: the three measurements agree, and the
# restatement holds
placed() {
    name=$1; np=$2; ab=$3; shift 3
    same "$name" "$np" "$@"
    check "$name: the placement and DeepSpeed's counts restated" \
        '[ $RC -eq 0 ] && "$PY" "$FB_SRCDIR/tests/e2e/zero_placement_ref.py" "$SCRATCH/$name.out" \
            "$SCRATCH/$name" "$SCRATCH/plan.json" "$np" "$ab"'
}

# setting NAME: the ZeRO arguments of one stage x offload
setting() {
    case $1 in
    z0) echo "--set zero_optimization.stage=0" ;;
    z1) echo "--set zero_optimization.stage=1" ;;
    z2) echo "--set zero_optimization.stage=2" ;;
    z3) echo "--set zero_optimization.stage=3" ;;
    z1-oo) echo "--set zero_optimization.stage=1 $OO" ;;
    z2-oo) echo "--set zero_optimization.stage=2 $OO" ;;
    z3-oo) echo "--set zero_optimization.stage=3 $OO" ;;
    z3-op) echo "--set zero_optimization.stage=3 $OP" ;;
    z3-oo-op) echo "--set zero_optimization.stage=3 $OO $OP" ;;
    esac
}
ALL="z0 z1 z2 z3 z1-oo z2-oo z3-oo z3-op z3-oo-op"
BF16="--set run.backend=cpu16"
FP16="--set run.backend=cpu16 --set fp16.enabled=true"

for np in 1 2 4; do
    # the larger model where a rank keeps whole states, the smaller where
    # ZeRO-3 gathers over several (slow on oversubscribed cores)
    for s in $ALL; do
        size=$BIG
        case $s in z3*) [ "$np" -gt 1 ] && size=$MID ;; esac
        placed "bf16-np$np-$s" "$np" 2 $size $BF16 $(setting $s)
    done
done
for s in $ALL; do
    size=$BIG
    case $s in z3*) size=$MID ;; esac
    placed "fp16-np2-$s" 2 2 $size $FP16 $(setting $s)
    placed "fp32-np2-$s" 2 4 $size $(setting $s)
done
placed "fp16-np4-z2-oo" 4 2 $BIG $FP16 $(setting z2-oo)
placed "fp32-np4-z3-oo-op" 4 4 $MID $(setting z3-oo-op)
# experts over the dp / ep ranks that hold the same ones
placed "bf16-np4-ep2-z3-oo" 4 2 $MID $BF16 --set parallel.expert_parallel_size=2 $(setting z3-oo)
placed "bf16-np4-ep2-z1" 4 2 $BIG $BF16 --set parallel.expert_parallel_size=2 $(setting z1)
finish
