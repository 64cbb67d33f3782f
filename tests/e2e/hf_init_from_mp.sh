#!/bin/sh
# model.init_from under tensor and pipeline parallelism (docs/init-from.md):
# each rank reads only its slice of each imported tensor (tp: row blocks of
# q/k/v, gate/up and the vocabulary, column blocks of o and down, one read
# per row) or its stage's layers (pp), from tiny models transformers itself
# makes and saves (tests/e2e/hf_import_ref.py; skipped without $HF_PYTHON):
#  - Llama (tied, bf16 file, 320 rows) at tp 2, Mixtral (sharded files,
#    untied, the vocabulary grown from 300 to 313 rows) at pp 2: one step at
#    lr 0 leaves the imported weights, and the checkpoint it writes gives
#    transformers' logits within 1e-5 (`eval --checkpoint --logits-out` on
#    1 rank: the saved config's tp / pp split is the training's layout, not
#    the evaluation's);
#  - 10 steps at tp 2 / pp 2: the losses of 1 rank within 1e-5;
#  - a grown vocabulary tp does not divide (Llama: 313 rows, tp 2): exit 2
#    naming parallel.tensor_parallel_size.
. "$FB_SRCDIR/tests/e2e/lib.sh"
[ -n "${HF_PYTHON:-}" ] || { echo "HF_PYTHON is empty (configure found no transformers): skipped"; exit 77; }
cd "$SCRATCH" || exit 99
HP="$HF_PYTHON"
REF="$FB_SRCDIR/tests/e2e/hf_import_ref.py"
IDS=5,17,250,3,99,120,7,0,299,42,11,64,1,2,3
"$HP" "$REF" make m >make.out 2>&1 || { cat make.out; exit 99; }
"$FABULA" prep -q -t m/tokenizer.json --max-seq-len 64 --overlap 8 --min-seq-len 16 -o corpus.h5 \
    "$FB_SRCDIR/inputs/sample.jsonl" >prep.out 2>&1 || { cat prep.out; exit 99; }
export OMP_NUM_THREADS=1

. "$FB_SRCDIR/tests/e2e/hf_lib.sh"

for case in "llama_tied_bf16 320 tp parallel.tensor_parallel_size=2" \
            "mixtral_sharded 313 pp parallel.pipeline_parallel_size=2"; do
    set -- $case
    n=$1; V=$2; lay=$3; set=$4
    train 2 "s0_$n" "$n" 1 --set "$set" --set checkpoint.save_interval=0 --set scheduler.params.warmup_min_lr=0
    check "$n: 1 step at $lay 2 at lr 0 (exit $RC)" '[ $RC -eq 0 ] && grep -q "^step 1/1 .*lr 0.000e+00" "s0_$n.out"'
    "$FABULA" eval --checkpoint "s0_$n/checkpoints/step-00000001.h5" --tokens "$IDS" --logits-out "c_$n.npy" \
        >"ce_$n.out" 2>&1
    RC=$?
    "$HP" "$REF" logits "m/$n" "$IDS" "hv_$n.npy" "$V" >/dev/null 2>&1
    check "$n: the checkpoint of that $lay 2 import gives transformers' logits [T, $V] (exit $RC)" \
        '[ $RC -eq 0 ] && "$HP" "$REF" compare "c_$n.npy" "hv_$n.npy" 1e-5'
    train 1 "t1_$n" "$n" 10
    check "$n: 10 steps at 1 rank (exit $RC)" '[ $RC -eq 0 ]'
    train 2 "t2_$n" "$n" 10 --set "$set"
    check "$n: 10 steps at $lay 2: the losses of 1 rank within 1e-5" '[ $RC -eq 0 ] && same_losses "t1_$n" "t2_$n"'
done

train 2 grow_tp llama 1 --set parallel.tensor_parallel_size=2
check "llama at tp 2: the vocabulary grown to 313 rows is refused, exit 2 naming tp (got $RC)" \
    '[ $RC -eq 2 ] && grep -q "from 300 to 313 rows, not a multiple of parallel.tensor_parallel_size = 2" grow_tp.out'
finish
