#!/bin/sh
# `fabula validate` (docs/validation-format.md "Loss curves"): the whole suite
# on 1, 2 and 4 ranks against the committed curves, PASS, its report
# (validate.json) recomputed from the curves by validate_check.py (the rule
# per curve, the routing's first difference, every quantity's largest
# difference and verdict under the per-step bands); the curves written here
# compared again, every quantity equal; on 1 rank the float64 PyTorch
# reference recomputes the first 20 losses of base, corpus-zero3-ep and
# tp-pp from the run's own inputs (a reference 1e-5 off fails); curves perturbed at one step fail
# naming the job, the quantity and the step: a loss 1e-9 off under the
# bit-exact rule, an lm loss 10 bands off, the routing at step 3, a loss
# scale, a validation loss; a routing difference after step 10 is a flip,
# not a failure; --steps before a perturbation passes; missing, damaged,
# old or foreign curve and bands files exit 3 before any training; bad
# options exit 2. The injected defects are validate_defects.sh's.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
CURVES="$FB_SRCDIR/validation/curves"
JOBS="base corpus-zero3-ep tp-pp global-aux expert-dropout bf16 fp16"

run_fabula 1 validate --help
check "--help exits 0 and lists --job, --quick, --list, --report and --write-curves" \
    '[ $RC -eq 0 ] && for o in "--job NAME" "--quick" "--list" "--report DIR" "--write-curves DIR"; do
         grep -q -- "$o" "$SCRATCH/out.txt" || exit 1; done'
run_fabula 1 validate --list
check "--list: the 7 jobs, what each covers, a layout for 1, 2 and 4 ranks" \
    '[ $RC -eq 0 ] && for j in $JOBS; do grep -q "^$j ($j-v1): " "$SCRATCH/out.txt" || exit 1; done &&
     [ "$(grep -c "^  covers: " "$SCRATCH/out.txt")" -eq 7 ] && [ "$(grep -c "^  4 ranks" "$SCRATCH/out.txt")" -eq 7 ]'

for np in 1 2 4; do
    run_fabula $np validate --run-dir "$SCRATCH/run$np" --report "$SCRATCH/rep$np" \
        --write-curves "$SCRATCH/w$np" --ranks-note "test layout $np"
    cp "$SCRATCH/out.txt" "$SCRATCH/out$np.txt"
    sed -n '/^environment:/,$p' "$SCRATCH/out.txt"
    [ $RC -eq 0 ] || grep -E "FAIL|error" "$SCRATCH/out.txt" | head -n 20
    check "$np rank(s): the suite PASSes, exit 0, each job against its 3 curves" \
        '[ $RC -eq 0 ] && grep -q "^fabula validate: PASS" "$SCRATCH/out.txt" &&
         for j in $JOBS; do grep -q "^$j  *[0-9]* .*  3  PASS$" "$SCRATCH/out.txt" || exit 1; done'
    check "$np rank(s): validate.json's figures are those recomputed from the curves and bands" \
        '"$PY" "$FB_SRCDIR/tests/e2e/validate_check.py" "$SCRATCH/rep$np/validate.json" "$SCRATCH/w$np" "$CURVES"'
    check "$np rank(s): validate.md and the environment: MPI, HDF5, BLAS, nodes, the note" \
        'grep -q "^# fabula validate: PASS" "$SCRATCH/rep$np/validate.md" && grep -q "^  MPI  " "$SCRATCH/out.txt" &&
         grep -q "^  HDF5 " "$SCRATCH/out.txt" && grep -q "BLAS" "$SCRATCH/out.txt" &&
         grep -q "^  nodes " "$SCRATCH/out.txt" && grep -q "^  note    test layout $np" "$SCRATCH/out.txt"'
done

# the float64 reference in the loop (--reference auto): on 1 rank, where
# torch and h5py are found, the run's own first steps of base,
# corpus-zero3-ep and tp-pp recomputed; on more ranks not run, saying why
REFPY=
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import torch, h5py' >/dev/null 2>&1; then REFPY=$p; break; fi
done
if [ -n "$REFPY" ]; then
    check "1 rank: the float64 reference recomputed base, corpus-zero3-ep and tp-pp, within 1e-6" \
        '"$PY" - "$SCRATCH/rep1/validate.json" <<"PYEOF"
import json, sys
r = {j["name"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
for n in ("base", "corpus-zero3-ep", "tp-pp"):
    x = r[n]["reference"]
    assert x["ran"] and x["steps"] == 20 and x["worst_relative_difference"] <= 1e-6 and x["verdict"] == "PASS", (n, x)
assert all("reference" not in r[n] for n in ("global-aux", "expert-dropout", "bf16", "fp16"))
PYEOF'
    # a Python whose reference sees this run's loss 1e-5 off at step 5
    {
        echo '#!/bin/sh'
        echo 'case "$1" in *check_curve.py)'
        echo "  \"$REFPY\" -c 'import json, sys; c = json.load(open(sys.argv[1])); c[\"records\"][4][\"loss\"] *= 1 + 1e-5; json.dump(c, open(sys.argv[1], \"w\"))' \"\$3\" ;;"
        echo 'esac'
        echo "exec \"$REFPY\" \"\$@\""
    } >"$SCRATCH/pyoff.sh"
    chmod +x "$SCRATCH/pyoff.sh"
    (cd "$FB_SRCDIR" && PYTHON="$SCRATCH/pyoff.sh" timeout 600 $MPIEXEC -n 1 "$FABULA" validate --job base --quick \
        --reference on --run-dir "$SCRATCH/off") >"$SCRATCH/out.txt" 2>&1
    RC=$?
    check "a run 1e-5 off the float64 reference at step 5: FAIL, exit 6, the row says so" \
        '[ $RC -eq 6 ] && grep -q "^base .* FAIL (the float64 reference: 1.0[0-9]e-05 relative)" "$SCRATCH/out.txt"'
else
    echo "note: no Python with torch and h5py: the reference in the loop is not checked here"
    check "1 rank, no torch: the reference not run, saying why" \
        'grep -q "reference: not run (no Python with torch and h5py" "$SCRATCH/out1.txt"'
fi
check "2 and 4 ranks: the reference not run, saying it runs on 1 rank" \
    'grep -q "reference: not run (it runs on 1 rank" "$SCRATCH/out2.txt" &&
     grep -q "reference: not run (it runs on 1 rank" "$SCRATCH/out4.txt"'

# the curves this machine wrote, with the committed bands: every quantity of
# every step the same double (same world size and BLAS line)
for j in $JOBS; do cp "$CURVES/$j/bands.json" "$SCRATCH/w1/$j/"; done
run_fabula 1 validate --quick --curves-dir "$SCRATCH/w1" --run-dir "$SCRATCH/again" --report "$SCRATCH/again"
check "the curves written here, run again: bit-exact, every quantity equal" \
    '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/again/validate.json" <<"PYEOF"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["jobs"]) == 7 and r["quick"]
for j in r["jobs"]:
    assert len(j["curves"]) == 1, j["name"]
    c = j["curves"][0]
    assert c["rule"].startswith("same backend") and c["steps_compared"] == j["steps"], (j["name"], c["rule"])
    assert all(q["worst_step"] == 0 and q["verdict"] == "PASS" for q in c["quantities"].values()), j["name"]
PYEOF'

# perturb JOB CURVE STEP EXPR: a copy of the curves of JOB in $SCRATCH/p with
# step STEP's record changed by the Python statement EXPR on `r` (and `b`,
# the job's bands)
perturb() {
    rm -rf "$SCRATCH/p"; mkdir -p "$SCRATCH/p/$1"
    cp "$CURVES/$1/bands.json" "$SCRATCH/p/$1/"
    src="$CURVES/$1/$2.json"; [ -f "$src" ] || src="$SCRATCH/w1/$1/$2.json"
    "$PY" - "$src" "$SCRATCH/p/$1/$2.json" "$3" "$4" "$CURVES/$1/bands.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[5]))["quantities"]
s = int(sys.argv[3])
r = c["records"][s - 1]
exec(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"))
PYEOF
}
# summary JOB: the job's row of the closing table
summary() { grep "^$1  " "$SCRATCH/out.txt" | tail -n 1; }

perturb base cpu-np1 7 'r["loss"] *= 1 + 1e-9'
run_fabula 1 validate --job base --steps 12 --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
summary base
check "a loss 1e-9 off at step 7 under the bit-exact rule: FAIL naming base, loss and step 7, exit 6" \
    '[ $RC -eq 6 ] && summary base | grep -q "FAIL (loss against cpu-np1 from step 7)" &&
     grep -q "^  FAIL cpu-np1 loss: outside its tolerance from step 7" "$SCRATCH/out.txt"'
run_fabula 1 validate --job base --steps 6 --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "the same curve passes when --steps stops before step 7" '[ $RC -eq 0 ] && summary base | grep -q "PASS$"'

perturb base cpu-np2 7 'r["lm_loss"] += 10 * b["lm_loss"]["band_by_step"][6]'
run_fabula 1 validate --job base --steps 12 --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "an lm loss 10 bands off at step 7 on another layout: FAIL naming lm_loss and step 7" \
    '[ $RC -eq 6 ] && summary base | grep -q "FAIL (lm_loss against cpu-np2 from step 7)"'

perturb base cpu-np2 3 'e = r["tokens_per_expert"][0]; e[0] += 1; e[1] -= 1'
run_fabula 1 validate --job base --steps 12 --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "the routing different at step 3 (within the first 10): FAIL naming tokens_per_expert and step 3" \
    '[ $RC -eq 6 ] && summary base | grep -q "FAIL (tokens_per_expert against cpu-np2 from step 3)" &&
     grep -q "FAIL cpu-np2: routing differs from step 3, within the first 10 steps" "$SCRATCH/out.txt"'

perturb base cpu-np2 30 'e = r["tokens_per_expert"][1]; e[2] += 1; e[3] -= 1'
run_fabula 1 validate --job base --steps 40 --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "the routing different from step 30: a flip, steps 1-29 compared, PASS" \
    '[ $RC -eq 0 ] && summary base | grep -q "PASS$" &&
     grep -q "cpu-np2: routing differs from step 30 .* steps 1-29 compared" "$SCRATCH/out.txt"'

perturb fp16 cpu16-np2 5 'r["loss_scale"] *= 2'
run_fabula 1 validate --job fp16 --quick --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "a loss scale doubled at step 5: FAIL naming fp16 and loss_scale" \
    '[ $RC -eq 6 ] && summary fp16 | grep -q "FAIL (loss_scale against cpu16-np2 from step 5)"'

perturb corpus-zero3-ep cpu-np2 10 'r["valid_lm_loss"] += 1e-3'
run_fabula 1 validate --job corpus-zero3-ep --quick --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
check "a validation loss 1e-3 off at step 10: FAIL naming valid_lm_loss" \
    '[ $RC -eq 6 ] && summary corpus-zero3-ep | grep -q "FAIL (valid_lm_loss against cpu-np2 from step 10)"'

# bad curve and bands files: exit 3 naming the file, before any training
bad() {
    name=$1 needle=$2
    run_fabula 1 validate --job base --quick --curves-dir "$SCRATCH/p" --run-dir "$SCRATCH/pr"
    check "$name: exit 3, '$needle', no training" \
        '[ $RC -eq 3 ] && grep -q -- "$needle" "$SCRATCH/out.txt" && ! grep -q "^== job" "$SCRATCH/out.txt"'
}
rm -rf "$SCRATCH/p"; mkdir -p "$SCRATCH/p"
bad "no curves of the job" "no reference curves of job base: .*p/base has no curve file"
perturb base cpu-np1 1 'pass'; head -c 2000 "$SCRATCH/p/base/cpu-np1.json" > "$SCRATCH/p/base/cut.json"
bad "a truncated curve" "cut.json: not JSON"
perturb base cpu-np1 1 'c["version"] = 1'
bad "a curve of version 1" "\"version\" is not 2"
perturb base cpu-np1 1 'c["job"] = "base-v0"'
bad "another job's curve" "of job \"base-v0\", not of this fabula's job \"base-v1\""
perturb base cpu-np1 1 'del c["layout"]'
bad "a field missing" "\"layout\" is missing"
perturb base cpu-np1 1 'c["steps"] += 1'
bad "steps not the number of records" "\"records\" is not an array of \"steps\""
perturb base cpu-np1 3 'r["grad_norm"] = "1.0"'
bad "a string among the numbers" "step 3: \"grad_norm\" is not a finite number or null"
perturb base cpu-np1 1 'pass'; rm "$SCRATCH/p/base/bands.json"
bad "no bands file" "bands.json.*derived from them"
perturb base cpu-np1 1 'pass'; "$PY" - "$SCRATCH/p/base/bands.json" <<'PYEOF'
import json, sys
b = json.load(open(sys.argv[1]))
for q in b["quantities"].values():
    q["band_by_step"] = q["band_by_step"][:10]
json.dump(b, open(sys.argv[1], "w"))
PYEOF
bad "bands for fewer steps than compared" "has bands for 10 steps, fewer than the 40"

expect_exit2 "an unknown job" "job nosuch" "the suite: base, corpus-zero3-ep" 1 "$FABULA" validate --job nosuch
expect_exit2 "a curve path" "validate: --curve" "not a path" 1 "$FABULA" validate --curve a/b.json
expect_exit2 "a CPU job on cuda" "job base" "16-bit jobs run" 1 "$FABULA" validate --backend cuda --job base
expect_exit2 "3 ranks" "3" "run on 1, 2 or 4 ranks" 3 "$FABULA" validate --quick
expect_exit2 "--steps 0" "steps expects" "got '0'" 1 "$FABULA" validate --steps 0
expect_exit2 "--reference maybe" "validate: --reference" "expected auto, on or off" 1 "$FABULA" validate \
    --reference maybe
expect_exit2 "--reference on, 2 ranks" "reference on" "runs on 1 rank" 2 "$FABULA" validate --reference on
finish
