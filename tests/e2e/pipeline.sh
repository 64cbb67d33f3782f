#!/bin/sh
# The quick-start pipeline (what `make run` does), shortened: a BPE tokenizer
# trained on the bundled corpus, the corpus prepared into HDF5 with it, and
# the default model trained on that corpus on 2 ranks; the loss falls. Then
# the train-time tokenizer check: the same corpus with another tokenizer is
# refused (exit 3); a missing corpus (4), one that is not HDF5 (3) and a missing
# tokenizer (4) are one message each at 2 ranks, with no MPI_Abort notice.
. "$FB_SRCDIR/tests/e2e/lib.sh"

run_fabula 2 tokenizer train --input inputs/sample.jsonl --vocab-size 1024 --output "$SCRATCH/tok.json"
check "tokenizer train on 2 ranks" '[ $RC -eq 0 ] && [ -s "$SCRATCH/tok.json" ]'
run_fabula 2 prep --tokenizer "$SCRATCH/tok.json" --output "$SCRATCH/sample.h5" --max-seq-len 128 \
    --overlap 16 --min-seq-len 16 inputs/sample.jsonl
check "prep on 2 ranks" '[ $RC -eq 0 ] && [ -s "$SCRATCH/sample.h5" ]'
run_fabula 2 train inputs/quickstart.json --set data.corpus="$SCRATCH/sample.h5" \
    --set data.tokenizer="$SCRATCH/tok.json" --run-dir "$SCRATCH/run" --steps 40
cat "$SCRATCH/out.txt" | grep -E "^step|data:|error" 
check "train on the prepared corpus" '[ $RC -eq 0 ] && grep -q "sample.h5" "$SCRATCH/out.txt"'
first=$(sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$SCRATCH/run/metrics.jsonl" | head -n 1)
last=$(sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$SCRATCH/run/metrics.jsonl" | tail -n 1)
echo "loss: first $first, last $last"
check "loss falls by at least 1 nat" "awk -v a=$first -v b=$last 'BEGIN{exit !(a - b > 1.0)}'"
run_fabula 1 train inputs/quickstart.json --set data.corpus="$SCRATCH/sample.h5" \
    --set data.tokenizer=bytes --set model.vocab_size=1024 --run-dir "$SCRATCH/wrong" --steps 2
check "a corpus from another tokenizer is refused with exit 3" \
    '[ $RC -eq 3 ] && grep -q "another tokenizer" "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/wrong" ]'
for bad in "data.corpus=$SCRATCH/missing.h5|data.corpus = .*missing.h5.: No such file or directory|4" \
    "data.corpus=$FB_SRCDIR/inputs/sample.jsonl|cannot open corpus .*sample.jsonl: not an HDF5 file|3" \
    "data.tokenizer=$SCRATCH/missing.json|data.tokenizer = .*missing.json.: No such file or directory|4"; do
    set=${bad%%|*} rest=${bad#*|}
    pattern=${rest%|*} code=${rest##*|}
    run_fabula 2 train inputs/quickstart.json --set data.corpus="$SCRATCH/sample.h5" \
        --set data.tokenizer="$SCRATCH/tok.json" --set "$set" --run-dir "$SCRATCH/bad" --steps 2
    grep -E "error|Abort" "$SCRATCH/out.txt"
    check "${set%%=*} refused: exit $code, one message, no Abort notice" \
        '[ $RC -eq $code ] && [ "$(grep -c "error: $pattern" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q Abort "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/bad" ]'
done
finish
