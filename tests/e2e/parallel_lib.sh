# Shared by the layout-invariance tests (tp_invariance.sh, pp_invariance.sh,
# sp_invariance.sh, tp_kv_replicated.sh, mixed_parallel.sh): train one tiny
# model on a layout, compare its step records with another run's. Set
# before use: STEPS; PAR_SHAPE, the batch and sequence keys (default 8
# samples of 64 tokens, 2 a micro-batch); PAR_TIMEOUT, seconds a launch
# may take (default 180); PAR_SEQ, when every sample is that many tokens
# (compare checks it). Needs lib.sh sourced first.
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1
PAR_SHAPE=${PAR_SHAPE:-"--set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 --set data.seq_len=64"}
PAR_TIMEOUT=${PAR_TIMEOUT:-180}

# train NP NAME ARGS...: STEPS steps of the tiny model (hidden 64, FFN 128,
# clipping at 0.05, no checkpoints) into $SCRATCH/NAME, under a timeout
# (a hang fails the test); output in $SCRATCH/NAME.out, status in $RC
train() {
    np=$1; name=$2; shift 2
    # shellcheck disable=SC2086
    (cd "$FB_SRCDIR" && timeout "$PAR_TIMEOUT" $MPIEXEC -n "$np" "$FABULA" train --steps "$STEPS" \
        --run-dir "$SCRATCH/$name" --set checkpoint.save_interval=-1 --set 'run.resume="none"' $PAR_SHAPE \
        --set model.hidden_size=64 --set model.intermediate_size=128 --set gradient_clipping=0.05 "$@") \
        >"$SCRATCH/$name.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}

# compare A B [--tol T] KEY...: STEPS records each; loss, lm_loss,
# grad_norm and valid_lm_loss within T relative (1e-5 by default), the
# keys equal (layer_dropped: the per-layer drops), clipping acting on every
# step (compare_parallel.py); the worst difference printed, the first
# differences too on failure
compare() {
    a=$1; b=$2; shift 2
    "$PY" "$FB_SRCDIR/tests/e2e/compare_parallel.py" "$SCRATCH/$a/metrics.jsonl" "$SCRATCH/$b/metrics.jsonl" \
        "$STEPS" ${PAR_SEQ:+--seq "$PAR_SEQ"} "$@" >"$SCRATCH/$b.cmp"
    crc=$?
    tail -n 1 "$SCRATCH/$b.cmp"
    [ $crc -eq 0 ] || { head -n 8 "$SCRATCH/$b.cmp"; return 1; }
}
