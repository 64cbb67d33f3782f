#!/bin/sh
# How ranks wait for MPI when a node has more ranks than cores
# (docs/parallel.md, "Waiting"): the median step time of the same training
# run under FABULA_MPI_WAIT=spin (MPI's own busy-polling) and yield (test
# and sched_yield), for each ZeRO stage, rounds interleaved so the
# machine's other load hits both alike. The losses of the two must agree
# (printed: the last step's loss of each).
#
#   bench/mpi_wait.sh [--ranks N] [--steps N] [--rounds N] [--stages "0 1 2 3"] [--config FILE]
#   (from the repository top; FABULA default ./fabula, MPIEXEC mpiexec.mpich)
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
RANKS=4 STEPS=8 ROUNDS=2 STAGES="0 1 2 3" CFG=bench/configs/plan_small.json
usage() { echo "usage: bench/mpi_wait.sh [--ranks N] [--steps N] [--rounds N] [--stages \"0 1 2 3\"] [--config FILE]"; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    case $1 in
    --ranks) RANKS=$2 ;; --steps) STEPS=$2 ;; --rounds) ROUNDS=$2 ;; --stages) STAGES=$2 ;; --config) CFG=$2 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift 2
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# run.jsonl -> step times after the first 2 steps, one per line
step_times() { sed -n 's/.*"step_time": *\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +3; }

echo "fabula MPI waits, $RANKS ranks on $(getconf _NPROCESSORS_ONLN) cores: $CFG, $STEPS steps x $ROUNDS rounds," \
     "$(date -u '+%Y-%m-%d %H:%M UTC')"
echo "| ZeRO | spin s/step | yield s/step | spin / yield | last loss spin | last loss yield |"
echo "|---|---|---|---|---|---|"
for zero in $STAGES; do
    for r in $(seq "$ROUNDS"); do
        for policy in spin yield; do
            d="$OUT/z${zero}_${policy}_$r"
            FABULA_MPI_WAIT=$policy $MPIEXEC -n "$RANKS" "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$d" \
                --set zero_optimization.stage="$zero" >"$d.log" 2>&1 || { cat "$d.log"; exit 1; }
            step_times "$d/metrics.jsonl" >>"$OUT/z${zero}_$policy.times"
            sed -n 's/.*"loss": *\([0-9.e+-]*\).*/\1/p' "$d/metrics.jsonl" | tail -n 1 >"$OUT/z${zero}_$policy.loss"
        done
    done
    s=$(median <"$OUT/z${zero}_spin.times")
    y=$(median <"$OUT/z${zero}_yield.times")
    printf '| %d | %.4f | %.4f | %.2fx | %s | %s |\n' "$zero" "$s" "$y" "$(awk -v a="$s" -v b="$y" 'BEGIN{print a / b}')" \
        "$(cat "$OUT/z${zero}_spin.loss")" "$(cat "$OUT/z${zero}_yield.loss")"
done
