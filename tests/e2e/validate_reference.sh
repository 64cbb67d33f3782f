#!/bin/sh
# The committed loss curves of `fabula validate` against the float64 PyTorch
# reference (validation/check_curve.py): from fabula's initial weights,
# micro-batches and lr schedule (validation/curve_inputs), the reference's
# own losses, gradients, clipping and AdamW give each curve's first 20 steps
# to 1e-6 relative. Skipped without a Python with torch and h5py.
. "$FB_SRCDIR/tests/e2e/lib.sh"

PY=
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import torch, h5py' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no Python with torch and h5py (apt-get install python3-torch python3-h5py)"; exit 77; }
TOOL="$FB_BUILDDIR/validation/curve_inputs"
[ -x "$TOOL" ] || { echo "no $TOOL (make builds it)"; exit 99; }

(cd "$FB_SRCDIR" && timeout 300 $MPIEXEC -n 1 "$TOOL" "$SCRATCH/inputs.h5" 20) >"$SCRATCH/out.txt" 2>&1
RC=$?
cat "$SCRATCH/out.txt"
check "curve_inputs wrote the weights and 20 steps" '[ $RC -eq 0 ] && [ -s "$SCRATCH/inputs.h5" ]'
for c in cpu-np1 cpu-np2; do
    timeout 300 "$PY" "$FB_SRCDIR/validation/check_curve.py" "$SCRATCH/inputs.h5" \
        "$FB_SRCDIR/validation/curves/$c.json" --tol 1e-6 >"$SCRATCH/$c.txt" 2>&1
    RC=$?
    tail -n 4 "$SCRATCH/$c.txt"
    check "$c: the first 20 steps within 1e-6 of the float64 reference" \
        '[ $RC -eq 0 ] && grep -q "PASS" "$SCRATCH/$c.txt" && [ "$(grep -c "^  step" "$SCRATCH/$c.txt")" -eq 20 ]'
done
# the check can fail: a curve 1e-5 off at step 15
awk '/"loss": \[/ { print; l = 1; next } l && /^ *[0-9]/ { n++; if (n == 15) { c = sub(/,$/, "");
     printf "    %.17g%s\n", $1 * 1.00001, c ? "," : ""; next } } { print }' \
    "$FB_SRCDIR/validation/curves/cpu-np1.json" > "$SCRATCH/off.json"
timeout 300 "$PY" "$FB_SRCDIR/validation/check_curve.py" "$SCRATCH/inputs.h5" "$SCRATCH/off.json" --tol 1e-6 \
    >"$SCRATCH/off.txt" 2>&1
RC=$?
check "a curve 1e-5 off at step 15 fails the check" '[ $RC -eq 1 ] && grep -q "FAIL" "$SCRATCH/off.txt"'
finish
