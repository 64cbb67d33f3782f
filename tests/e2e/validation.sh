#!/bin/sh
# fabula's logits, losses, gradients and 10 AdamW steps against the
# committed PyTorch reference outputs (validation/ref, made by
# validation/make_references.py; `make validate` regenerates and compares).
. "$FB_SRCDIR/tests/e2e/lib.sh"
CMP="${FB_BUILDDIR:-.}/validation/compare_reference"
[ -x "$CMP" ] || { echo "compare_reference not built"; exit 1; }
$MPIEXEC -n 1 "$CMP" "$FB_SRCDIR"/validation/ref/dense.h5 "$FB_SRCDIR"/validation/ref/moe_drop.h5 \
    "$FB_SRCDIR"/validation/ref/moe_mixed.h5 "$FB_SRCDIR"/validation/ref/moe_global.h5 >"$SCRATCH/out.txt" 2>&1
rc=$?
cat "$SCRATCH/out.txt"
check "all four references match at 1e-4" '[ $rc -eq 0 ] && grep -q "^PASS" "$SCRATCH/out.txt"'
check "moe_global ran as two micro-batches with the global-batch loss" \
    'grep -q "step of 2 micro-batches, load-balancing loss over the whole step" "$SCRATCH/out.txt"'
# The comparator must be able to fail: a tolerance of 0 cannot be met by
# fp32 against fp64.
$MPIEXEC -n 1 "$CMP" --tol 0 "$FB_SRCDIR"/validation/ref/dense.h5 >"$SCRATCH/tol0.txt" 2>&1
rc=$?
check "tolerance 0 is reported as a mismatch" '[ $rc -eq 1 ] && grep -q MISMATCH "$SCRATCH/tol0.txt"'
finish
