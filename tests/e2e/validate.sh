#!/bin/sh
# `fabula validate` (docs/validation-format.md "Loss curves"): the reference
# job's first steps on 1 and 2 ranks against the committed curves (bit-exact
# on its own layout with the committed BLAS line, within the tolerance on the
# other layout or another BLAS line) and against the curves written here
# (bit-exact on its own layout); a curve perturbed at
# one step fails with that step named and exit 6, by a relative 1e-9 under
# the bit-exact rule and by 0.01 under the tolerance; a missing, garbled or
# foreign curve file is refused with exit 3 before any training.
. "$FB_SRCDIR/tests/e2e/lib.sh"

STEPS=12
CURVES="$FB_SRCDIR/validation/curves"

run_fabula 1 validate --help
check "--help exits 0 and lists --steps and --curve" \
    '[ $RC -eq 0 ] && grep -q -- "--steps N" "$SCRATCH/out.txt" && grep -q -- "--curve NAME" "$SCRATCH/out.txt"'

# row NAME: the table row of curve NAME in out.txt
row() { grep "^$1 " "$SCRATCH/out.txt"; }

# loss_lines FILE: the first $STEPS losses of a curve file, as written
loss_lines() { sed -n '/"loss": \[/,$p' "$1" | grep '^ *[0-9]' | head -n $STEPS | tr -d ' ,'; }

# The committed curves hold the losses of one BLAS build and kernel set
# (their "blas" field). OpenBLAS picks its kernels by CPU (Prescott on one of
# this project's VMs, Haswell on another), and other kernels give other last
# bits, so validate compares against a curve of another BLAS line within the
# tolerance, not bit for bit (docs/validation-format.md). Where this
# machine's line is the committed one, the test checks the bit-exact rule
# against the committed curves; everywhere it checks it against the curves
# this machine writes (--write-curve), run again.
CURVE_BLAS=$(sed -n 's/^ *"blas": "\(.*\)",$/\1/p' "$CURVES/cpu-np1.json")
for np in 1 2; do
    other=$((3 - np))
    run_fabula $np validate --steps $STEPS --run-dir "$SCRATCH/run$np" --write-curve "$SCRATCH/w$np.json" \
        --curve cpu-np1 --curve cpu-np2 \
        --ranks-note "test layout $np"
    cp "$SCRATCH/out.txt" "$SCRATCH/out$np.txt"
    sed -n '/^environment:/,$p' "$SCRATCH/out.txt"
    HERE_BLAS=$(sed -n 's/^ *"blas": "\(.*\)",$/\1/p' "$SCRATCH/w$np.json")
    check "$np rank(s): PASS, exit 0" '[ $RC -eq 0 ] && grep -q "^fabula validate: PASS" "$SCRATCH/out.txt"'
    if [ "$HERE_BLAS" = "$CURVE_BLAS" ]; then
        check "$np rank(s): own layout's curve cpu-np$np bit-exact, max diff 0" \
            'row cpu-np$np | grep -q "bit-exact  PASS" && row cpu-np$np | grep -q " 0.000e+00 "'
        check "$np rank(s): --write-curve wrote the committed curve's first $STEPS losses, digit for digit" \
            '[ "$(loss_lines "$SCRATCH/w$np.json")" = "$(loss_lines "$CURVES/cpu-np$np.json")" ] &&
             [ "$(loss_lines "$SCRATCH/w$np.json" | wc -l)" -eq $STEPS ] && grep -q "\"world_size\": $np," "$SCRATCH/w$np.json"'
    else
        echo "note: this machine's BLAS is '$HERE_BLAS', the committed curves' '$CURVE_BLAS':" \
            "bit-exactness is checked against the curves written here"
        check "$np rank(s): own layout's curve cpu-np$np of another BLAS line: within the tolerance" \
            'row cpu-np$np | grep -q "0.0001  PASS"'
        check "$np rank(s): --write-curve wrote $STEPS losses with this machine's BLAS line and world size" \
            '[ "$(loss_lines "$SCRATCH/w$np.json" | wc -l)" -eq $STEPS ] && [ -n "$HERE_BLAS" ] &&
             grep -q "\"world_size\": $np," "$SCRATCH/w$np.json"'
    fi
    check "$np rank(s): cpu-np$other compared within the tolerance" 'row cpu-np$other | grep -q "0.0001  PASS"'
    check "$np rank(s): $STEPS steps compared" 'row cpu-np$np | awk "{exit !(\$6 == $STEPS)}"'
    check "$np rank(s): the --ranks-note is printed" 'grep -q "^  note    test layout $np" "$SCRATCH/out.txt"'
    check "$np rank(s): environment names MPI, HDF5, BLAS and the nodes" \
        'grep -q "^  MPI     MPICH" "$SCRATCH/out.txt" && grep -q "^  HDF5    1\." "$SCRATCH/out.txt" &&
         grep -q "BLAS " "$SCRATCH/out.txt" && grep -q "^  nodes   .*(rank" "$SCRATCH/out.txt"'
    run_fabula $np validate --steps $STEPS --run-dir "$SCRATCH/again$np" --curve "$SCRATCH/w$np.json"
    check "$np rank(s): the curve written here, run again: bit-exact, max diff 0" \
        '[ $RC -eq 0 ] && row cpu-np$np | grep -q "bit-exact  PASS" && row cpu-np$np | grep -q " 0.000e+00 "'
done

# perturb IN OUT STEP FACTOR ADD: the curve with step STEP's loss x FACTOR + ADD
perturb() {
    awk -v s="$3" -v f="$4" -v a="$5" '
        /"loss": \[/ { print; inloss = 1; next }
        inloss && /^ *[-0-9]/ { n++
            if (n == s) { comma = sub(/,$/, ""); printf "    %.17g%s\n", $1 * f + a, comma ? "," : ""; next } }
        { print }' "$1" > "$2"
}
# perturbed from the 1-rank curve written here (this machine's BLAS line)
perturb "$SCRATCH/w1.json" "$SCRATCH/tiny.json" 7 1.000000001 0
perturb "$SCRATCH/w1.json" "$SCRATCH/big.json" 7 1 0.01
check "perturbed curves differ from the written one only at step 7" \
    '[ "$(diff "$SCRATCH/w1.json" "$SCRATCH/tiny.json" | grep -c "^>")" -eq 1 ] &&
     [ "$(diff "$SCRATCH/w1.json" "$SCRATCH/big.json" | grep -c "^>")" -eq 1 ]'

run_fabula 1 validate --steps $STEPS --run-dir "$SCRATCH/run1" --curve "$SCRATCH/tiny.json"
cat "$SCRATCH/out.txt" | sed -n '/^curve /,$p'
check "1 rank, step 7 off by 1e-9 relative: FAIL (bit-exact), exit 6, worst step 7" \
    '[ $RC -eq 6 ] && grep -q "^fabula validate: FAIL" "$SCRATCH/out.txt" && row cpu-np1 | grep -q " 7 *bit-exact  FAIL" &&
     grep -q "worst step 7:" "$SCRATCH/out.txt"'
run_fabula 2 validate --steps $STEPS --run-dir "$SCRATCH/run2" --curve "$SCRATCH/big.json"
cat "$SCRATCH/out.txt" | sed -n '/^curve /,$p'
check "2 ranks, step 7 off by 0.01: FAIL (tolerance), exit 6, worst step 7" \
    '[ $RC -eq 6 ] && row cpu-np1 | grep -q " 7 *0.0001  FAIL" && grep -q "worst step 7:" "$SCRATCH/out.txt"'
run_fabula 2 validate --steps 6 --run-dir "$SCRATCH/run2" --curve "$SCRATCH/big.json"
check "the same curve passes when --steps stops before step 7" '[ $RC -eq 0 ]'

# bad curve files: exit 3 naming the file, before the job starts
bad() { # NAME FILE MESSAGE
    msg=$3
    run_fabula 2 validate --steps 3 --run-dir "$SCRATCH/bad" --curve "$2"
    check "$1: exit 3, '$msg', no training" \
        '[ $RC -eq 3 ] && grep -q "$msg" "$SCRATCH/out.txt" && ! grep -q "^step " "$SCRATCH/out.txt"'
    grep "error" "$SCRATCH/out.txt" | head -n 2
}
bad "missing curve file" "$SCRATCH/nonexistent.json" "cannot read loss curve $SCRATCH/nonexistent.json"
bad "missing curve name" "cpu-np99" "cannot read loss curve .*cpu-np99.json"
printf '{"format": "fabula-loss-curve", "version": 1, "loss": [5.6, ' > "$SCRATCH/cut.json"
bad "truncated JSON" "$SCRATCH/cut.json" "loss curve $SCRATCH/cut.json: not JSON"
sed 's/^    5\.64[0-9]*,$/    "x",/' "$CURVES/cpu-np1.json" > "$SCRATCH/str.json"
bad "a string among the losses" "$SCRATCH/str.json" '"loss"\[0\] (step 1) is not a finite number'
sed 's/"job": "[^"]*"/"job": "another-job"/' "$CURVES/cpu-np1.json" > "$SCRATCH/job.json"
bad "another job's curve" "$SCRATCH/job.json" 'of job "another-job", not of this'
sed '/"blas"/d' "$CURVES/cpu-np1.json" > "$SCRATCH/noblas.json"
bad "a field missing" "$SCRATCH/noblas.json" '"blas" is missing'
sed 's/"steps": 300/"steps": 2/' "$CURVES/cpu-np1.json" > "$SCRATCH/steps.json"
bad "steps not the length of loss" "$SCRATCH/steps.json" '"steps" is not the length'
run_fabula 1 validate --steps 301
check "--steps 301: exit 2" '[ $RC -eq 2 ] && grep -q -- "--steps" "$SCRATCH/out.txt"'
run_fabula 3 validate --steps 2 --run-dir "$SCRATCH/run3"
check "3 ranks: exit 2, the job runs on 1, 2 or 4" '[ $RC -eq 2 ] && grep -q "runs on 1, 2 or 4 ranks" "$SCRATCH/out.txt"'
run_fabula 1 validate --steps 3 --curves-dir "$SCRATCH/nodir"
check "a curves directory that does not exist: exit 3 naming it" \
    '[ $RC -eq 3 ] && grep -q "cannot open directory $SCRATCH/nodir" "$SCRATCH/out.txt"'
finish
