#!/bin/sh
# Checkpoints that do not fit the run, and saves that cannot complete:
# another model (other shapes, more layers, a tensor this model lacks),
# other data, a newer format version: exit 3 naming what differs; a full
# disk during a save (a small tmpfs when this user may mount one, and a
# file-size limit): exit 4 with a clear message, no temporary file left,
# the earlier checkpoints intact and `latest` unchanged.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

ctrain 2 orig --steps 2
check "a checkpoint to resume from" '[ $RC -eq 0 ] && [ "$(clatest orig)" = 2 ]'
resume() { ctrain 2 "$@" --steps 3 --set "run.resume=$(ck orig 2)"; }

resume shape --set model.intermediate_size=96
check "other shapes: exit 3 naming the tensor and both shapes" '[ $RC -eq 3 ] && grep -q "tensor /params/model.layers.0.block_sparse_moe.experts.0.w1.weight has shape \[128, 64\], this model.s is \[96, 64\]" "$SCRATCH/shape.out"'
resume layers --set model.num_hidden_layers=2
check "more layers: exit 3 naming the first missing tensor" \
    '[ $RC -eq 3 ] && grep -q "has no tensor /params/model.layers.1.input_layernorm.weight" "$SCRATCH/layers.out"'
resume tied --set model.tie_word_embeddings=true
check "a tensor this model lacks: exit 3 naming it" \
    '[ $RC -eq 3 ] && grep -q "tensor /params/lm_head.weight is not part of this model" "$SCRATCH/tied.out"'
resume data --set data.min_seq_len=32
check "other data: exit 3, the corpus sizes named" \
    '[ $RC -eq 3 ] && grep -q "does not fit this run.s data: the data position refers to a corpus of 10102 samples" "$SCRATCH/data.out"'
cp "$(ck orig 2)" "$SCRATCH/newer.h5"
"$CKPT_TOOL" set-i64 "$SCRATCH/newer.h5" format_version 2
ctrain 2 newer --steps 3 --set "run.resume=$SCRATCH/newer.h5"
check "a newer format version: exit 3" \
    '[ $RC -eq 3 ] && grep -q "format version 2 is newer than this fabula reads (version 1)" "$SCRATCH/newer.out"'
"$FABULA" ckpt verify "$SCRATCH/newer.h5" >"$SCRATCH/v.txt"; RC=$?
check "ckpt verify of a newer version: exit 3" '[ $RC -eq 3 ]'
mkdir -p "$SCRATCH/auto/checkpoints" && cp "$SCRATCH/newer.h5" "$SCRATCH/auto/checkpoints/step-00000002.h5"
ctrain 2 auto --steps 3
check "a newer version found by resume auto: exit 3 too (not skipped as damaged)" \
    '[ $RC -eq 3 ] && grep -q "format version 2 is newer" "$SCRATCH/auto.out"'

# --- full disk. after_full DIR: exit 4, message, nothing left, earlier intact
after_full() {
    [ $RC -eq 4 ] && grep -q "error: checkpoint .*step-00000003.h5: .* failed (disk full" "$SCRATCH/$1.out" &&
    [ -z "$(ls -A "$2/checkpoints" | grep -v '^latest$\|^step-0000000[12].h5$')" ] &&
    [ "$(sed -n 1p "$2/checkpoints/latest")" = step-00000002.h5 ] &&
    "$FABULA" ckpt verify -q "$2/checkpoints/step-00000001.h5" >/dev/null &&
    "$FABULA" ckpt verify -q "$2/checkpoints/step-00000002.h5" >/dev/null
}
FS="$SCRATCH/tmpfs"
mkdir -p "$FS"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=5m tmpfs "$FS" 2>/dev/null; then
    trap 'umount "$FS" 2>/dev/null' EXIT
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n 2 "$FABULA" train --run-dir "$FS/run" $CKPT_ARGS \
        --steps 2 --set checkpoint.save_interval=1) >"$SCRATCH/fs1.out" 2>&1
    check "tmpfs of 5 MB: two checkpoints fit" '[ $? -eq 0 ] && [ -f "$FS/run/checkpoints/step-00000002.h5" ]'
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n 2 "$FABULA" train --run-dir "$FS/run" $CKPT_ARGS \
        --steps 3 --set checkpoint.save_interval=1) >"$SCRATCH/fs2.out" 2>&1
    RC=$?
    grep "error" "$SCRATCH/fs2.out" | head -n 3
    check "disk full during a save (tmpfs): exit 4, message, earlier checkpoints and latest intact" 'after_full fs2 "$FS/run"'
    umount "$FS"
    trap - EXIT
else
    echo "note: cannot mount a tmpfs here (not root); the file-size limit below covers a full disk"
fi

# A file-size limit below one checkpoint (SIGXFSZ ignored, so write()
# fails with EFBIG). MPI needs a few MB of shared-memory files itself, so
# the model is made big enough (about 23 MB a checkpoint) to fail under a
# limit of 12000 blocks: 6 MB in dash's 512-byte blocks, 12 MB in bash's
# 1024-byte ones (make check runs the tests with bash).
BIG="--set model.hidden_size=256 --set model.intermediate_size=512"
ctrain 2 big --steps 2 --set checkpoint.save_interval=1 $BIG
check "a model of ~23 MB checkpoints: steps 1 and 2 saved" '[ $RC -eq 0 ] && [ "$(clatest big)" = 2 ]'
(cd "$FB_SRCDIR" && trap '' XFSZ && ulimit -f 12000 && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n 2 "$FABULA" train \
    --run-dir "$SCRATCH/big" $CKPT_ARGS --steps 3 --set checkpoint.save_interval=1 $BIG) >"$SCRATCH/big.out" 2>&1
RC=$?
grep "error" "$SCRATCH/big.out" | head -n 3
check "file-size limit during a save: exit 4, message, earlier checkpoints and latest intact" \
    'after_full big "$SCRATCH/big"'
finish
