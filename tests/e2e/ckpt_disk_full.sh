#!/bin/sh
# A disk that fills during a checkpoint save ends the run with exit 4 and
# one message at 1 and 4 ranks (2 ranks: ckpt_bad_input.sh), never a crash:
# a single rank must not finalize MPI, whose HDF5 shutdown closes the failed
# file and crashes on it. The temporary file is removed, the earlier
# checkpoints and `latest` stay. Needs a tmpfs mount (root); 77 otherwise.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

FS="$SCRATCH/tmpfs"
mkdir -p "$FS"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=5m tmpfs "$FS" 2>/dev/null; then
    echo "cannot mount a tmpfs here (not root, or not permitted): skipped"
    exit 77
fi
trap 'umount "$FS" 2>/dev/null || { sleep 1; umount "$FS"; }' EXIT

# two checkpoints of ~1.5 MB fit in 5 MB, the third does not
for np in 1 4; do
    rm -rf "$FS/run"
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n $np "$FABULA" train --run-dir "$FS/run" $CKPT_ARGS \
        --steps 2 --set checkpoint.save_interval=1) >"$SCRATCH/fill$np.out" 2>&1
    check "$np rank(s): two checkpoints fit" '[ $? -eq 0 ] && [ -f "$FS/run/checkpoints/step-00000002.h5" ]'
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n $np "$FABULA" train --run-dir "$FS/run" $CKPT_ARGS \
        --steps 3 --set checkpoint.save_interval=1) >"$SCRATCH/full$np.out" 2>&1
    RC=$?
    grep "error" "$SCRATCH/full$np.out" | head -n 2
    check "$np rank(s): disk full during a save: exit 4 (got $RC), fabula's message, no crash, earlier checkpoints intact" \
        '[ $RC -eq 4 ] && grep -q "error: checkpoint .*step-00000003.h5: .* failed (disk full" "$SCRATCH/full$np.out" &&
         ! grep -q "(signal [0-9]\|Segmentation\|BAD TERMINATION" "$SCRATCH/full$np.out" &&
         [ -z "$(ls -A "$FS/run/checkpoints" | grep -v "^latest$\|^step-0000000[12].h5$")" ] &&
         [ "$(sed -n 1p "$FS/run/checkpoints/latest")" = step-00000002.h5 ] &&
         "$FABULA" ckpt verify -q "$FS/run/checkpoints/step-00000002.h5" >/dev/null'
done
finish
