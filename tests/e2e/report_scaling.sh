#!/bin/sh
# `fabula report --scaling` (docs/monitoring.md "Scaling table") on a real
# sweep: slurm/scaling.sh --local, weak scaling on 1 and 2 ranks, 2 repeats
# a point, with a machine file. Its tables checked cell by cell against an
# independent computation from metrics.jsonl, jobs.jsonl, config.json and
# plan_time.json (report_check.py): each point's median tokens/s over its
# repeats with their min-max and spread, efficiency from the medians, the
# time split, memory, the node's ranks x threads / CPUs, every phase's
# min / median / max over ranks, the prediction beside the measurement with
# its error; the trainer's min and median over ranks against its own mean;
# three repeats whose median is not their mean; scaling.svg's throughput
# chart on log2 x / log y axes (positions checked against the logarithms)
# with the repeats' spread, the efficiency chart against its ideal line;
# an oversubscribed sweep (pinned to one CPU) warned of by the sweep and
# flagged by the report; no machine file: the note instead of the column;
# the columns "-" on runs without the fields and computed from them on
# copies that have them; bad input: no run, not a run directory, a damaged
# metrics line, a damaged or foreign plan_time.json.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
CHECK="$FB_SRCDIR/tests/e2e/report_check.py"
export FABULA MPIEXEC

ARGS="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32"
MACHINE="$FB_SRCDIR/inputs/machines/cpu-this.json"
SW="weak-n1-r1 weak-n1-r2 weak-n2-r1 weak-n2-r2"
# the default config's relative corpus path points into the source tree
(cd "$FB_SRCDIR" && timeout 600 slurm/scaling.sh --local --sweep weak --ranks "1 2" --repeats 2 --steps 6 \
    --machine "$MACHINE" --out "$SCRATCH/sw" -- $ARGS) >"$SCRATCH/sweep.md" 2>"$SCRATCH/sweep.err"
RC=$?
cat "$SCRATCH/sweep.md"
[ $RC -eq 0 ] || tail -n 20 "$SCRATCH/sweep.err"
check "the sweep with --repeats 2 --machine: exit 0, a run dir per repeat, each with its prediction" \
    '[ $RC -eq 0 ] && for r in $SW; do [ -s "$SCRATCH/sw/$r/metrics.jsonl" ] && [ -s "$SCRATCH/sw/$r/plan_time.json" ] || exit 1; done'
check "the sweep's tables equal the reference from its 4 runs: 2 points of 2 runs (median, min-max, spread), time over ranks, node, prediction and error" \
    '(cd "$SCRATCH/sw" && "$PY" "$CHECK" scaling ../sweep.md $SW) && [ "$(grep -c "^| [12] | 2 |" "$SCRATCH/sweep.md")" -eq 2 ]'
check "each plan_time.json is plan time of its run's rank count on the machine file" \
    '"$PY" - "$SCRATCH/sw" "$MACHINE" $SW <<"PYEOF"
import json, os, sys
name = json.load(open(sys.argv[2]))["name"]
for r in sys.argv[3:]:
    p = json.load(open(os.path.join(sys.argv[1], r, "plan_time.json")))
    assert p["world"] == int(r.split("-n")[1].split("-")[0]) and p["machine"] == name and p["step_s"] > 0, (r, p)
PYEOF'
# a --disable-phase-timers build has no monitor, hence no "ranks"
grep -q '"time":' "$SCRATCH/sw/weak-n1-r1/metrics.jsonl" &&
check "the trainer gathers every step (steps_per_print 1); min <= median <= max over ranks, on 2 ranks the median is the mean, on 1 all four agree" \
    '"$PY" - "$SCRATCH/sw" $SW <<"PYEOF"
import json, os, sys
for r in sys.argv[2:]:
    lines = [json.loads(l) for l in open(os.path.join(sys.argv[1], r, "metrics.jsonl"))]
    assert all("ranks" in s for s in lines), r
    for s in lines:
        g = s["ranks"]
        for p, mean in g["time_mean"].items():
            lo, med, hi = g["time_min"][p], g["time_median"][p], g["time_max"][p]
            assert lo <= med <= hi, (r, s["step"], p)
            assert abs(med - mean) <= 1e-9 * max(1e-6, abs(mean)), (r, s["step"], p, med, mean)
            assert g["world"] == 2 or lo == med == hi == mean, (r, p)
PYEOF'
check "jobs.jsonl records the node: its ranks, and the CPUs this test may use" \
    '"$PY" - "$SCRATCH/sw" $SW <<"PYEOF"
import json, os, sys
for r in sys.argv[2:]:
    j = json.loads(open(os.path.join(sys.argv[1], r, "jobs.jsonl")).readline())
    assert j["node_ranks"] == j["ranks"] and j["node_cpus"] == len(os.sched_getaffinity(0)) and j["threads"] >= 1, j
PYEOF'
check "scaling.svg: throughput on log2 x / log10 y (the ideal doubling in equal steps, the median at its logarithm), the repeats' min-max bars, efficiency against its ideal line at 1" \
    '"$PY" - "$SCRATCH/sw/weak/scaling.svg" "$SCRATCH/sw" <<"PYEOF"
import json, math, os, re, statistics, sys
import xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
charts = E.parse(sys.argv[1]).getroot().findall(".//" + ns + "svg")  # the two charts inside the file
assert len(charts) == 2, len(charts)
def title(c): return c.find(ns + "text").text
def paths(c): return [[tuple(map(float, p.split())) for p in re.split("[ML] ?", d.get("d")) if p.strip()]
                      for d in c.iter(ns + "path") if d.get("class") == "data"]
assert title(charts[0]).startswith("Throughput") and title(charts[1]).startswith("Parallel efficiency")
meas, ideal, pred = paths(charts[0])
# x: ranks 1 and 2 a log2 step apart on both; the ideal doubles per step
assert len(meas) == len(ideal) == len(pred) == 2 and meas[0][0] < meas[1][0]
def tps(r):
    L = [json.loads(l) for l in open(os.path.join(sys.argv[2], r, "metrics.jsonl"))][1:]
    return sum(s["tokens"] for s in L) / sum(s["step_time"] for s in L)
t1 = statistics.median([tps("weak-n1-r1"), tps("weak-n1-r2")])
t2 = statistics.median([tps("weak-n2-r1"), tps("weak-n2-r2")])
per_decade = (ideal[0][1] - ideal[1][1]) / math.log10(2)  # pixels a decade up, from the ideal line
assert per_decade > 0
# the measured line: its rise in pixels is log10 of the ratio
assert abs((meas[0][1] - meas[1][1]) - per_decade * math.log10(t2 / t1)) < 0.5, (meas, ideal, t1, t2)
bars = [l for l in charts[0].iter(ns + "line") if l.get("class") == "spread"]
assert len(bars) == 2 and all(float(b.get("y1")) != float(b.get("y2")) for b in bars)
eff, one = paths(charts[1])
# the 2-rank point below the ideal line when slower per rank, above it when
# faster: on a loaded 2-core machine either happens (CI saw 1.29)
e2 = t2 / 2 / t1
assert one[0][1] == one[1][1] == eff[0][1], (eff, one)
assert abs(e2 - 1) < 1e-3 or (eff[1][1] > eff[0][1]) == (e2 < 1), (eff, one, e2)
PYEOF'

# three repeats 1x, 1.1x and 1.3x as slow: the point's tokens/s is the
# middle one, not their mean; min-max spans the other two
for k in 1 2 3; do
    mkdir -p "$SCRATCH/rep$k" && cp "$SCRATCH/sw/weak-n1-r1/config.json" "$SCRATCH/sw/weak-n1-r1/jobs.jsonl" "$SCRATCH/rep$k/"
    "$PY" - "$SCRATCH/sw/weak-n1-r1/metrics.jsonl" "$SCRATCH/rep$k/metrics.jsonl" "$k" <<'PYEOF'
import json, sys
f = {"1": 1.0, "2": 1.1, "3": 1.3}[sys.argv[3]]
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        s = json.loads(line)
        s["step_time"] *= f
        out.write(json.dumps(s) + "\n")
PYEOF
done
(cd "$SCRATCH" && "$FABULA" report --scaling rep3 rep1 rep2 sw/weak-n2-r1 --output "$SCRATCH/rep") >"$SCRATCH/rep.md" 2>&1
RC=$?
cat "$SCRATCH/rep.md"
check "three repeats: one row of 3 runs, the median (not the mean) and the min-max, the reference's" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" scaling rep.md rep3 rep1 rep2 sw/weak-n2-r1) &&
     "$PY" - "$SCRATCH/rep.md" "$SCRATCH" <<"PYEOF"
import json, os, sys
def tps(r):
    L = [json.loads(l) for l in open(os.path.join(sys.argv[2], r, "metrics.jsonl"))][1:]
    return sum(s["tokens"] for s in L) / sum(s["step_time"] for s in L)
t = sorted(tps("rep%d" % k) for k in (1, 2, 3))
row = [l for l in open(sys.argv[1]) if l.startswith("| 1 | 3 |")][0].split("|")
assert row[3].strip() == "%.1f" % t[1] != "%.1f" % (sum(t) / 3) and row[4].strip() == "%.1f-%.1f" % (t[0], t[2]), row
PYEOF'

# pinned to one CPU, the 2-rank point has two ranks on one CPU
CPU=$("$PY" -c "import os; print(min(os.sched_getaffinity(0)))")
(cd "$FB_SRCDIR" && timeout 600 taskset -c "$CPU" slurm/scaling.sh --local --sweep weak --ranks "1 2" --steps 3 \
    --out "$SCRATCH/one" -- $ARGS) >"$SCRATCH/one.md" 2>"$SCRATCH/one.err"
RC=$?
cat "$SCRATCH/one.md"
check "oversubscribed: the sweep warns of the 2-rank point alone, the report flags its row and warns, as the reference" \
    '[ $RC -eq 0 ] && grep -q "warning: point weak-n2 is oversubscribed: 2 rank(s) x 1 thread(s) on 1 CPU(s)" "$SCRATCH/one.err" &&
     ! grep -q "point weak-n1 is oversubscribed" "$SCRATCH/one.err" &&
     grep -q "^| 2 | .* | 2 x 1 / 1 oversubscribed |$" "$SCRATCH/one.md" && grep -q "^| 1 | .* | 1 x 1 / 1 |$" "$SCRATCH/one.md" &&
     grep -q "^warning: the 2-rank point is oversubscribed" "$SCRATCH/one.md" &&
     (cd "$SCRATCH/one" && "$PY" "$CHECK" scaling ../one.md weak-n1 weak-n2)'

# single runs without plan_time.json: no prediction column, a note
for r in 1 2; do
    mkdir -p "$SCRATCH/r$r" && cp "$SCRATCH/sw/weak-n$r-r1/config.json" "$SCRATCH/sw/weak-n$r-r1/metrics.jsonl" \
        "$SCRATCH/sw/weak-n$r-r1/jobs.jsonl" "$SCRATCH/r$r/"
done
# given in reverse order: the table is sorted by ranks
(cd "$SCRATCH" && "$FABULA" report --scaling r2 r1 --output "$SCRATCH/out") >"$SCRATCH/table.md" 2>"$SCRATCH/err.txt"
RC=$?
cat "$SCRATCH/table.md"
check "report --scaling exits 0" '[ $RC -eq 0 ]'
# the time split and memory columns: numbers where the build times phases
if grep -q '"time":' "$SCRATCH/r1/metrics.jsonl"; then ROW1='^| 1 | 1 | .* | 1.000 | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | 1 x [0-9]* / [0-9]*\( oversubscribed\)\{0,1\} |$'
else ROW1='^| 1 | 1 | .* | 1.000 | - | - | - | - | 1 x [0-9]* / [0-9]*\( oversubscribed\)\{0,1\} |$'; fi
check "the table equals the reference computed from metrics.jsonl (2 rows, the smallest point's efficiency 1), no prediction: the note" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" scaling table.md r1 r2) && [ "$(grep -c "^| [0-9] | 1 |" "$SCRATCH/table.md")" -eq 2 ] &&
     grep -q "$ROW1" "$SCRATCH/table.md" && grep -q "^No prediction" "$SCRATCH/table.md" &&
     ! grep -q "predicted step" "$SCRATCH/table.md"'
check "scaling.md holds the same table, says weak scaling and the warm-up rule" \
    'grep -qF "$(sed -n 3p "$SCRATCH/table.md")" "$SCRATCH/out/scaling.md" && grep -q "weak scaling" "$SCRATCH/out/scaling.md" &&
     grep -q "warm-up step" "$SCRATCH/out/scaling.md"'
check "scaling.svg is well-formed XML: two charts, no prediction line" \
    '"$PY" -c "
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot(); ns = \"{http://www.w3.org/2000/svg}\"
d = [p for p in r.iter(ns + \"path\") if p.get(\"class\") == \"data\" and p.get(\"d\")]
c = [p for p in r.iter(ns + \"circle\") if p.get(\"class\") == \"data\"]
sys.exit(not (len(d) == 4 and len(c) == 8))" "$SCRATCH/out/scaling.svg"'

# a third point, 4 ranks (a copy of the 2-rank run saying 4 ranks and
# twice the tokens): on a log2 axis 1, 2 and 4 ranks lie equally apart
mkdir -p "$SCRATCH/q4"
"$PY" - "$SCRATCH/r2/metrics.jsonl" "$SCRATCH/q4/metrics.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        s = json.loads(line)
        s["tokens"] *= 2
        s.setdefault("ranks", {})["world"] = 4
        out.write(json.dumps(s) + "\n")
PYEOF
(cd "$SCRATCH" && "$FABULA" report --scaling r1 r2 q4 --output "$SCRATCH/q") >"$SCRATCH/q.md" 2>&1
RC=$?
check "three points on a log2 x axis: 1, 2 and 4 ranks equally apart, ticks at 1, 2, 4" \
    '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/q/scaling.svg" <<"PYEOF"
import re, sys
import xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
for c in E.parse(sys.argv[1]).getroot().findall(".//" + ns + "svg"):
    d = [p.get("d") for p in c.iter(ns + "path") if p.get("class") == "data"][0]
    x = [float(p.split()[0]) for p in re.split("[ML] ?", d) if p.strip()]
    assert len(x) == 3 and abs((x[1] - x[0]) - (x[2] - x[1])) < 0.2, x
    ticks = [t.text for t in c.iter(ns + "text") if t.get("text-anchor") == "middle" and t.text[0].isdigit()]
    assert ticks == ["1", "2", "4"], ticks
PYEOF'

# a plan_time.json that is not plan time's output, or is another layout's
cp -r "$SCRATCH/r1" "$SCRATCH/p1" && echo '{"step_s": 0.1,' >"$SCRATCH/p1/plan_time.json"
(cd "$SCRATCH" && "$FABULA" report --scaling p1 --output "$SCRATCH/pout") >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a damaged plan_time.json: exit 3 naming it" '[ $RC -eq 3 ] && grep -q "p1/plan_time.json" "$SCRATCH/e.txt"'
cp "$SCRATCH/sw/weak-n2-r1/plan_time.json" "$SCRATCH/p1/plan_time.json"
(cd "$SCRATCH" && "$FABULA" report --scaling p1 --output "$SCRATCH/pout") >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a plan_time.json of 2 ranks beside a 1-rank run: exit 3 saying so" \
    '[ $RC -eq 3 ] && grep -q "p1/plan_time.json: a prediction for 2 ranks, but the run has 1" "$SCRATCH/e.txt"'

# Copies of the real runs without the monitoring's fields ("time",
# "rss_bytes", "ranks"; a --disable-phase-timers build writes none) and
# without jobs.jsonl: those columns "-", the ranks from config.json.
for r in r1 r2; do
    mkdir -p "$SCRATCH/b$r" && cp "$SCRATCH/$r/config.json" "$SCRATCH/b$r/"
    "$PY" - "$SCRATCH/$r/metrics.jsonl" "$SCRATCH/b$r/metrics.jsonl" <<'PYEOF'
import json, sys
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    s = json.loads(line)
    for k in ("time", "rss_bytes", "ranks"):
        s.pop(k, None)
    out.write(json.dumps(s) + "\n")
PYEOF
done
(cd "$SCRATCH" && "$FABULA" report --scaling br1 br2 --output "$SCRATCH/out2") >"$SCRATCH/table2.md" 2>&1
RC=$?
cat "$SCRATCH/table2.md"
check "without the monitoring's fields and jobs.jsonl: those columns \"-\", the rest equal to the reference" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" scaling table2.md br1 br2) &&
     [ "$(grep -c "^| [12] | 1 | .* | - | - | - | - | - |$" "$SCRATCH/table2.md")" -eq 2 ] &&
     [ "$(grep -c "^| [12] | - | - | - | - | - | - | - |$" "$SCRATCH/table2.md")" -eq 2 ]'

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
# a run killed while writing a line: the cut last line is skipped with a warning
mkdir -p "$SCRATCH/cut" && cp "$SCRATCH/r1/config.json" "$SCRATCH/cut/"
head -n 5 "$SCRATCH/r1/metrics.jsonl" >"$SCRATCH/cut/metrics.jsonl"
sed -n 6p "$SCRATCH/r1/metrics.jsonl" | head -c 40 >>"$SCRATCH/cut/metrics.jsonl"
(cd "$SCRATCH" && "$FABULA" report --scaling cut --output "$SCRATCH/cutout") >"$SCRATCH/cut.md" 2>"$SCRATCH/e.txt"; RC=$?
check "a cut last line: exit 0, a warning naming line 6, the 5 whole lines used" \
    '[ $RC -eq 0 ] && grep -q "cut/metrics.jsonl:6: an unfinished last line, skipped" "$SCRATCH/e.txt" &&
     grep -q "| 1 | cut | 4 |" "$SCRATCH/cutout/scaling.md"'
finish
