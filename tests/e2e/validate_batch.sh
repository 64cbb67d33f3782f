#!/bin/sh
# slurm/validate.sbatch and pbs/validate.pbs (docs/batch.md) run outside a
# scheduler with the environment each would set: 2 ranks (1 and 4 the same
# way), the site's options passed on (--quick --job base), the report in
# validate-JOBID/ with the node and rank count in its note, the exit status
# fabula validate's; a world of 3 ranks is refused with exit 2 before any
# launch.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
mkdir -p "$SCRATCH/sub"
mkdir -p "$SCRATCH/sub/validation"
cp -r "$FB_SRCDIR/inputs" "$SCRATCH/sub/"
# the curves only: a copy of the tree's Makemodule.am files would be scanned by tests/layering.py
cp -r "$FB_SRCDIR/validation/curves" "$SCRATCH/sub/validation/"

(cd "$SCRATCH/sub" && FABULA="$FABULA" SLURM_JOB_ID=4242 SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1 \
    SLURM_JOB_NODELIST=vm timeout 600 bash "$FB_SRCDIR/slurm/validate.sbatch" --quick --job base) \
    >"$SCRATCH/slurm.txt" 2>&1
RC=$?
tail -n 5 "$SCRATCH/slurm.txt"
check "validate.sbatch on 2 ranks: exit 0, PASS, the report in validate-4242/ noting 1 node, 2 ranks, Slurm job 4242" \
    '[ $RC -eq 0 ] && grep -q "^fabula validate: PASS" "$SCRATCH/slurm.txt" &&
     "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); e = r[\"environment\"]
assert r[\"verdict\"] == \"PASS\" and r[\"quick\"] and [j[\"name\"] for j in r[\"jobs\"]] == [\"base\"]
assert e[\"ranks\"] == 2 and e[\"note\"] == \"1 node(s), 2 rank(s), mpiexec, Slurm job 4242\", e" \
         "$SCRATCH/sub/validate-4242/validate.json" && [ -s "$SCRATCH/sub/validate-4242/validate.md" ] &&
     grep -q "fabula validate exited 0; report in validate-4242/" "$SCRATCH/slurm.txt"'

(cd "$SCRATCH/sub" && FABULA="$FABULA" SLURM_JOB_ID=4243 SLURM_NTASKS=3 timeout 60 \
    bash "$FB_SRCDIR/slurm/validate.sbatch" --quick) >"$SCRATCH/slurm3.txt" 2>&1
RC=$?
check "validate.sbatch on 3 ranks: exit 2, saying 1, 2 or 4, nothing run" \
    '[ $RC -eq 2 ] && grep -q "run on 1, 2 or 4 ranks, not 3" "$SCRATCH/slurm3.txt" && [ ! -e "$SCRATCH/sub/validate-4243" ]'

printf 'localhost\nlocalhost\n' >"$SCRATCH/nodes"
(cd "$SCRATCH" && FABULA="$FABULA" PBS_O_WORKDIR="$SCRATCH/sub" PBS_NODEFILE="$SCRATCH/nodes" \
    PBS_JOBID=77.server FABULA_ARGS="--quick --job fp16" timeout 600 bash "$FB_SRCDIR/pbs/validate.pbs") \
    >"$SCRATCH/pbs.txt" 2>&1
RC=$?
tail -n 5 "$SCRATCH/pbs.txt"
check "validate.pbs on 2 ranks: exit 0, PASS, the report in validate-77/ noting 1 node, 2 ranks, PBS job 77" \
    '[ $RC -eq 0 ] && grep -q "^fabula validate: PASS" "$SCRATCH/pbs.txt" &&
     "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); e = r[\"environment\"]
assert r[\"verdict\"] == \"PASS\" and [j[\"name\"] for j in r[\"jobs\"]] == [\"fp16\"]
assert e[\"ranks\"] == 2 and e[\"note\"] == \"1 node(s), 2 rank(s), mpiexec, PBS job 77\", e" \
         "$SCRATCH/sub/validate-77/validate.json"'

# 1 rank where the curves are but validation/check_curve.py is not (as from a
# directory of one's own with an installed fabula, whose copy of the
# reference sits in PKGDATADIR): the reference runs from the installed copy,
# or is not run, saying why; the job passes either way (it used to FAIL on
# the reference script it could not open)
(cd "$SCRATCH/sub" && timeout 600 $MPIEXEC -n 1 "$FABULA" validate --quick --job base --run-dir run1) \
    >"$SCRATCH/one.txt" 2>&1
RC=$?
grep "reference" "$SCRATCH/one.txt"
check "1 rank away from the source tree: PASS, the reference run from the installed copy or not run, saying why" \
    '[ $RC -eq 0 ] && grep -q "^fabula validate: PASS" "$SCRATCH/one.txt" &&
     grep -q "reference: \(not run (\|this run.s first 20 losses .*PASS\)" "$SCRATCH/one.txt"'

# a FAIL comes back as the job's exit status
mkdir -p "$SCRATCH/sub/bad/fp16"
cp "$FB_SRCDIR/validation/curves/fp16/"*.json "$SCRATCH/sub/bad/fp16/"
"$PY" -c "import json, sys; c = json.load(open(sys.argv[1])); c['records'][2]['loss'] += 1e-3; json.dump(c, open(sys.argv[1], 'w'))" \
    "$SCRATCH/sub/bad/fp16/cpu16-np2.json"
(cd "$SCRATCH" && FABULA="$FABULA" PBS_O_WORKDIR="$SCRATCH/sub" PBS_NODEFILE="$SCRATCH/nodes" \
    PBS_JOBID=78.server FABULA_ARGS="--quick --job fp16 --curves-dir bad" timeout 600 bash "$FB_SRCDIR/pbs/validate.pbs") \
    >"$SCRATCH/pbs2.txt" 2>&1
RC=$?
check "validate.pbs with a curve 1e-3 off: exit 6, the FAIL in its report" \
    '[ $RC -eq 6 ] && grep -q "fabula validate exited 6" "$SCRATCH/pbs2.txt" &&
     grep -q "\"verdict\": \"FAIL\"" "$SCRATCH/sub/validate-78/validate.json"'
finish
