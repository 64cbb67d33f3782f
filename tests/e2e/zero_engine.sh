#!/bin/sh
# The ZeRO engine (tests/unit/test_zero.c: partition, gather,
# reduce-scatter, gradient norm, host offload; stages 0 to 3, ep 1 and 2)
# under mpiexec with 1, 2 and 4 ranks (oversubscribed), each launch under a
# timeout so that a collective that hangs fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
rank_suite "$FB_BUILDDIR/tests/unit/test_zero" 120
finish
