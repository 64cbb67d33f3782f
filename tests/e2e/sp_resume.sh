#!/bin/sh
# Checkpoints under sequence parallelism: a tp 2 + sp run cut at step 6 and
# resumed gives the uninterrupted run's losses bit for bit and its final
# parameters and moments; its step-6 checkpoint resumes on 1 rank (no tp,
# no sp) to the same losses within 1e-5 (docs/parallel.md, "Sequence
# parallelism"; the README's feature matrix names this test).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

SP="--set parallel.tensor_parallel_size=2 --set parallel.sequence_parallel=true"
table() { "$FABULA" ckpt info "$1" | awk '/^\/(params|optimizer)/ { $NF = ""; print }'; }

ctrain 2 straight --steps 12 $SP --set checkpoint.save_interval=12
check "tp 2 + sp: 12 steps straight" '[ $RC -eq 0 ] && [ "$(clatest straight)" = 12 ]'
ctrain 2 cut --steps 6 $SP --set checkpoint.save_interval=6
ctrain 2 cut --steps 12 $SP --set checkpoint.save_interval=6
check "tp 2 + sp: resumed at step 6 and ran to 12" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000006.h5 at step 6" "$SCRATCH/cut.out" && [ "$(clatest cut)" = 12 ]'
check "tp 2 + sp: losses of steps 1-12 bit-identical to the straight run" \
    'closses straight >"$SCRATCH/a.txt" && closses cut >"$SCRATCH/b.txt" && [ "$(wc -l <"$SCRATCH/a.txt")" -eq 12 ] &&
     cmp -s "$SCRATCH/a.txt" "$SCRATCH/b.txt"'
check "tp 2 + sp: final parameters and moments bit-identical (checksums)" \
    'table "$(ck straight 12)" >"$SCRATCH/ta.txt" && table "$(ck cut 12)" >"$SCRATCH/tb.txt" && [ -s "$SCRATCH/ta.txt" ] &&
     cmp -s "$SCRATCH/ta.txt" "$SCRATCH/tb.txt"'

# the same step-6 checkpoint on 1 rank, without tp or sp
mkdir -p "$SCRATCH/one/checkpoints"
cp "$(ck cut 6)" "$SCRATCH/one/checkpoints/" && echo "step-00000006.h5" >"$SCRATCH/one/checkpoints/latest"
ctrain 1 one --steps 12
check "resharded to 1 rank: resumed at step 6" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000006.h5 at step 6" "$SCRATCH/one.out"'
check "resharded to 1 rank: steps 7-12 within 1e-5 of the tp 2 + sp run" 'cprefix straight one 1e-5'
finish
