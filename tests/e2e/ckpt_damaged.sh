#!/bin/sh
# Damaged checkpoints are found, named and skipped, never loaded: a flipped
# tensor byte and a truncated file fail `fabula ckpt verify` (exit 3, naming
# the tensor); resume "auto" warns and falls back to the previous checkpoint
# by step number (the skipped one renamed *.damaged), and continues exactly
# as the original run did; every checkpoint damaged: exit 3; an explicit
# damaged file: exit 3 (also on 1 rank with 2 threads, the direct-read
# path); `latest` naming a missing file: a warning and the newest
# checkpoint, or step 0 when there is none.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

# offset of a dataset's data in the file (last column of `ckpt info`)
offset() { "$FABULA" ckpt info "$1" | awk -v d="$2" '$1 == d { print $NF }'; }
# overwrites 8 bytes of dataset $2's data in file $1
flip() { off=$(offset "$1" "$2"); [ -n "$off" ] &&
    printf 'XXXXXXXX' | dd of="$1" bs=1 seek=$((off + 64)) conv=notrunc 2>/dev/null; }

ctrain 2 orig --steps 6 --set checkpoint.save_interval=2
check "original run: checkpoints at 2, 4, 6" '[ $RC -eq 0 ] && [ "$(clatest orig)" = 6 ] && [ -f "$(ck orig 2)" ]'
"$FABULA" ckpt info "$(ck orig 6)" >"$SCRATCH/info.txt"; RC=$?
check "ckpt info: metadata and a table of 3 x 22 tensors" \
    '[ $RC -eq 0 ] && grep -q "^progress     step 6 " "$SCRATCH/info.txt" && grep -q "^layout       2 rank(s): dp 2" "$SCRATCH/info.txt" &&
     [ "$(grep -c "^/params/\|^/optimizer/m/\|^/optimizer/v/" "$SCRATCH/info.txt")" -eq 66 ] &&
     grep -q "^/params/model.embed_tokens.weight  *\[272, 64\]  *0x[0-9a-f]\{16\} " "$SCRATCH/info.txt"'

"$FABULA" ckpt verify "$(ck orig 6)" >"$SCRATCH/verify.txt"; RC=$?
check "ckpt verify of a good file: exit 0, each of the 66 tensors ok" \
    '[ $RC -eq 0 ] && [ "$(grep -c "^ok  *[/]" "$SCRATCH/verify.txt")" -eq 66 ] && grep -q ": ok: 66 tensors" "$SCRATCH/verify.txt"'

# --- a flipped byte in one tensor of the newest checkpoint
cp -r "$SCRATCH/orig" "$SCRATCH/flip"
DS=/optimizer/v/model.layers.0.self_attn.k_proj.weight
flip "$(ck flip 6)" $DS
"$FABULA" ckpt verify -q "$(ck flip 6)" >"$SCRATCH/v.txt"; RC=$?
check "ckpt verify: exit 3, names the damaged tensor (and only it)" \
    '[ $RC -eq 3 ] && grep -q "^DAMAGED $DS: checksum" "$SCRATCH/v.txt" && [ "$(grep -c "^DAMAGED /" "$SCRATCH/v.txt")" -eq 1 ]'
ctrain 2 flip --steps 6 --set checkpoint.save_interval=2
check "resume auto: warns naming the tensor, falls back to step 4" \
    '[ $RC -eq 0 ] && grep -q "warning: checkpoint: .*step-00000006.h5 is damaged (tensor $DS: checksum" "$SCRATCH/flip.out" &&
     grep -q "resumed from .*step-00000004.h5 at step 4" "$SCRATCH/flip.out"'
check "the damaged file is set aside as step-00000006.h5.damaged, a new step 6 written" \
    '[ -f "$(ck flip 6).damaged" ] && [ "$(clatest flip)" = 6 ] && "$FABULA" ckpt verify -q "$(ck flip 6)" >/dev/null'
check "steps 5-6 redone bit-identically" \
    'closses orig >"$SCRATCH/a.txt" && closses flip >"$SCRATCH/b.txt" && [ "$(wc -l <"$SCRATCH/b.txt")" -eq 6 ] &&
     cmp -s "$SCRATCH/a.txt" "$SCRATCH/b.txt"'

# --- a truncated checkpoint
cp -r "$SCRATCH/orig" "$SCRATCH/trunc"
size=$(wc -c <"$(ck trunc 6)")
truncate -s $((size / 2)) "$(ck trunc 6)"
"$FABULA" ckpt verify "$(ck trunc 6)" >"$SCRATCH/v.txt"; RC=$?
check "ckpt verify of a truncated file: exit 3" '[ $RC -eq 3 ] && grep -q "DAMAGED" "$SCRATCH/v.txt"'
ctrain 2 trunc --steps 6 --set checkpoint.save_interval=2
check "resume auto past a truncated file: warning, step 4" \
    '[ $RC -eq 0 ] && grep -q "step-00000006.h5 is damaged (HDF5 cannot open it" "$SCRATCH/trunc.out" &&
     grep -q "resumed from .*step-00000004.h5 at step 4" "$SCRATCH/trunc.out"'

# --- an explicit damaged file: no fallback
ctrain 2 explicit --steps 8 --set "run.resume=$(ck flip 6).damaged"
check "run.resume = a damaged file: exit 3 naming the tensor" \
    '[ $RC -eq 3 ] && grep -q "the checkpoint is damaged: tensor $DS" "$SCRATCH/explicit.out"'

# --- the same on 1 rank with 2 threads: every tensor is then read by
# pread in tasks both threads run, each checksumming what it read
# (docs/checkpoint.md, "How a load reads"); ctrain runs 1 thread
t2train() {
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=2 timeout 300 $MPIEXEC -n 1 "$FABULA" train --run-dir "$SCRATCH/$1" \
        $CKPT_ARGS --steps 8 --set "run.resume=$2") >"$SCRATCH/$1.out" 2>&1
    RC=$?
}
t2train direct-bad "$(ck flip 6).damaged"
check "1 rank, 2 threads, direct reads: a damaged file is exit 3 naming the tensor" \
    '[ $RC -eq 3 ] && grep -q "the checkpoint is damaged: tensor $DS" "$SCRATCH/direct-bad.out"'
t2train direct-good "$(ck orig 6)"
check "1 rank, 2 threads, direct reads: the good file resumes at step 6" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000006.h5 at step 6" "$SCRATCH/direct-good.out"'

# --- every checkpoint damaged: stop, touch nothing
cp -r "$SCRATCH/orig" "$SCRATCH/all"
for s in 2 4 6; do flip "$(ck all $s)" /params/model.norm.weight; done
ctrain 2 all --steps 8
check "all checkpoints damaged: exit 3, files left as they are" \
    '[ $RC -eq 3 ] && grep -q "no usable checkpoint in .*all 3 are damaged" "$SCRATCH/all.out" &&
     [ "$(ls "$SCRATCH/all/checkpoints" | tr "\n" " ")" = "latest step-00000002.h5 step-00000004.h5 step-00000006.h5 " ]'

# --- `latest` naming a file that is gone
cp -r "$SCRATCH/orig" "$SCRATCH/gone"
rm "$(ck gone 6)"
ctrain 2 gone --steps 6
check "latest names a missing file: warning, resumes from the newest (step 4)" \
    '[ $RC -eq 0 ] && grep -q "warning: checkpoint: .*latest names .step-00000006.h5., which is not a checkpoint" "$SCRATCH/gone.out" &&
     grep -q "resumed from .*step-00000004.h5 at step 4" "$SCRATCH/gone.out"'
mkdir -p "$SCRATCH/empty/checkpoints"
echo step-00000009.h5 >"$SCRATCH/empty/checkpoints/latest"
ctrain 1 empty --steps 2
check "latest names a missing file and no checkpoint is left: warning, step 0, exit 0" \
    '[ $RC -eq 0 ] && grep -q "there is none: starting from step 0" "$SCRATCH/empty.out" && [ "$(clatest empty)" = 2 ]'

# --- a save that never finished leaves a temporary file: removed at start
cp -r "$SCRATCH/orig" "$SCRATCH/tmp"
cp "$(ck tmp 6)" "$SCRATCH/tmp/checkpoints/.step-00000008.h5.tmp"
ctrain 1 tmp --steps 6
check "a temporary file of an unfinished save is removed at the next start" \
    '[ $RC -eq 0 ] && [ ! -e "$SCRATCH/tmp/checkpoints/.step-00000008.h5.tmp" ] && grep -q "did not finish" "$SCRATCH/tmp.out"'
finish
