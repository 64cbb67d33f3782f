#!/bin/sh
# Pipeline-parallel layouts that cannot be built, and the features pipeline
# parallelism refuses: `fabula train --dry-run` exits 2 with one message
# naming the key (docs/parallel.md). Layouts that fit pass.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PP=parallel.pipeline_parallel_size

L4="--set model.num_hidden_layers=4"

expect_refused "world 3, pp 2" $PP "world size (3 ranks)" 3 $OK --set $PP=2
expect_refused "world 4, tp 2, pp 4" $PP "world size (4 ranks) / parallel.tensor_parallel_size = 2" 4 $OK \
    --set $PP=4 --set parallel.tensor_parallel_size=2 $L4
expect_refused "pp 0" $PP "an integer from 1 to 64" 1 $OK --set $PP=0
expect_refused "pp 4 > 2 layers" $PP "at most model.num_hidden_layers = 2" 4 $OK --set $PP=4
expect_refused "world 4, pp 2, ep 4" parallel.expert_parallel_size "i.e. of 2" 4 $OK --set $PP=2 \
    --set parallel.expert_parallel_size=4
expect_refused "pipeline_layers not summing to the layers" parallel.pipeline_layers "summing to model.num_hidden_layers = 4" \
    2 $OK $L4 --set $PP=2 --set 'parallel.pipeline_layers=[2,1]'
expect_refused "pipeline_layers of 3 stages at pp 2" parallel.pipeline_layers "$PP = 2 positive integers" 2 $OK $L4 \
    --set $PP=2 --set 'parallel.pipeline_layers=[2,1,1]'
expect_refused "pipeline_layers with a 0" parallel.pipeline_layers "positive integers" 2 $OK $L4 --set $PP=2 \
    --set 'parallel.pipeline_layers=[4,0]'
expect_refused "pipeline_layers without pp" parallel.pipeline_layers "unset without pipeline parallelism" 1 $OK \
    --set 'parallel.pipeline_layers=[2]'
# checkpoints, resume and preemption work under pp (tests/e2e/ckpt_reshard_mp.sh,
# ckpt_preempt.sh): a checkpoint interval and run.resume "auto" are accepted
(cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" --set $PP=2 \
    $L4 --set checkpoint.save_interval=5 --set 'run.resume="auto"') >"$SCRATCH/out.txt" 2>&1
rc=$?
check "pp 2 with checkpoint.save_interval 5 and run.resume auto accepted" '[ $rc -eq 0 ]'
[ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
VPP=parallel.virtual_pipeline_stages
expect_refused "virtual stages 0" $VPP "an integer from 1 to 64" 2 $OK $L4 --set $PP=2 --set $VPP=0
expect_refused "virtual stages without pp" $VPP "1 without pipeline parallelism" 1 $OK $L4 --set $VPP=2
expect_refused "pp 2 x 3 virtual stages > 4 layers" $VPP "at most model.num_hidden_layers / $PP = 4 / 2" 2 $OK $L4 \
    --set $PP=2 --set $VPP=3
expect_refused "virtual stages with pipeline_layers" parallel.pipeline_layers "unset with $VPP = 2" 2 $OK $L4 \
    --set $PP=2 --set $VPP=2 --set 'parallel.pipeline_layers=[2,2]'
expect_refused "virtual stages, 3 micro-batches a step at pp 2" $VPP "gradient_accumulation_steps = 3) are not a multiple" \
    2 $OK $L4 --set $PP=2 --set $VPP=2 --set train_batch_size=6 --set train_micro_batch_size_per_gpu=2
expect_refused "pp 2, cuda" run.backend "\"cpu\" or \"cpu16\" with $PP = 2" 2 $OK --set $PP=2 --set 'run.backend="cuda"'

# Layouts that fit: the dry run accepts them, and the batch identity counts
# world / (tp pp) data-parallel ranks.
for layout in "2 2 1" "4 2 1" "4 4 1" "4 2 2"; do
    set -- $layout
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$1" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" \
        $OK $L4 --set $PP=$2 --set parallel.tensor_parallel_size=$3 \
        --set train_batch_size=$((2 * $1 / $2 / $3)) --set train_micro_batch_size_per_gpu=2) >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "world $1, pp $2, tp $3 accepted (batch 2 x $(($1 / $2 / $3)) dp ranks)" '[ $rc -eq 0 ]'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
# what pp used to refuse and now trains (tests/e2e/mixed_parallel.sh)
for extra in "bf16.enabled=true" "fp16.enabled=true" "run.backend=\"cpu16\" --set bf16.enabled=true" \
    "run.backend=\"cpu16\" --set fp16.enabled=true" "model.expert_dropout=0.1"; do
    (cd "$FB_SRCDIR" && eval timeout 60 $MPIEXEC -n 2 "\"$FABULA\"" train --dry-run --set "run.run_dir=$SCRATCH/rd" \
        $OK $L4 --set $PP=2 --set $extra) >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "pp 2 with $extra accepted" '[ $rc -eq 0 ]'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
# interleaved: pp 2 x 2 chunks of 4 layers, 4 micro-batches a step
(cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" $OK $L4 \
    --set $PP=2 --set $VPP=2 --set train_batch_size=8 --set train_micro_batch_size_per_gpu=2) >"$SCRATCH/out.txt" 2>&1
rc=$?
check "pp 2 x 2 virtual stages of 4 layers, 4 micro-batches a step, accepted" '[ $rc -eq 0 ]'
finish
