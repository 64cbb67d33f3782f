#!/bin/sh
# The README's feature matrix cannot drift: every cell is dry-run against
# the config's refusals, and every test a cell names exists, runs in make
# check and sets the cell's layout and precision (feature_matrix_check.py).
. "$FB_SRCDIR/tests/e2e/lib.sh"
${PYTHON:-python3} "$FB_SRCDIR/tests/e2e/feature_matrix_check.py" "$FB_SRCDIR/README.md" "$FABULA" "$FB_SRCDIR" \
    >"$SCRATCH/matrix.txt" 2>&1
rc=$?
grep -E "^(FAIL|  \|)" "$SCRATCH/matrix.txt"
tail -n 1 "$SCRATCH/matrix.txt"
check "the README's feature matrix holds (feature_matrix_check.py exit $rc)" '[ $rc -eq 0 ]'
# the checker itself: a cell that claims what the config refuses fails it
sed 's/^| tensor parallel | yes (`tp_invariance.sh`) | yes (`mixed_parallel.sh`) | refused |/| tensor parallel | yes (`tp_invariance.sh`) | yes (`mixed_parallel.sh`) | not yet run on a device |/' \
    "$FB_SRCDIR/README.md" >"$SCRATCH/README.md"
${PYTHON:-python3} "$FB_SRCDIR/tests/e2e/feature_matrix_check.py" "$SCRATCH/README.md" "$FABULA" "$FB_SRCDIR" \
    >"$SCRATCH/bad.txt" 2>&1
rc=$?
check "a CUDA tp cell claiming 'not yet run on a device' fails the checker" \
    '[ $rc -eq 1 ] && grep -q "FAIL: tensor parallel x CUDA bf16, fp16: accepted (exit 2)" "$SCRATCH/bad.txt"'
finish
