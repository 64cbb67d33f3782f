# Shared by the expert-parallel tests (ep_invariance.sh, ep_overlap.sh),
# sourced after lib.sh: STEPS steps of the tiny MoE, and the comparison of two
# runs' metrics step by step.
PY=${PYTHON:-python3}
STEPS=20
# no capacity: nothing dropped; the load-balancing and z losses stay on
DROPLESS="--set model.capacity_factor=0"

# train NP NAME ARGS...: trains on NP ranks into $SCRATCH/NAME, output in
# $SCRATCH/NAME.out, status in $RC (its tail shown on failure); under a
# timeout, so a hang fails the test
train() {
    np=$1; name=$2; shift 2
    (cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n "$np" "$FABULA" train --steps $STEPS --run-dir "$SCRATCH/$name" \
        --set checkpoint.save_interval=-1 --set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 \
        --set data.seq_len=64 --set model.hidden_size=64 --set model.intermediate_size=128 "$@") >"$SCRATCH/$name.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}

# compare A B TOL KEY...: both runs have STEPS steps, every loss of B is
# within TOL relative of A's, and the listed metrics keys are equal, step by
# step. The key layer_dropped is the list of the per-layer dropped counts
# (compared where the runs record per-layer figures).
compare() {
    a=$1; b=$2; tol=$3; shift 3
    "$PY" - "$SCRATCH/$a/metrics.jsonl" "$SCRATCH/$b/metrics.jsonl" "$tol" "$STEPS" "$@" <<'PYEOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol, steps = float(sys.argv[3]), int(sys.argv[4])
keys = sys.argv[5:]
if "layer_dropped" in keys:
    if "moe_layers" in a[0]:
        for r in a + b:
            r["layer_dropped"] = [x["dropped"] for x in r["moe_layers"]]
    else:
        keys.remove("layer_dropped")
ok = len(a) == steps and len(b) == steps
for x, y in zip(a, b):
    if abs(x["loss"] - y["loss"]) > tol * abs(x["loss"]):
        print("step %d: loss %.9g vs %.9g" % (x["step"], x["loss"], y["loss"])); ok = False
    for k in keys:
        if x[k] != y[k]:
            print("step %d: %s %s vs %s" % (x["step"], k, x[k], y[k])); ok = False
sys.exit(0 if ok else 1)
PYEOF
}
