#!/bin/sh
# Writes the curves and bands of `fabula validate`'s reference jobs
# (docs/validation-format.md "Loss curves", "Bands"): each job on 1, 2 and 4
# ranks with this machine's OpenBLAS kernels (the committed curves, one per
# world size), then on 1 rank with every other OpenBLAS kernel set this CPU
# runs (OPENBLAS_CORETYPE), and derives each job's bands from the spread of
# all of them (validation/derive_bands.py); the float64 PyTorch reference
# recomputes the first steps of the fp32 jobs it models (validate
# --reference on, check_curve.py), and each job's bands.json says so.
#
# usage: validation/make_curves.sh [OUTDIR]   from the source tree, after make;
#        FABULA (default ./fabula), MPIEXEC (default mpiexec), PYTHON
# OUTDIR defaults to validation/curves; the runs go to a temporary directory.
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${1:-validation/curves}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=1

kernel() { "$FABULA" --version | sed -n 's/.*BLAS .* \([A-Za-z0-9]*\) MAX_THREADS.*/\1/p' | head -n 1; }
DEFAULT=$(kernel)
echo "make_curves: this machine's OpenBLAS kernels: ${DEFAULT:-unknown}"
dirs=""
for n in 1 2 4; do
    echo "make_curves: the suite on $n rank(s)"
    ref=off; [ "$n" -eq 1 ] && ref=on
    $MPIEXEC -n "$n" "$FABULA" validate --curves-dir "$TMP/none" --run-dir "$TMP/run$n" --reference $ref \
        --write-curves "$TMP/np$n" >"$TMP/np$n.log" 2>&1 || { tail -n 30 "$TMP/np$n.log"; exit 1; }
    dirs="$dirs $TMP/np$n"
done
for k in SkylakeX Haswell Sandybridge Prescott; do
    [ "$k" = "$DEFAULT" ] && continue
    # a kernel set this CPU cannot run is replaced by OpenBLAS: skip it
    [ "$(OPENBLAS_CORETYPE=$k kernel)" = "$k" ] || continue
    echo "make_curves: the suite on 1 rank with OPENBLAS_CORETYPE=$k"
    OPENBLAS_CORETYPE=$k $MPIEXEC -n 1 "$FABULA" validate --curves-dir "$TMP/none" --run-dir "$TMP/runk" \
        --write-curves "$TMP/k$k" >"$TMP/k$k.log" 2>&1 || { tail -n 30 "$TMP/k$k.log"; exit 1; }
    dirs="$dirs $TMP/k$k"
done

# the float64 PyTorch reference: the 1-rank run recomputed it (validate
# --reference on); the 2- and 4-rank curves are checked against the same
# inputs (the micro-batches and initial weights do not depend on the layout)
set --
torch=$("$PYTHON" -c 'import torch; print(torch.__version__)')
for job in $("$PYTHON" -c 'import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    if j.get("reference", {}).get("ran"): print(j["name"])' "$TMP/run1/validate.json"); do
    for n in 2 4; do
        "$PYTHON" validation/check_curve.py "$TMP/run1/$job/reference/inputs.h5" "$TMP/np$n/$job/cpu-np$n.json" \
            --tol 1e-6 >"$TMP/$job-check$n.log" || { cat "$TMP/$job-check$n.log"; exit 1; }
    done
    cp "$TMP/run1/$job/reference/check.txt" "$TMP/$job-check1.log"
    worst=$(sed -n 's/^check_curve: worst relative difference \([^:]*\):.*/\1/p' "$TMP"/$job-check*.log | sort -g | tail -n 1)
    steps=$(grep -c "^  step" "$TMP/$job-check1.log")
    echo "make_curves: $job: the float64 reference agrees to $worst relative over $steps steps"
    set -- "$@" --checked "$job=the first $steps steps of cpu-np1, cpu-np2 and cpu-np4 recomputed by validation/check_curve.py (the float64 PyTorch $torch reference of validation/reference_model.py, from fabula's initial weights, batches and lrs): losses within $worst relative"
done

mkdir -p "$OUT"
for n in 1 2 4; do
    for d in "$TMP/np$n"/*/; do
        job=$(basename "$d")
        mkdir -p "$OUT/$job"
        cp "$d"/*.json "$OUT/$job/"
    done
done
machine="$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), $(date -u +%Y-%m-%d)"
"$PYTHON" validation/derive_bands.py "$OUT" $dirs --machine "$machine" "$@"
echo "make_curves: wrote $OUT"
