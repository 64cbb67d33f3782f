#!/bin/sh
# model.recompute (docs/model.md, "Recomputation"): the activation bytes of
# train's start-up "memory bytes:" line and the median step time of none,
# selective and full, on the small MoE of bench/configs/plan_small.json (2
# layers unless LAYERS says otherwise), printed as a table. The modes run
# interleaved, ROUNDS rounds of STEPS steps each; the first 2 steps of every
# run are warm-up and left out. Besides the median step time the table has
# the fastest step and the median forward and backward times of the step
# records (the backward includes the recomputation): on a shared machine
# the fastest step is the least disturbed figure.
#
#   bench/recompute.sh [STEPS] [ROUNDS] [LAYERS]    (defaults 8, 2, 4)
#
# Run from the repository top; FABULA names the binary (default ./fabula),
# MPIEXEC the launcher (default mpiexec), OUT the scratch folder.
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec}
STEPS=${1:-8}
ROUNDS=${2:-2}
LAYERS=${3:-4}
OUT=${OUT:-bench-recompute}
HERE=$(dirname "$0")
[ -x "$FABULA" ] || { echo "bench/recompute.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
    for mode in none selective full; do
        echo "bench/recompute.sh: round $r, $mode, $STEPS steps ..." >&2
        "$MPIEXEC" -n 1 "$FABULA" train "$HERE/configs/plan_small.json" --run-dir "$OUT/$mode-$r" --steps "$STEPS" \
            --set checkpoint.save_interval=-1 --set model.num_hidden_layers="$LAYERS" \
            --set model.recompute="$mode" >"$OUT/$mode-$r.log" 2>&1 ||
            { tail -n 20 "$OUT/$mode-$r.log" >&2; exit 1; }
    done
done
python3 - "$OUT" "$ROUNDS" <<'PYEOF'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for mode in ("none", "selective", "full"):
    acts, times, fwd, bwd = None, [], [], []
    for r in range(1, rounds + 1):
        line = [l for l in open("%s/%s-%d.log" % (out, mode, r)) if "memory bytes:" in l][0]
        acts = int(re.search(r"activations=(\d+)", line).group(1))
        recs = [json.loads(l) for l in open("%s/%s-%d/metrics.jsonl" % (out, mode, r))]
        recs = [x for x in recs if x["step"] > 2]
        times += [x["step_time"] for x in recs]
        fwd += [x["time"]["forward"] for x in recs]
        bwd += [x["time"]["backward"] for x in recs]
    med = statistics.median
    rows[mode] = (acts, med(times), len(times), min(times), med(fwd), med(bwd))
a0, t0, _, b0, _, _ = rows["none"]
print("| recompute | activation bytes | vs none | median step s (steps) | vs none | fastest step s | vs none "
      "| median forward / backward s |")
print("|---|---|---|---|---|---|---|---|")
for mode, (a, t, n, b, f, w) in rows.items():
    print("| %s | %d | %.3f | %.3f (%d) | %.2fx | %.3f | %.2fx | %.3f / %.3f |" % (mode, a, a / a0, t, n, t / t0, b,
          b / b0, f, w))
PYEOF
