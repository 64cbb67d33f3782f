#!/bin/sh
# The comm API and the process groups (tests/unit/test_comm.c) under
# mpiexec with 1, 2 and 4 ranks (oversubscribed), and the internal error of
# a call over the per-call count limit. Every launch runs under a timeout,
# so a collective that hangs fails the test instead of stalling make check.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST_COMM="$FB_BUILDDIR/tests/unit/test_comm"
# Every collective under both wait policies (docs/parallel.md, "Waiting"):
# yield runs each blocking call as its non-blocking form and a test loop.
for policy in spin yield; do
    echo "FABULA_MPI_WAIT=$policy:"
    FABULA_MPI_WAIT=$policy rank_suite "$TEST_COMM" 60
done

# auto (the default) yields only when the node has more ranks than the CPUs
# its ranks may run on (the union of their affinity masks; taskset narrows
# the mask mpiexec's children inherit), and an explicit policy overrides.
wait_mode() { # CPUS NP [ENV=VALUE]: the policy line rank 0 prints
    env ${3:-FABULA_MPI_WAIT=auto} timeout 60 taskset -c "$1" $MPIEXEC -n "$2" "$TEST_COMM" waitmode 2>&1
}
check "auto, 1 rank on 1 CPU: spin" '[ "$(wait_mode 0 1)" = "wait spin: 1 ranks on 1 CPUs" ]'
check "auto, 2 ranks on 1 CPU: yield" '[ "$(wait_mode 0 2)" = "wait yield: 2 ranks on 1 CPUs" ]'
check "auto, 2 ranks on 2 CPUs: spin" '[ "$(wait_mode 0,1 2)" = "wait spin: 2 ranks on 2 CPUs" ]'
check "auto, 4 ranks on 2 CPUs: yield" '[ "$(wait_mode 0,1 4)" = "wait yield: 4 ranks on 2 CPUs" ]'
check "spin overrides 2 ranks on 1 CPU" '[ "$(wait_mode 0 2 FABULA_MPI_WAIT=spin)" = "wait spin: 2 ranks on 1 CPUs" ]'
check "yield on 1 rank" '[ "$(wait_mode 0 1 FABULA_MPI_WAIT=yield)" = "wait yield: 1 ranks on 1 CPUs" ]'
out=$(wait_mode 0 2 FABULA_MPI_WAIT=busy); rc=$?
check "FABULA_MPI_WAIT=busy: exit 2 naming the variable and its values (exit $rc)" \
    '[ $rc -eq 2 ] && echo "$out" | grep -q "FABULA_MPI_WAIT is .busy.: expected auto, spin or yield"'

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
