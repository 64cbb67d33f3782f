#!/bin/sh
# `fabula report RUN_DIR` and `--compare` (docs/monitoring.md "The report"):
# on real runs (MoE, validation split, evaluation and checkpoints, 1 and 2
# ranks, one fp16 run resumed once) the page is well-formed XML (and strict
# HTML5 where html5lib is installed), without script or external resource;
# every chart has data; a chart whose field the run lacks is replaced by a
# note naming the field; every summary item equals an independent
# computation from metrics.jsonl and jobs.jsonl (report_check.py: the start
# date, version, command and final status, elapsed over every process);
# the gradient-norm, aux/z-loss, dropped and loss-scale curves and the
# step-time and tokens-per-expert histograms appear with their fields; every
# step chart marks the resume at the step jobs.jsonl names; the config table
# equals config.json, with dp, precision and compute dtype derived; verdict
# rows alike but for their numbers share a row; on a copy with the
# monitoring's fields ("time", "mfu", "ranks", "bottleneck", "rss_bytes")
# the time split, MFU, rank spread and verdict table appear and the summary
# follows them; --compare's table equals the reference; bad input refused:
# a torn jobs.jsonl line skipped with a warning, a directory in its place
# exit 3.
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
# resumed once: 6 steps (checkpoints at 4 and 6), then on to 10 in the same
# directory; fp16 on the CPU backend logs the loss scale
train 1 rs --steps 6 --set fp16.enabled=true
check "fp16 run, 6 steps" '[ $RC -eq 0 ]'
train 1 rs --steps 10 --set fp16.enabled=true
check "fp16 run resumed to 10 steps" '[ $RC -eq 0 ] && [ "$(grep -c "\"event\":\"start\"" "$SCRATCH/rs/jobs.jsonl")" -eq 2 ]'

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

(cd "$SCRATCH" && "$FABULA" report r2) >"$SCRATCH/summary2.txt" 2>&1
RC=$?
check "report r2 (2 ranks): exit 0, the summary and the page (config table: dp 2) equal the reference" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" summary r2/report/summary.md r2 &&
     "$PY" "$CHECK" html r2/report/report.html r2) && grep -q "<th>dp</th><td>2</td>" "$SCRATCH/r2/report/report.html"'

(cd "$SCRATCH" && "$FABULA" report rs) >"$SCRATCH/summarys.txt" 2>&1
RC=$?
cat "$SCRATCH/summarys.txt"
check "report of the resumed run: exit 0 (got $RC)" '[ $RC -eq 0 ]'
check "its summary: start, version, command, jobs and final status as jobs.jsonl says, elapsed over both processes" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" summary rs/report/summary.md rs) &&
     grep -q "^| jobs | 2, resumed from step 6 |" "$SCRATCH/rs/report/summary.md" &&
     grep -q "^| final status | finished at step 10 (exit 0, checkpoint of step 10) at " "$SCRATCH/rs/report/summary.md" &&
     grep -q "^| elapsed (s) | [0-9.]* over 2 processes (the last [0-9.]*) |" "$SCRATCH/rs/report/summary.md" &&
     grep -q "^| command | .*fabula train .*--steps 10 --set fp16.enabled=true |" "$SCRATCH/rs/report/summary.md"'
check "its page: the resume marked at step 6 on every step chart, the loss-scale curve, histograms, config, verdicts" \
    '(cd "$SCRATCH" && "$PY" "$CHECK" html rs/report/report.html rs) &&
     [ "$(grep -c "class=\"mark\" data-x=\"6\"" "$SCRATCH/rs/report/report.html")" -ge 10 ] &&
     grep -q "<th>precision</th><td>fp16, dynamic loss scale from 2^16</td>" "$SCRATCH/rs/report/report.html"'

# the second job's clock above the first's (a short first job, a slow first
# step): only jobs.jsonl's start line tells where it began
cp -r "$SCRATCH/rs" "$SCRATCH/re"
"$PY" - "$SCRATCH/re/metrics.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    if r["step"] > 6:
        r["elapsed"] += 1000
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PYEOF
(cd "$SCRATCH" && "$FABULA" report re --output "$SCRATCH/reout") >"$SCRATCH/re.txt" 2>&1
RC=$?
check "a resume whose clock does not fall: found from jobs.jsonl, marked at 6, elapsed over 2 processes (got $RC)" \
    '[ $RC -eq 0 ] && (cd "$SCRATCH" && "$PY" "$CHECK" summary reout/summary.md re && "$PY" "$CHECK" html reout/report.html re) &&
     grep -q "^| elapsed (s) | [0-9.]* over 2 processes" "$SCRATCH/reout/summary.md"'

# jobs.jsonl damaged: a line torn in the middle (a job killed while writing
# it) is named and skipped; a directory in the file's place is refused
cp -r "$SCRATCH/rs" "$SCRATCH/rt"
"$PY" - "$SCRATCH/rt/jobs.jsonl" <<'PYEOF'
import sys
lines = open(sys.argv[1]).read().splitlines(True)
lines[1] = lines[1][:len(lines[1]) // 2] + "\n"  # the first job's end line, cut short
open(sys.argv[1], "w").write("".join(lines))
PYEOF
(cd "$SCRATCH" && "$FABULA" report rt --output "$SCRATCH/rtout") >"$SCRATCH/rt.txt" 2>&1
RC=$?
check "a torn jobs.jsonl line: exit 0, named (rt/jobs.jsonl:2) and skipped, the other lines read (got $RC)" \
    '[ $RC -eq 0 ] && grep -q "rt/jobs.jsonl:2: not a job record, skipped" "$SCRATCH/rt.txt" &&
     grep -q "^| jobs | 2, resumed from step 6 |" "$SCRATCH/rtout/summary.md" &&
     grep -q "^| final status | finished at step 10 " "$SCRATCH/rtout/summary.md"'
mkdir -p "$SCRATCH/rd"
cp "$SCRATCH/rs/config.json" "$SCRATCH/rs/metrics.jsonl" "$SCRATCH/rd/"
mkdir "$SCRATCH/rd/jobs.jsonl"
(cd "$SCRATCH" && "$FABULA" report rd) >"$SCRATCH/rd.txt" 2>&1
RC=$?
check "jobs.jsonl a directory: exit 3 naming it (got $RC)" \
    '[ $RC -eq 3 ] && grep -q "rd/jobs.jsonl: not a regular file" "$SCRATCH/rd.txt"'

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
    '(cd "$SCRATCH" && "$PY" "$CHECK" html m1out/report.html m1) && grep -q "share 8% &lt;crossed&gt; &amp; more" "$SCRATCH/m1out/report.html"'
check "the verdicts of steps 4 and 8, alike but for their numbers, share one row" \
    'grep -q "<tr><td>1</td><td>communication</td>" "$SCRATCH/m1out/report.html" &&
     grep -q "<tr><td>steps 4–8 (2 gathers)</td><td>compute</td>" "$SCRATCH/m1out/report.html"'

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
        s.pop("dropped", None)  # a dense model's log
        s.pop("bottleneck", None)
        if (k + 1) % 10 == 0:  # a verdict every 10 steps, changing every 50: 120 groups of 5
            v = ("compute", "input")[(k // 50) % 2]
            s["bottleneck"] = {"verdict": v, "evidence": "%s %.1f%% of the step" % (v, k % 97 / 3), "advice": "a"}
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
check "600 verdicts in 120 runs of 5: the last 60 rows, each of 5 gathers, and a note; no \"dropped\": a note" \
    '"$PY" -c "
import sys, xml.etree.ElementTree as E
x = \"{http://www.w3.org/1999/xhtml}\"
r = E.parse(sys.argv[1]).getroot()
t = [t for t in r.iter(x + \"table\") if t.get(\"class\") == \"verdicts\"][0]
cells = [\"\".join(tr[0].itertext()) for tr in list(t)[1:]]
sys.exit(not (len(cells) == 60 and cells[0] == \"steps 3010–3050 (5 gathers)\" and cells[-1] == \"steps 5960–6000 (5 gathers)\"))
" "$SCRATCH/long/report/report.html" && grep -q "The last 60 of 120 rows (600 verdicts)." "$SCRATCH/long/report/report.html" &&
     grep -q "No &quot;dropped&quot; in metrics.jsonl (a dense model)" "$SCRATCH/long/report/report.html"'

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
