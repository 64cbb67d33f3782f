#!/bin/sh
# The expert-parallel MoE layer against the single-rank layer
# (tests/unit/test_moe_ep: losses, logits, router statistics and every
# gradient, experts by name; the edge cases: a rank without tokens, experts
# that receive nothing, every token on two experts with and without
# capacity, more chunks than rows, ep = world size; model.recompute selective
# and full bitwise equal to none in each) on 2 and 4 ranks; the
# config errors of an expert-parallel layout that cannot be built; and a
# short training run with ep = world size and empty micro-batches. Every launch runs under a timeout: a hang
# fails the test instead of stalling make check.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST="$FB_BUILDDIR/tests/unit/test_moe_ep"

for np in 2 4; do
    timeout 180 $MPIEXEC -n $np "$TEST" >"$SCRATCH/np$np.txt" 2>&1
    rc=$?
    cat "$SCRATCH/np$np.txt"
    check "layer check on $np ranks (exit $rc)" '[ $rc -eq 0 ] && grep -q "^PASS" "$SCRATCH/np$np.txt"'
done

# expect_usage NAME NEEDLE NP ARGS...: `fabula train --dry-run` exits 2 with
# one message holding NEEDLE
expect_usage() {
    name=$1; needle=$2; np=$3; shift 3
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$np" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" "$@") \
        >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
    rc=$?
    check "$name: exit 2, one message with '$needle'" \
        '[ $rc -eq 2 ] && grep -qF -- "$needle" "$SCRATCH/err.txt" && [ "$(grep -c "fabula: error:" "$SCRATCH/err.txt")" -eq 1 ]'
    [ $rc -eq 2 ] || sed 's/^/  | /' "$SCRATCH/err.txt"
}
expect_usage "3 experts, ep 2" "expected a divisor of model.num_local_experts = 3" 2 \
    --set parallel.expert_parallel_size=2 --set model.num_local_experts=3
expect_usage "6 experts, ep 4 (world 4)" "expected a divisor of model.num_local_experts = 6" 4 \
    --set parallel.expert_parallel_size=4 --set model.num_local_experts=6
expect_usage "moe_a2a_chunks 0" "parallel.moe_a2a_chunks" 1 --set parallel.moe_a2a_chunks=0

# Each rank's 3 samples (<= 64 tokens) fit one micro-batch of 256 tokens, so
# micro-batches 2 and 3 of every step are empty: the ranks still run the MoE
# exchanges (with nothing to send) inside the ZeRO-3 block sequence
(cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n 2 "$FABULA" train --steps 6 --run-dir "$SCRATCH/sparse" \
    --set checkpoint.save_interval=-1 \
    --set train_batch_size=6 --set train_micro_batch_size_per_gpu=1 --set gradient_accumulation_steps=3 \
    --set data.seq_len=64 --set data.max_tokens_per_batch=256 --set model.hidden_size=32 \
    --set model.intermediate_size=64 \
    --set parallel.expert_parallel_size=2 --set parallel.moe_a2a_chunks=2 --set zero_optimization.stage=3) \
    >"$SCRATCH/sparse.txt" 2>&1
rc=$?
check "training, ep = world = 2, ZeRO 3, empty micro-batches: finishes (exit $rc)" \
    '[ $rc -eq 0 ] && [ "$(wc -l < "$SCRATCH/sparse/metrics.jsonl")" -eq 6 ]'
[ $rc -eq 0 ] || tail -n 20 "$SCRATCH/sparse.txt"
finish
