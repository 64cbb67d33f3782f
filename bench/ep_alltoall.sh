#!/bin/sh
# Expert-parallel token exchange on the CPU backend: per optimizer step, the
# all-to-all traffic of rank 0 on its ep group (calls, bytes it sends to the
# other ranks, seconds spent waiting in them; metrics.jsonl "ep_alltoall"),
# beside the floor (the same number of plain alltoallv calls moving the same
# bytes, run alone on ep ranks: tests/unit/test_moe_ep floor), and the step
# time with the exchange in 1 chunk vs split into chunks that overlap the
# expert compute (parallel.moe_a2a_chunks). Model: bench/configs/cpu_small.json
# (4 MoE layers of 4 experts, 2048 tokens per rank and step). Medians over
# the steps after 3 warm-up steps.
#
# usage: bench/ep_alltoall.sh [--steps N] [--np P] [--chunks C]   (from the repository top)
# env:   FABULA (default ./fabula), TEST_MOE_EP (default next to FABULA:
#        tests/unit/test_moe_ep; `make tests/unit/test_moe_ep` builds it),
#        MPIEXEC (default mpiexec.mpich)
set -eu
FABULA=${FABULA:-./fabula}
TEST_MOE_EP=${TEST_MOE_EP:-$(dirname "$FABULA")/tests/unit/test_moe_ep}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
STEPS=10
NP=4
CHUNKS=4
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --chunks) CHUNKS=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--np P] [--chunks C]" >&2; exit 2 ;;
    esac
done
[ -x "$TEST_MOE_EP" ] || { echo "$0: $TEST_MOE_EP not built (make tests/unit/test_moe_ep)" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# median over the steps after 3 warm-up steps of a numeric field
median() { # FILE PATTERN (sed group 1 = the number)
    sed -n "s/$2/\\1/p" "$1" | tail -n +4 | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
NUM='\([0-9.e+-]*\)'

run() { # NAME EP CHUNKS
    name=$1; ep=$2; chunks=$3
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} $MPIEXEC -n "$NP" "$FABULA" train --steps "$STEPS" \
        --run-dir "$OUT/$name" --set checkpoint.save_interval=-1 --set parallel.expert_parallel_size="$ep" \
        --set parallel.moe_a2a_chunks="$chunks" bench/configs/cpu_small.json \
        >"$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
    m="$OUT/$name/metrics.jsonl"
    t=$(median "$m" ".*\"step_time\": *$NUM.*")
    if [ "$ep" -eq 1 ]; then
        printf '| %-16s | %2d | %6d | %8.3f | %5s | %9s | %8s | %8s |\n' "$name" "$ep" "$chunks" "$t" - - - -
        return
    fi
    calls=$(median "$m" ".*\"ep_alltoall\": *{\"calls\": *$NUM.*")
    bytes=$(median "$m" ".*\"ep_alltoall\":.*\"bytes\": *$NUM.*")
    secs=$(median "$m" ".*\"ep_alltoall\":.*\"seconds\": *$NUM.*")
    per_call=$(awk -v b="$bytes" -v c="$calls" 'BEGIN {printf "%.0f", b / c}')
    floor=$(OMP_NUM_THREADS=1 $MPIEXEC -n "$ep" "$TEST_MOE_EP" floor "$per_call" "$calls" |
        sed -n 's/.*, \([0-9.]*\) s (slowest rank)/\1/p')
    printf '| %-16s | %2d | %6d | %8.3f | %5.0f | %9.3f | %8.4f | %8.4f |\n' "$name" "$ep" "$chunks" "$t" "$calls" \
        "$(awk -v b="$bytes" 'BEGIN {print b / 1048576}')" "$secs" "$floor"
}

echo "fabula expert-parallel all-to-all: $NP ranks, $STEPS steps, $(nproc) cores," \
     "$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -n 1), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run              | ep | chunks | s/step   | calls | MiB sent  | a2a s    | floor s  |"
echo "|---|---|---|---|---|---|---|---|"
run "ep1" 1 1
for ep in 2 4; do
    [ $((NP % ep)) -eq 0 ] || continue
    run "ep$ep" "$ep" 1
    run "ep$ep chunked" "$ep" "$CHUNKS"
done
