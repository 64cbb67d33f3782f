#!/bin/sh
# The tensor-parallel model's losses, routing and every gradient slice
# against the single-rank model (tests/unit/test_tp) on 1, 2 and 4 ranks
# (tp = the world size, and tp 2 of 4 ranks). Every launch runs under a
# timeout: a hang fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST="$FB_BUILDDIR/tests/unit/test_tp"
for np in 1 2 4; do
    timeout 120 $MPIEXEC -n $np "$TEST" >"$SCRATCH/np$np.txt" 2>&1
    rc=$?
    cat "$SCRATCH/np$np.txt"
    check "tp gradients on $np ranks (exit $rc)" '[ $rc -eq 0 ] && grep -q "^PASS" "$SCRATCH/np$np.txt"'
done
finish
