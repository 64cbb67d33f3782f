#!/bin/sh
# What the step monitor costs: the same training run with monitoring off
# (monitor.enabled false; with FABULA_NOTIMERS, also a build configured with
# --disable-phase-timers) and on, interleaved round by round so that a
# change in the machine's load hits both alike, step time side by side.
#
#   bench/monitor.sh [--steps N] [--rounds R] [--ranks P]
#
# Run from the repository top. FABULA names the binary (default ./fabula),
# FABULA_NOTIMERS an optional --disable-phase-timers build, MPIEXEC the
# launcher (default mpiexec), PYTHON a Python 3. The run: the built-in
# default (the smallest step, where the monitor weighs most), at the default
# steps_per_print (10), so the gather and the verdict run at
# steps 1, 10, 20, ... as in any run. Besides the side-by-side wall times
# (which a loaded machine makes noisy) it prints the monitor's own time as
# the runs measure it (monitor_overhead_s of metrics.jsonl: the timer
# handles, the busy-time allreduce, the gather and the verdict), as a share
# of the step. See docs/monitoring.md, "Cost".
set -eu

STEPS=23
ROUNDS=3
RANKS=2
WARMUP=3

usage() { echo "usage: bench/monitor.sh [--steps N] [--rounds R] [--ranks P]"; }
die_usage() { echo "bench/monitor.sh: $1" >&2; usage >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
    --steps | --rounds | --ranks)
        [ $# -ge 2 ] || die_usage "$1 needs a value"
        opt=$1 val=$2
        shift 2
        ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
    case "$val" in '' | *[!0-9]* | 0) die_usage "$opt wants a positive integer, not '$val'" ;; esac
    case "$opt" in
    --steps) STEPS=$val ;;
    --rounds) ROUNDS=$val ;;
    --ranks) RANKS=$val ;;
    esac
done
[ "$STEPS" -gt "$WARMUP" ] || die_usage "--steps must exceed the $WARMUP warm-up steps"

FABULA=${FABULA:-./fabula}
FABULA_NOTIMERS=${FABULA_NOTIMERS:-}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-python3}
[ -f inputs/sample.jsonl ] || { echo "bench/monitor.sh: inputs/sample.jsonl not found: run from the repository top" >&2; exit 2; }
[ -x "$FABULA" ] || { echo "bench/monitor.sh: no fabula binary at '$FABULA' (set FABULA=path)" >&2; exit 2; }
[ -z "$FABULA_NOTIMERS" ] || [ -x "$FABULA_NOTIMERS" ] ||
    { echo "bench/monitor.sh: FABULA_NOTIMERS=$FABULA_NOTIMERS is not executable" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fabula-bench-monitor.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# wall seconds of each step after the warm-up, one a line: differences of
# "elapsed", so the monitor's work after step_time (the gather, the
# verdict) counts too; with a third argument, monitor_overhead_s / wall
STEPS_PY='
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
w = int(sys.argv[2])
for a, b in zip(rows[w - 1:], rows[w:]):
    wall = b["elapsed"] - a["elapsed"]
    print(b["monitor_overhead_s"] / wall if len(sys.argv) > 3 else wall)
'
MEDIAN_PY='
import statistics, sys
v = [float(x) for x in open(sys.argv[1]).read().split()]
print("%.6f" % statistics.median(v))
'

# run NAME BINARY ARGS...: appends the run's step times to $WORK/NAME.all,
# sets MED (median s/step of this run)
run() {
    name=$1 bin=$2
    shift 2
    rm -rf "$WORK/run"
    if ! "$MPIEXEC" -n "$RANKS" "$bin" train --steps "$STEPS" --run-dir "$WORK/run" \
        --set steps_per_print=10 --set run.resume=none "$@" >"$WORK/log" 2>&1; then
        tail -n 30 "$WORK/log"
        echo "bench/monitor.sh: fabula failed (log above)" >&2
        exit 1
    fi
    "$PYTHON" -c "$STEPS_PY" "$WORK/run/metrics.jsonl" "$WARMUP" >"$WORK/one"
    cat "$WORK/one" >>"$WORK/$name.all"
    MED=$("$PYTHON" -c "$MEDIAN_PY" "$WORK/one")
    if [ "$name" = on ]; then
        "$PYTHON" -c "$STEPS_PY" "$WORK/run/metrics.jsonl" "$WARMUP" share >>"$WORK/share.all"
    fi
}

echo "bench/monitor.sh: the built-in default run, $RANKS rank(s), $STEPS steps ($WARMUP warm-up), $ROUNDS round(s); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %14s %14s' round "off s/step" "on s/step"
[ -z "$FABULA_NOTIMERS" ] || printf ' %18s' "no-timers s/step"
printf ' %9s\n' "on - off"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    run off "$FABULA" --set monitor.enabled=false
    off=$MED
    run on "$FABULA"
    on=$MED
    printf '%-6s %14.4f %14.4f' "$r" "$off" "$on"
    if [ -n "$FABULA_NOTIMERS" ]; then
        run notimers "$FABULA_NOTIMERS"
        printf ' %18.4f' "$MED"
    fi
    awk -v a="$off" -v b="$on" 'BEGIN { printf " %+8.2f%%\n", 100 * (b - a) / a }'
    r=$((r + 1))
done
OFF=$("$PYTHON" -c "$MEDIAN_PY" "$WORK/off.all")
ON=$("$PYTHON" -c "$MEDIAN_PY" "$WORK/on.all")
printf '%-6s %14.4f %14.4f' all "$OFF" "$ON"
[ -z "$FABULA_NOTIMERS" ] || printf ' %18.4f' "$("$PYTHON" -c "$MEDIAN_PY" "$WORK/notimers.all")"
awk -v a="$OFF" -v b="$ON" 'BEGIN { printf " %+8.2f%%\n", 100 * (b - a) / a }'
echo "(medians of the wall time per step, from the differences of \"elapsed\", over the steps after the warm-up)"
"$PYTHON" -c '
import statistics, sys
v = [float(x) for x in open(sys.argv[1]).read().split()]
print("the monitor'"'"'s own time (monitor_overhead_s) as a share of the step: median %.4f%%, mean %.4f%%, max %.4f%% "
      "(the max: a gather step)" % (100 * statistics.median(v), 100 * statistics.mean(v), 100 * max(v)))' "$WORK/share.all"
