#!/bin/sh
# `fabula report --scaling` (docs/monitoring.md "Scaling table"): real runs on
# 1 and 2 ranks (weak scaling: micro-batch 8 per rank), their table checked
# cell by cell against an independent computation from metrics.jsonl and
# config.json (report_check.py); the time split and memory columns "-" on
# runs without those fields and computed from them on copies that have them;
# scaling.md and scaling.svg written, the SVG well-formed XML with data; bad
# input: no run, not a run directory, a damaged metrics line.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
CHECK="$FB_SRCDIR/tests/e2e/report_check.py"

ARGS="--steps 6 --set checkpoint.save_interval=-1 --set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32"
run_fabula 1 train $ARGS --run-dir "$SCRATCH/r1"
check "1-rank run" '[ $RC -eq 0 ]'
run_fabula 2 train $ARGS --run-dir "$SCRATCH/r2"
check "2-rank run" '[ $RC -eq 0 ]'

# given in reverse order: the table is sorted by ranks
(cd "$SCRATCH" && "$FABULA" report --scaling r2 r1 --output "$SCRATCH/out") >"$SCRATCH/table.md" 2>"$SCRATCH/err.txt"
RC=$?
cat "$SCRATCH/table.md"
check "report --scaling exits 0" '[ $RC -eq 0 ]'
check "the table equals the reference computed from metrics.jsonl (2 rows, time split and memory '-')" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" scaling table.md r1 r2) && [ "$(grep -c "^| [0-9]" "$SCRATCH/table.md")" -eq 2 ] &&
     grep -q "^| 1 | .* | 1.000 | - | - | - | - |$" "$SCRATCH/table.md"'
check "scaling.md holds the same table, says weak scaling and the warm-up rule" \
    'grep -qF "$(sed -n 3p "$SCRATCH/table.md")" "$SCRATCH/out/scaling.md" && grep -q "weak scaling" "$SCRATCH/out/scaling.md" &&
     grep -q "warm-up step" "$SCRATCH/out/scaling.md"'
check "scaling.svg is well-formed XML with the efficiency line and two points" \
    '"$PY" -c "
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot(); ns = \"{http://www.w3.org/2000/svg}\"
d = [p for p in r.iter(ns + \"path\") if p.get(\"class\") == \"data\" and p.get(\"d\")]
c = [p for p in r.iter(ns + \"circle\") if p.get(\"class\") == \"data\"]
sys.exit(not (len(d) == 2 and len(c) == 4))" "$SCRATCH/out/scaling.svg"'

# The fields the monitoring adds ("time", "rss_bytes", "ranks" on gather
# steps), put into copies of the real runs, fill the other columns; the
# copies have no config.json, so the ranks come from "ranks.world".
for r in r1 r2; do
    mkdir -p "$SCRATCH/m$r"
    "$PY" - "$SCRATCH/$r/metrics.jsonl" "$SCRATCH/m$r/metrics.jsonl" "${r#r}" <<'PYEOF'
import json, sys
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    s = json.loads(line)
    t = s["step_time"]
    s["time"] = {"data": 0.05 * t, "forward": 0.3 * t, "backward": 0.4 * t, "comm_wait": 0.1 * t,
                 "optimizer": 0.05 * t, "checkpoint": 0.0, "imbalance": 0.07 * t}
    s["rss_bytes"] = 50000000 + 1000 * s["step"]
    if s["step"] in (1, 6):
        s["ranks"] = {"world": int(sys.argv[3]), "rss_max_bytes": 60000000 + 7 * s["step"]}
    out.write(json.dumps(s) + "\n")
PYEOF
done
(cd "$SCRATCH" && "$FABULA" report --scaling mr1 mr2 --output "$SCRATCH/out2") >"$SCRATCH/table2.md" 2>&1
RC=$?
cat "$SCRATCH/table2.md"
check "with the time split and memory fields: the columns equal the reference" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" scaling table2.md mr1 mr2) && ! grep -q " - |" "$SCRATCH/table2.md"'

(cd "$SCRATCH" && "$FABULA" report --scaling) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "no run directory: exit 2" '[ $RC -eq 2 ] && grep -q "expected RUN_DIR" "$SCRATCH/e.txt"'
(cd "$SCRATCH" && "$FABULA" report --scaling r1 nowhere) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a missing run directory: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "nowhere" "$SCRATCH/e.txt"'
mkdir -p "$SCRATCH/empty"
(cd "$SCRATCH" && "$FABULA" report --scaling empty) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a directory without metrics.jsonl: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "empty/metrics.jsonl" "$SCRATCH/e.txt"'
mkdir -p "$SCRATCH/bad" && cp "$SCRATCH/r1/config.json" "$SCRATCH/bad/" && printf '{"step":1}\nnot json\n{"step":3}\n' >"$SCRATCH/bad/metrics.jsonl"
(cd "$SCRATCH" && "$FABULA" report --scaling bad) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a damaged line in metrics.jsonl: exit 3 naming the line" '[ $RC -eq 3 ] && grep -q "bad/metrics.jsonl:2:" "$SCRATCH/e.txt"'
finish
