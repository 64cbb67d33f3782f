#!/bin/sh
# `fabula report RUN_DIR` and `--compare` (docs/monitoring.md "The report"):
# on real runs (MoE, validation split, evaluation and checkpoints, 1 and 2
# ranks) the page is well-formed XML (and strict HTML5 where html5lib is
# installed), without script or external resource; every chart has data; a
# chart whose field the run lacks is replaced by a note naming the field;
# every summary item equals an independent computation from metrics.jsonl
# (report_check.py); on a copy with the monitoring's fields ("time", "mfu",
# "ranks", "bottleneck", "rss_bytes") the time split, MFU, rank spread and
# verdict table appear and the summary follows them; --compare's table
# equals the reference; bad input refused.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
CHECK="$FB_SRCDIR/tests/e2e/report_check.py"

"$PY" - "$FB_SRCDIR/inputs/sample.jsonl" "$SCRATCH/small.jsonl" <<'PYEOF'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as out:
    for k in range(3):
        for d in src:
            out.write(json.dumps({"title": "%s %d" % (d["title"], k), "genre": d["genre"],
                                  "content": d["content"][k * 1200:(k + 1) * 1200]}, ensure_ascii=False) + "\n")
PYEOF
run_fabula 1 prep -q --max-seq-len 128 --overlap 16 --min-seq-len 16 --valid-fraction 0.34 --seed 7 \
    --output "$SCRATCH/split.h5" "$SCRATCH/small.jsonl"
check "prep" '[ $RC -eq 0 ]'
train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps 8 --run-dir "$SCRATCH/$name" --set data.corpus="$SCRATCH/split.h5" \
        --set data.tokenizer=bytes --set data.seq_len=128 --set train_micro_batch_size_per_gpu=2 \
        --set gradient_accumulation_steps=2 --set run.eval_interval=4 --set run.eval_samples=40 \
        --set checkpoint.save_interval=4 --set checkpoint.keep_last=0 --set steps_per_print=4 \
        --set model.hidden_size=32 --set model.intermediate_size=64 "$@"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/out.txt"
}
train 1 r1
check "1-rank run" '[ $RC -eq 0 ]'
train 2 r2
check "2-rank run" '[ $RC -eq 0 ]'

(cd "$SCRATCH" && "$FABULA" report r1) >"$SCRATCH/summary.txt" 2>"$SCRATCH/err.txt"
RC=$?
cat "$SCRATCH/summary.txt"
check "report r1: exit 0, report.html and summary.md in r1/report" \
    '[ $RC -eq 0 ] && [ -s "$SCRATCH/r1/report/report.html" ] && cmp -s "$SCRATCH/r1/report/summary.md" "$SCRATCH/summary.txt"'
check "every summary item equals the reference computed from metrics.jsonl" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" summary summary.txt r1)'
check "the page: XML (and HTML5), no script, every chart with data, notes for the fields the run lacks" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" html r1/report/report.html r1)'
check "the page has the expert-load and genre-routing heatmaps, the checkpoints and the layout" \
    'grep -q "MoE layer 1: share of each genre" "$SCRATCH/r1/report/report.html" &&
     grep -q "step-00000008.h5</td><td>[0-9.]*</td><td>latest" "$SCRATCH/r1/report/report.html" &&
     grep -q "<th>ranks</th><td>1</td>" "$SCRATCH/r1/report/report.html"'

# The monitoring's fields (docs/run-dir.md), put into a copy of the real run
# with the values a run would have, so that their charts must appear.
mkdir -p "$SCRATCH/m1"
cp "$SCRATCH/r1/config.json" "$SCRATCH/m1/"
cp -r "$SCRATCH/r1/checkpoints" "$SCRATCH/m1/"
"$PY" - "$SCRATCH/r1/metrics.jsonl" "$SCRATCH/m1/metrics.jsonl" <<'PYEOF'
import json, sys
verdicts = ["compute", "communication", "imbalance", "input"]
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    s = json.loads(line)
    t, k = s["step_time"], s["step"]
    s["time"] = {"data": 0.05 * t, "forward": 0.3 * t, "backward": 0.4 * t, "comm_wait": 0.1 * t,
                 "optimizer": 0.05 * t, "checkpoint": 0.0, "imbalance": 0.1 * t}
    s["model_flops_per_s"] = 1e9 + k
    s["mfu"] = 0.01 * k
    s["rss_bytes"] = 50000000 + 1000 * k
    if k in (1, 4, 8):
        s["ranks"] = {"world": 1, "step_time_min": 0.8 * t, "step_time_mean": 0.9 * t, "step_time_max": t,
                      "slowest_rank": 0, "rss_max_bytes": 60000000 + k}
        s["bottleneck"] = {"verdict": verdicts[k % 4], "evidence": "share %d%% <crossed> & more" % k,
                           "advice": "raise \"reduce_bucket_size\""}
    out.write(json.dumps(s) + "\n")
PYEOF
(cd "$SCRATCH" && "$FABULA" report m1 --output "$SCRATCH/m1out") >"$SCRATCH/msummary.txt" 2>&1
RC=$?
check "with the monitoring's fields: exit 0, --output honoured" '[ $RC -eq 0 ] && [ -s "$SCRATCH/m1out/report.html" ]'
check "their summary items (MFU, FLOP/s, time split, memory, verdicts) equal the reference" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" summary m1out/summary.md m1) && grep -q "^| time split | data 5.0%" "$SCRATCH/m1out/summary.md" &&
     grep -q "^| bottleneck | compute at step 8 (of 3 verdicts" "$SCRATCH/m1out/summary.md"'
check "the time split (stacked), MFU and rank-spread charts and the verdict table appear, escaped" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" html m1out/report.html m1) && grep -q "share 4% &lt;crossed&gt; &amp; more" "$SCRATCH/m1out/report.html"'

(cd "$SCRATCH" && "$FABULA" report --compare r1 r2 --output "$SCRATCH/cmp") >"$SCRATCH/cmp.txt" 2>&1
RC=$?
cat "$SCRATCH/cmp.txt"
check "--compare r1 r2: exit 0, its table equals the reference" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" compare cmp/compare.md r1 r2)'
check "--compare's page: XML, every chart with data and both runs in the legends" \
    '"$PY" -c "
import sys, xml.etree.ElementTree as E
ns = \"{http://www.w3.org/2000/svg}\"
r = E.parse(sys.argv[1]).getroot()
svgs = list(r.iter(ns + \"svg\"))
ok = len(svgs) >= 4 and all(any(e.get(\"class\") == \"data\" for e in s.iter()) for s in svgs)
legend = [t.text for t in r.iter(ns + \"text\")]
sys.exit(not (ok and \"r1\" in legend and \"r2\" in legend))" "$SCRATCH/cmp/compare.html"'

# a long run: 6000 records (the real run's, renumbered); the page stays
# small: every line chart at most ~2000 points, heatmaps at most 120 columns
mkdir -p "$SCRATCH/long"
"$PY" - "$SCRATCH/r1/metrics.jsonl" "$SCRATCH/long/metrics.jsonl" <<'PYEOF'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as out:
    for k in range(6000):
        s = dict(src[k % len(src)])
        s["step"] = k + 1
        out.write(json.dumps(s) + "\n")
PYEOF
(cd "$SCRATCH" && "$FABULA" report long) >"$SCRATCH/long.txt" 2>&1; RC=$?
check "6000 steps: exit 0, a page under 1.5 MB whose paths have at most 2001 points" \
    '[ $RC -eq 0 ] && [ "$(wc -c <"$SCRATCH/long/report/report.html")" -lt 1500000 ] && "$PY" -c "
import sys, xml.etree.ElementTree as E
ns = \"{http://www.w3.org/2000/svg}\"
r = E.parse(sys.argv[1]).getroot()
n = [p.get(\"d\").count(\"L\") + 1 for p in r.iter(ns + \"path\") if p.get(\"class\") == \"data\" and p.get(\"fill\") == \"none\"]
sys.exit(not (n and max(n) <= 2001 and max(n) >= 1000))" "$SCRATCH/long/report/report.html"'

(cd "$SCRATCH" && "$FABULA" report nowhere) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "a missing run directory: exit 4" '[ $RC -eq 4 ] && grep -q "nowhere" "$SCRATCH/e.txt"'
(cd "$SCRATCH" && "$FABULA" report r1 r2) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "two run directories without --compare: exit 2" '[ $RC -eq 2 ] && grep -q "expected one RUN_DIR" "$SCRATCH/e.txt"'
(cd "$SCRATCH" && "$FABULA" report --compare r1) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "--compare with one run: exit 2" '[ $RC -eq 2 ] && grep -q "at least two" "$SCRATCH/e.txt"'
(cd "$SCRATCH" && "$FABULA" report --compare --scaling r1 r2) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "--compare with --scaling: exit 2" '[ $RC -eq 2 ]'
(cd "$SCRATCH" && "$FABULA" report --frobnicate r1) >"$SCRATCH/e.txt" 2>&1; RC=$?
check "an unknown option: exit 2" '[ $RC -eq 2 ] && grep -q "frobnicate" "$SCRATCH/e.txt"'
"$FABULA" report --help >"$SCRATCH/e.txt" 2>&1; RC=$?
check "--help: exit 0" '[ $RC -eq 0 ] && grep -q "usage: fabula report RUN_DIR" "$SCRATCH/e.txt"'
# records fabula never writes: a step below 1, one past 2^53, one that goes
# back; each named by its line, skipped, the summary as without them
mkdir -p "$SCRATCH/bad"
cp "$SCRATCH/r1/config.json" "$SCRATCH/bad/"
"$PY" - "$SCRATCH/r1/metrics.jsonl" "$SCRATCH/bad/metrics.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
r = json.loads(lines[2])
bad = []
for step in (-5, 1e300, 2):
    b = dict(r)
    b["step"] = step
    bad.append(json.dumps(b))
open(sys.argv[2], "w").write("\n".join(lines[:4] + bad + lines[4:]) + "\n")
PYEOF
(cd "$SCRATCH" && "$FABULA" report bad --output "$SCRATCH/badout") >"$SCRATCH/bad.txt" 2>&1
RC=$?
check "bad steps (-5, 1e300, a step that goes back): exit 0, each named by its line and skipped (got $RC)" \
    '[ $RC -eq 0 ] && grep -q "bad/metrics.jsonl:5: \"step\" -5 is out of range" "$SCRATCH/bad.txt" &&
     grep -q "bad/metrics.jsonl:6: \"step\" is not a whole number" "$SCRATCH/bad.txt" &&
     grep -q "bad/metrics.jsonl:7: \"step\" 2 does not follow the step before it, 4" "$SCRATCH/bad.txt" &&
     grep -q "^| steps | 8 records, steps 1 to 8" "$SCRATCH/badout/summary.md"'
finish
