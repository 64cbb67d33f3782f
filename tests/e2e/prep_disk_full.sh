#!/bin/sh
# fabula prep on a full file system (a 1 MB tmpfs; needs root and mount, 77
# otherwise), at 1 and 2 ranks: exit 4, the error names the temporary file,
# the dataset that could not be written and the room left, and nothing is
# left behind.
. "$FB_SRCDIR/tests/e2e/lib.sh"
IN="$FB_SRCDIR/inputs/sample.jsonl"
FS="$SCRATCH/fs"
mkdir -p "$FS"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=1m tmpfs "$FS" 2>/dev/null; then
    echo "cannot mount a tmpfs here (not root, or not permitted): skipped"
    exit 77
fi
trap 'umount "$FS" 2>/dev/null || { sleep 2; umount "$FS"; }' EXIT
for k in 1 2 3 4; do cat "$IN"; done >"$SCRATCH/x4.jsonl"
# At 1 rank the message is checked; at 2, the rank that fails first ends the
# job with MPI_Abort, and the launcher may then drop what the ranks had not
# yet forwarded, so only the exit code and the clean-up are.
for np in 1 2; do
    (cd "$SCRATCH" && timeout 300 $MPIEXEC -n $np "$FABULA" prep -q -o fs/full.h5 x4.jsonl) >"$SCRATCH/out.txt" 2>&1
    RC=$?
    grep -v '^ \|^HDF5-DIAG\|^ADIOI' "$SCRATCH/out.txt" | tail -n 6
    if [ $np -eq 1 ]; then
        check "1 rank: exit 4, the error names the file, the dataset and the free space" \
            '[ $RC -eq 4 ] && grep -q "error: fs/full.h5.tmp.[0-9]*: cannot write /[a-z/_]* (is the file system full? 0.0 MB are free there;" "$SCRATCH/out.txt"'
    else
        check "2 ranks: exit 4" '[ $RC -eq 4 ]'
    fi
    check "$np rank(s): nothing left on the file system" '[ -z "$(ls -A "$FS")" ]'
done
finish
