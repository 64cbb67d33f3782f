#!/bin/sh
# The step-time model against measurement (docs/plan.md, "Validation"):
# for each rank count and layout (ZeRO 0-3, ep 1 and 2),
# `fabula plan calibrate --write-machine` on that many ranks right before a
# real training run of bench/configs/plan_small.json (so both see the same
# load on a shared machine; --calibrate-once: one calibration per rank
# count), then `fabula plan time` of the same layout on the calibrated
# machine file, over the same corpus and steps.
#
# --clock cpu (for a machine shared with other jobs): one thread a rank,
# calibrate times its passes in process CPU seconds, and a layout's
# measured step is the CPU seconds per rank of a step: the CPU time of a
# run of --steps steps less that of a run of 3 (start-up cancels), over
# the steps between and the ranks. On an idle machine with a core a rank
# that is the wall time; on a loaded one it leaves out the time other jobs
# held the cores.
# Prints one table row per layout: the measured median step time (after 3
# warm-up steps), the prediction and the error. Timings on a shared machine
# vary: the load average is printed with every row.
#
# usage: bench/plan_validate.sh [--steps N] [--ranks "1 2 4"] [--config FILE] [--calibrate-once] [--clock wall|cpu]
#        (from the repository top)
# env:   FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich)
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
STEPS=10
RANKS="1 2 4"
CFG=bench/configs/plan_small.json
ONCE=0
CLOCK=wall
PY=${PYTHON:-python3}
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --config) CFG=$2; shift 2 ;;
    --calibrate-once) ONCE=1; shift ;;
    --clock) CLOCK=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--ranks \"1 2 4\"] [--config FILE] [--calibrate-once] [--clock wall|cpu]" >&2
       exit 2 ;;
    esac
done
case $CLOCK in
wall) ;;
cpu) OMP_NUM_THREADS=1; OMP_WAIT_POLICY=passive; export OMP_NUM_THREADS OMP_WAIT_POLICY ;;
*) echo "$0: --clock expects wall or cpu" >&2; exit 2 ;;
esac
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

median_step_time() { # metrics.jsonl -> median step_time (s) after 3 warm-up steps
    sed -n 's/.*"step_time": *\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +4 | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

echo "fabula plan time vs measured ($CLOCK clock): $CFG, $STEPS steps, $(getconf _NPROCESSORS_ONLN) cores," \
     "$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -n 1), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "| ranks | ZeRO | ep | measured s/step | predicted s/step | error | load avg |"
echo "|---|---|---|---|---|---|---|"
cpu_seconds() { # COMMAND... -> user + system seconds of it and every process it waited for
    "$PY" -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime + u.ru_stime) if r.returncode == 0 else sys.exit(r.returncode)' "$@"
}

calibrate() { # NP
    $MPIEXEC -n "$1" "$FABULA" plan calibrate "$CFG" --repeats 5 --clock "$CLOCK" --write-machine "$OUT/m$1.json" \
        >"$OUT/cal$1.log" 2>&1 || { cat "$OUT/cal$1.log"; exit 1; }
}
for np in $RANKS; do
    [ "$ONCE" -eq 1 ] && calibrate "$np"
    for ep in 1 2; do
        [ "$ep" -gt "$np" ] && continue
        for zero in 0 1 2 3; do
            [ "$np" -eq 1 ] && [ "$zero" -gt 0 ] && continue
            name="np${np}_z${zero}_ep${ep}"
            [ "$ONCE" -eq 0 ] && calibrate "$np"
            set -- --set zero_optimization.stage="$zero" --set parallel.expert_parallel_size="$ep"
            if [ "$CLOCK" = cpu ]; then
                c1=$(cpu_seconds $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps 3 --run-dir "$OUT/${name}_3" "$@")
                c2=$(cpu_seconds $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$OUT/${name}_n" "$@")
                meas=$(awk -v a="$c1" -v b="$c2" -v s="$STEPS" -v n="$np" 'BEGIN{print (b - a) / (s - 3) / n}')
            else
                $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$OUT/$name" "$@" \
                    >"$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
                meas=$(median_step_time "$OUT/$name/metrics.jsonl")
            fi
            "$FABULA" plan time "$CFG" --world "$np" --machine "$OUT/m$np.json" --jsonl "$(sed -n \
                's/.*"train": *"\([^"]*\)".*/\1/p' "$CFG" | head -n 1)" --steps "$STEPS" --json "$@" \
                >"$OUT/$name.json" 2>"$OUT/$name.err" || { cat "$OUT/$name.err"; exit 1; }
            pred=$(sed -n 's/.*"step_s": *\([0-9.e+-]*\).*/\1/p' "$OUT/$name.json")
            printf '| %d | %d | %d | %.4f | %.4f | %+.1f%% | %s |\n' "$np" "$zero" "$ep" "$meas" "$pred" \
                "$(awk -v p="$pred" -v m="$meas" 'BEGIN{print 100 * (p - m) / m}')" "$(cut -d' ' -f1 /proc/loadavg)"
        done
    done
done
