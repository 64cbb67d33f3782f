#!/bin/sh
# The cost of the TensorBoard and csv_monitor outputs: step time with them
# off and on (default settings: scalars every step, no histograms), side by
# side, plus the hook's own time per step and the cost of one histogram step.
#
#   bench/tensorboard.sh [--steps N] [--reps R]
#
# Run from the repository top. FABULA names the binary (default ./fabula),
# TBBENCH the hook benchmark (default ./bench/fabula-tboard-bench), MPIEXEC
# the launcher (default mpiexec.mpich). The model is bench/configs/cpu_small.json
# on one rank. docs/monitoring.md records a run.
set -eu

STEPS=15
REPS=3
WARMUP=3
CONFIG=bench/configs/cpu_small.json
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    -h | --help) echo "usage: bench/tensorboard.sh [--steps N] [--reps R]"; exit 0 ;;
    *) echo "bench/tensorboard.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
: "${FABULA:=./fabula}"
: "${TBBENCH:=./bench/fabula-tboard-bench}"
: "${MPIEXEC:=mpiexec.mpich}"
: "${PYTHON:=/usr/bin/python3}"
[ -x "$FABULA" ] || { echo "bench/tensorboard.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fabula-tb-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# median_times RUN_DIR: "step_time wall" medians over the steps after the
# warm-up; wall is the difference of consecutive "elapsed" values, which
# includes the previous step's logging (metrics, TensorBoard, CSV, histograms)
median_times() {
    "$PYTHON" - "$1/metrics.jsonl" "$WARMUP" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
w = int(sys.argv[2])
st = [x["step_time"] for x in r[w:]]
wall = [b["elapsed"] - a["elapsed"] for a, b in zip(r[w - 1:], r[w:])]
print(f"{statistics.median(st):.6f} {statistics.median(wall):.6f}")
PY
}

run() { # NAME ARGS...
    name=$1; shift
    "$MPIEXEC" -n 1 "$FABULA" train "$CONFIG" --steps "$STEPS" --run-dir "$WORK/$name" --set run.resume=none \
        --set steps_per_print=1000 "$@" >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
}

echo "bench/tensorboard.sh: $CONFIG, 1 rank, $STEPS steps x $REPS runs per setting (medians after $WARMUP warm-up steps)"
: >"$WORK/off.txt"
: >"$WORK/on.txt"
: >"$WORK/hist.txt"
i=0
while [ $i -lt "$REPS" ]; do
    run off
    median_times "$WORK/off" >>"$WORK/off.txt"
    run on --set tensorboard.enabled=true --set csv_monitor.enabled=true
    median_times "$WORK/on" >>"$WORK/on.txt"
    run hist --set tensorboard.enabled=true --set tensorboard.histogram_interval=1
    median_times "$WORK/hist" >>"$WORK/hist.txt"
    i=$((i + 1))
done
# the hook alone, on the records of the "on" run, 20 passes
for mode in tb csv both; do
    rm -rf "$WORK/hook"
    "$TBBENCH" "$WORK/on/metrics.jsonl" "$WORK/hook" "$mode" 20 | sed -n "s/^records .* us_per_record \(.*\)/$mode \1/p"
done >"$WORK/hook.txt"
"$TBBENCH" --hist 10000000 | sed -n 's/.* ns_per_element \([0-9.]*\).*/\1/p' >"$WORK/bin.txt"
"$PYTHON" - "$WORK" <<'PY'
import statistics, sys
w = sys.argv[1]
def col(name, c):
    return [float(l.split()[c]) for l in open(f"{w}/{name}.txt")]
# runs of one setting differ when the machine is shared: the fastest run is
# the one least disturbed, so the table shows the minimum and the median
print(f"{'setting':42s} {'step_time min / median (s)':>27s} {'step-to-step min / median (s)':>30s}")
for name, label in (("off", "off"), ("on", "tensorboard + csv_monitor on (defaults)"),
                    ("hist", "tensorboard, histogram_interval 1")):
    s, t = col(name, 0), col(name, 1)
    print(f"{label:42s} {min(s):12.4f} / {statistics.median(s):<12.4f} {min(t):14.4f} / {statistics.median(t):<12.4f}")
off = min(col("off", 1))
print(f"on vs off (fastest runs): {100 * (min(col('on', 1)) / off - 1):+.2f}%; "
      f"a histogram step vs off: {min(col('hist', 1)) - off:+.3f} s")
hook = {l.split()[0]: float(l.split()[1]) for l in open(f"{w}/hook.txt")}
for m, label in (("tb", "tensorboard"), ("csv", "csv_monitor"), ("both", "both")):
    print(f"hook alone, {label}: {hook[m]:.1f} us per step = {100 * hook[m] * 1e-6 / off:.4f}% of the fastest off step")
print(f"histogram binning: {float(open(f'{w}/bin.txt').read()):.1f} ns per element")
PY
