#!/bin/sh
# One rank's thread scaling on the CPU: fabula training steps of a config at
# 1 and 2 (or more) threads, for one or more builds, each under one or more
# OpenBLAS builds (Debian's pthreads and OpenMP ones, chosen per run with
# LD_LIBRARY_PATH), rounds interleaved so the machine's other load hits every
# variant alike. Prints per run the median tokens/s (steps after the first 2)
# and the process's CPU seconds, then medians with their range.
#
#   bench/cpu_threads.sh [--rounds N] [--steps N] [--threads "1 2"] [--blas "pthread openmp"]
#                        [--config FILE] NAME=FABULA...
set -eu

ROUNDS=3 STEPS=8 THREADS="1 2" BLAS="pthread" CONFIG=bench/configs/cpu_small.json
LIBDIR=/usr/lib/x86_64-linux-gnu
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
PYTHON=${PYTHON:-/usr/bin/python3}

usage() {
    echo "usage: bench/cpu_threads.sh [--rounds N] [--steps N] [--threads \"1 2\"] [--blas \"pthread openmp\"] [--config FILE] NAME=FABULA..."
}
die_usage() { echo "bench/cpu_threads.sh: $1" >&2; usage >&2; exit 2; }

BUILDS=
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds | --steps | --threads | --blas | --config)
        [ $# -ge 2 ] || die_usage "$1 needs a value"
        case "$1" in
        --rounds) ROUNDS=$2 ;; --steps) STEPS=$2 ;; --threads) THREADS=$2 ;; --blas) BLAS=$2 ;; --config) CONFIG=$2 ;;
        esac
        shift 2
        ;;
    -h | --help) usage; exit 0 ;;
    *=*) BUILDS="$BUILDS $1"; shift ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
done
case "$ROUNDS" in '' | *[!0-9]* | 0) die_usage "--rounds wants a positive integer, not '$ROUNDS'" ;; esac
case "$STEPS" in '' | *[!0-9]* | 0 | 1 | 2) die_usage "--steps wants an integer above 2, not '$STEPS'" ;; esac
[ -n "$BUILDS" ] || die_usage "name at least one NAME=FABULA"
[ -f "$CONFIG" ] || die_usage "$CONFIG not found: run from the repository top"
for b in $BUILDS; do [ -x "${b#*=}" ] || die_usage "no fabula binary at '${b#*=}'"; done
for bl in $BLAS; do
    [ -f "$LIBDIR/openblas-$bl/libopenblas.so.0" ] ||
        die_usage "no $LIBDIR/openblas-$bl/libopenblas.so.0 (apt-get install libopenblas0-$bl)"
done
[ -x /usr/bin/time ] || { echo "bench/cpu_threads.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cpu-threads.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "== bench/cpu_threads.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) core(s), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "config $CONFIG, $STEPS steps, OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"
for r in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        for bl in $BLAS; do
            for b in $BUILDS; do
                name=${b%%=*} bin=${b#*=}
                rm -rf "$WORK/run"
                LD_LIBRARY_PATH=$LIBDIR/openblas-$bl OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t \
                    /usr/bin/time -f "CPU %U %S" -o "$WORK/time" "$MPIEXEC" -n 1 "$bin" train --steps "$STEPS" \
                    --run-dir "$WORK/run" "$CONFIG" >"$WORK/log" 2>&1 || { tail "$WORK/log"; exit 1; }
                tps=$("$PYTHON" -c 'import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][2:]
print("%.1f" % statistics.median(x["tokens_per_s"] for x in r))' "$WORK/run/metrics.jsonl")
                cpu=$(awk '/^CPU/ {print $2 + $3}' "$WORK/time")
                echo "round $r threads $t blas $bl $name: $tps tokens/s, $cpu CPU s, load $(cut -d' ' -f1 /proc/loadavg)"
                echo "$name $bl $t $tps $cpu" >>"$WORK/all"
            done
        done
    done
done
echo
echo "build blas threads: median tokens/s [min-max], median CPU s of the run"
awk -f "$(dirname "$0")/median_rounds.awk" "$WORK/all"
