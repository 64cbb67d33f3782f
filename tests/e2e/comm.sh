#!/bin/sh
# The comm API and the process groups (tests/unit/test_comm.c) under
# mpiexec with 1, 2 and 4 ranks (oversubscribed), and the internal error of
# a call over the per-call count limit. Every launch runs under a timeout,
# so a collective that hangs fails the test instead of stalling make check.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST_COMM="$FB_BUILDDIR/tests/unit/test_comm"
rank_suite "$TEST_COMM" 60

# Counts above the limit (lowered to 100 elements by the test): exit 1 with
# a message naming the API call and the argument. One rank: the check is
# local, and with several ranks all failing at once, mpiexec may tear the
# job down before every rank's message is forwarded.
for kind in alltoallv reduce_scatter allgatherv; do
    timeout 60 $MPIEXEC -n 1 "$TEST_COMM" overflow "$kind" >"$SCRATCH/ov.txt" 2>&1
    rc=$?
    check "comm_$kind over the count limit: exit 1 naming the call (exit $rc)" \
        '[ $rc -eq 1 ] && grep -q "comm_$kind failed: .* = 200 elements is more than the 100 one call can carry" "$SCRATCH/ov.txt"'
    [ "$rc" -eq 1 ] || sed 's/^/  | /' "$SCRATCH/ov.txt"
done
finish
