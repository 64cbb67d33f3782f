#!/bin/sh
# Data-parallel step time on 2 ranks: overlap_comm on vs off, and ZeRO 0 vs
# 3, on the same model (bench/configs/cpu_small.json) and the same machine,
# in one run. Prints the median step time after 3 warm-up steps.
#
# usage: bench/dp_step.sh [--steps N] [--np P]      (from the repository top)
# env:   FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich)
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
STEPS=12
NP=2
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--np P]" >&2; exit 2 ;;
    esac
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

median_step_time() { # metrics.jsonl -> median step_time (s) after 3 warm-up steps
    sed -n 's/.*"step_time": *\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +4 | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

run() { # NAME ARGS...
    name=$1; shift
    $MPIEXEC -n "$NP" "$FABULA" train bench/configs/cpu_small.json --steps "$STEPS" \
        --run-dir "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
    t=$(median_step_time "$OUT/$name/metrics.jsonl")
    mem=$(sed -n 's/.*memory per rank[^:]*: \(.*\)/\1/p' "$OUT/$name.log" | head -n 1)
    printf '| %-28s | %8.3f | %s |\n' "$name" "$t" "$mem"
}

echo "fabula data-parallel step time: $NP ranks, $STEPS steps, $(nproc) cores," \
     "$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -n 1)"
echo "| configuration                | s/step   | memory per rank |"
echo "|---|---|---|"
run "zero0 overlap=off" --set zero_optimization.stage=0 --set zero_optimization.overlap_comm=false
run "zero0 overlap=on" --set zero_optimization.stage=0 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=200000
run "zero3 overlap=off" --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=false
run "zero3 overlap=on" --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=200000
