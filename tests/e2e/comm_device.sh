#!/bin/sh
# Collectives on device buffers (tests/unit/test_comm_device.c) under
# mpiexec with 1, 2 and 4 ranks (oversubscribed): with one rank per GPU the
# group takes NCCL, with ranks sharing a GPU the staging path. Skipped (exit
# 77) in a build without CUDA or where no GPU is visible. Every launch runs
# under a timeout, so a collective that hangs fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST_DEV="$FB_BUILDDIR/tests/unit/test_comm_device"
[ -x "$TEST_DEV" ] || { echo "no $TEST_DEV (make check builds it)"; exit 99; }

for np in 1 2 4; do
    timeout 300 $MPIEXEC -n "$np" "$TEST_DEV" >"$SCRATCH/out$np.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 77 ]; then
        # The test decides alike on every rank count: nothing to run here.
        cat "$SCRATCH/out$np.txt"
        exit 77
    fi
    check "test_comm_device on $np ranks passes (exit $rc)" \
        '[ $rc -eq 0 ] && grep -q "^PASS: 0 failures" "$SCRATCH/out$np.txt"'
    grep -E '^(checked|FAIL)' "$SCRATCH/out$np.txt" | sed 's/^/  /'
    [ "$rc" -eq 0 ] || tail -n 20 "$SCRATCH/out$np.txt" | sed 's/^/  | /'
done
finish
