#!/bin/sh
# Collectives on device buffers (tests/unit/test_comm_device.c) under
# mpiexec with 1, 2 and 4 ranks (oversubscribed): with one rank per GPU the
# group takes NCCL, with ranks sharing a GPU the staging path. Skipped (exit
# 77) in a build without CUDA or where no GPU is visible. Every launch runs
# under a timeout, so a collective that hangs fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
rank_suite "$FB_BUILDDIR/tests/unit/test_comm_device" 300 skippable
finish
