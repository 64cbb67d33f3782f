#!/bin/sh
# Tensor-parallel layouts that cannot be built, and the features tensor
# parallelism refuses: `fabula train --dry-run` exits 2 with one message
# naming the key and the numbers (docs/parallel.md). Layouts that fit pass.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TP=parallel.tensor_parallel_size


expect_refused "world 3, tp 2" $TP "world size (3 ranks)" 3 $OK --set $TP=2
expect_refused "tp 0" $TP "positive integer" 1 $OK --set $TP=0
expect_refused "3 heads, tp 2" $TP "model.num_attention_heads = 3" 2 $OK --set $TP=2 \
    --set model.hidden_size=96 --set model.num_attention_heads=3 --set model.num_key_value_heads=3
# kv heads: tp divides them, or (fewer than tp) they divide tp and are replicated
expect_refused "6 kv heads, tp 4" $TP "a divisor of model.num_key_value_heads = 6" 4 $OK --set $TP=4 \
    --set model.hidden_size=96 --set model.num_attention_heads=12 --set model.num_key_value_heads=6
expect_refused "3 kv heads, tp 4" $TP "a multiple of model.num_key_value_heads = 3" 4 $OK --set $TP=4 \
    --set model.hidden_size=96 --set model.num_attention_heads=12 --set model.num_key_value_heads=3
expect_refused "intermediate 130, tp 4" $TP "model.intermediate_size = 130" 4 $OK --set $TP=4 \
    --set model.num_key_value_heads=4 --set model.intermediate_size=130
expect_refused "world 4, tp 2, ep 4" parallel.expert_parallel_size "/ $TP = 2, i.e. of 2" 4 $OK --set $TP=2 \
    --set parallel.expert_parallel_size=4
expect_refused "autotp_size 2 against tensor_parallel_size 4" tensor_parallel.autotp_size "value of $TP (4)" 4 $OK \
    --set $TP=4 --set tensor_parallel.autotp_size=2 --set model.num_key_value_heads=4
expect_refused "autotp_size 4 on 2 ranks" tensor_parallel.autotp_size "world size (2 ranks)" 2 $OK \
    --set tensor_parallel.autotp_size=4 --set model.num_key_value_heads=4
expect_refused "vocab 274, tp 4" $TP "model.vocab_size = 274" 4 $OK --set $TP=4 --set model.num_key_value_heads=4 \
    --set model.vocab_size=274
# checkpoints, resume and preemption work under tp (tests/e2e/ckpt_reshard_mp.sh,
# ckpt_preempt.sh): a checkpoint interval and run.resume "auto" are accepted
(cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" --set $TP=2 \
    --set checkpoint.save_interval=5 --set 'run.resume="auto"') >"$SCRATCH/out.txt" 2>&1
rc=$?
check "tp 2 with checkpoint.save_interval 5 and run.resume auto accepted" '[ $rc -eq 0 ]'
[ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
# 16-bit under tp is done on the CPU backends only (tests/e2e/mixed_parallel.sh)
expect_refused "tp 2, bf16 on cuda" bf16.enabled "unless run.backend is \"cpu\" or \"cpu16\" with $TP = 2" 2 $OK \
    --set $TP=2 --set bf16.enabled=true --set 'run.backend="cuda"'
expect_refused "tp 2, fp16 on cuda" fp16.enabled "unless run.backend is \"cpu\" or \"cpu16\" with $TP = 2" 2 $OK \
    --set $TP=2 --set fp16.enabled=true --set 'run.backend="cuda"'
# the cuda backend computes in bf16 without bf16.enabled too: it was
# accepted and the run stopped on an internal assertion (16-bit device logits)
expect_refused "tp 2 on cuda, no 16-bit key" run.backend "\"cpu\" or \"cpu16\" (the cuda backend computes in 16 bits) with $TP = 2" 2 $OK \
    --set $TP=2 --set 'run.backend="cuda"'
expect_refused "sequence parallel, 1 rank" parallel.sequence_parallel "$TP = 1" 1 $OK \
    --set parallel.sequence_parallel=true
expect_refused "sequence parallel, dp 2, tp 1" parallel.sequence_parallel "it needs $TP > 1" 2 $OK \
    --set parallel.sequence_parallel=true
expect_refused "sequence parallel with bf16" parallel.sequence_parallel "false with bf16.enabled" 2 $OK --set $TP=2 \
    --set parallel.sequence_parallel=true --set bf16.enabled=true
expect_refused "sequence parallel with fp16 on cpu16" parallel.sequence_parallel "false with fp16.enabled" 2 $OK \
    --set $TP=2 --set parallel.sequence_parallel=true --set fp16.enabled=true --set 'run.backend="cpu16"'
expect_refused "sequence parallel, tp 1 given" parallel.sequence_parallel "$TP = 1" 2 $OK --set $TP=1 \
    --set parallel.sequence_parallel=true

# Layouts that fit: the dry run accepts them (DeepSpeed's autotp_size too),
# and the batch identity counts world / tp data-parallel ranks.
for layout in "2 2 1" "4 2 2" "4 4 1"; do
    set -- $layout
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$1" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" \
        $OK --set $TP=$2 --set parallel.expert_parallel_size=$3 --set model.num_key_value_heads=4 \
        --set train_batch_size=$((2 * $1 / $2)) --set train_micro_batch_size_per_gpu=2) >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "world $1, tp $2, ep $3 accepted (batch 2 x $(($1 / $2)) dp ranks)" '[ $rc -eq 0 ]'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
# fewer kv heads than tp ranks: replicated (tests/e2e/tp_kv_replicated.sh)
for layout in "4 2" "4 1" "2 1"; do
    set -- $layout
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$1" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" \
        $OK --set $TP=$1 --set model.num_key_value_heads=$2 --set train_batch_size=2 \
        --set train_micro_batch_size_per_gpu=2) >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "tp $1 with $2 kv head(s) accepted (replicated on $(($1 / $2)) ranks)" '[ $rc -eq 0 ]'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
(cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" $OK \
    --set tensor_parallel.autotp_size=2) >"$SCRATCH/out.txt" 2>&1
rc=$?
check "DeepSpeed tensor_parallel.autotp_size 2 accepted on 2 ranks" '[ $rc -eq 0 ]'
# what tp used to refuse and now trains (tests/e2e/mixed_parallel.sh)
for extra in "bf16.enabled=true" "fp16.enabled=true" "run.backend=\"cpu16\" --set bf16.enabled=true" \
    "run.backend=\"cpu16\" --set fp16.enabled=true" "model.expert_dropout=0.1"; do
    (cd "$FB_SRCDIR" && eval timeout 60 $MPIEXEC -n 2 "\"$FABULA\"" train --dry-run --set "run.run_dir=$SCRATCH/rd" \
        $OK --set $TP=2 --set $extra) >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "tp 2 with $extra accepted" '[ $rc -eq 0 ]'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
(cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" $OK \
    --set $TP=2 --set parallel.sequence_parallel=true) >"$SCRATCH/out.txt" 2>&1
rc=$?
check "sequence parallel with tp 2 accepted on 2 ranks" '[ $rc -eq 0 ]'
finish
