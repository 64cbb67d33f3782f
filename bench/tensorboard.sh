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

STEPS=30
REPS=2
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
"$PYTHON" - "$WORK" <<'PY'
import statistics, sys
w = sys.argv[1]
def med(name, col):
    return statistics.median(float(l.split()[col]) for l in open(f"{w}/{name}.txt"))
off_s, off_w = med("off", 0), med("off", 1)
on_s, on_w = med("on", 0), med("on", 1)
h_w = med("hist", 1)
print(f"{'setting':44s} {'step_time (s)':>14s} {'step-to-step (s)':>17s} {'vs off':>8s}")
print(f"{'off':44s} {off_s:14.4f} {off_w:17.4f} {'':>8s}")
print(f"{'tensorboard + csv_monitor on (defaults)':44s} {on_s:14.4f} {on_w:17.4f} {100 * (on_w / off_w - 1):+7.2f}%")
print(f"{'tensorboard, histogram_interval 1':44s} {'':14s} {h_w:17.4f} {100 * (h_w / off_w - 1):+7.2f}%")
PY
# the hook alone, on the records of the "on" run, 20 passes
for mode in tb csv both; do
    rm -rf "$WORK/hook"
    printf 'hook alone (%s): ' "$mode"
    "$TBBENCH" "$WORK/on/metrics.jsonl" "$WORK/hook" "$mode" 20
done
