# The part of slurm/scaling.sh and pbs/scaling.sh that does not depend on the
# scheduler: options, checks, the batch triple of each point, the tables, and
# the --report and --local modes. Sourced (not run) by those scripts with
# their arguments; on return the arguments left are fabula's, and the
# variables below (RANKS, RPN, SWEEPS, MICRO, GLOBAL, STEPS, OUT, WAIT,
# FABULA, common) describe the sweep. A script with options of its own
# defines sweep_option, which gets the remaining arguments and returns 0
# after setting SWEEP_SHIFT to how many it took (pbs/scaling.sh: --ncpus).
# `here` is the sourcing script's folder (its train script lives there).
RANKS="1 2 4"
RPN=2
SWEEP=both
MICRO=2
GLOBAL=
STEPS=20
OUT=runs/scaling
LOCAL=
WAIT=
REPORT=
die() { echo "scaling.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --ranks-per-node) RPN=$2; shift 2 ;;
    --sweep) SWEEP=$2; shift 2 ;;
    --micro-batch) MICRO=$2; shift 2 ;;
    --global-batch) GLOBAL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --local) LOCAL=1; shift ;;
    --wait) WAIT=1; shift ;;
    --report) REPORT=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) if [ "$(type -t sweep_option)" = function ] && sweep_option "$@"; then shift "$SWEEP_SHIFT"; continue; fi
       die "unknown option '$1' (--help lists them; fabula's own arguments go after --)" ;;
    esac
done
is_count() { case $1 in ''|*[!0-9]*|0*) return 1 ;; esac; }
for n in $RANKS; do is_count "$n" || die "--ranks: '$n' is not a positive rank count"; done
[ -n "$RANKS" ] || die "--ranks: no rank counts"
is_count "$RPN" || die "--ranks-per-node: '$RPN' is not a positive count"
is_count "$MICRO" || die "--micro-batch: '$MICRO' is not a positive count"
is_count "$STEPS" || die "--steps: '$STEPS' is not a positive count"
case $SWEEP in strong) SWEEPS=strong ;; weak) SWEEPS=weak ;; both) SWEEPS="strong weak" ;;
*) die "--sweep must be strong, weak or both, not '$SWEEP'" ;; esac
max=0
for n in $RANKS; do [ "$n" -gt "$max" ] && max=$n; done
GLOBAL=${GLOBAL:-$((MICRO * max))}
is_count "$GLOBAL" || die "--global-batch: '$GLOBAL' is not a positive count"
case " $SWEEPS " in *" strong "*)
    for n in $RANKS; do
        [ $((GLOBAL % (MICRO * n))) -eq 0 ] ||
            die "strong sweep: global batch $GLOBAL is not a multiple of $MICRO (micro-batch) x $n ranks"
    done ;;
esac
case " $* " in *train_batch_size*|*train_micro_batch_size_per_gpu*|*gradient_accumulation_steps*)
    die "the sweep sets the batch sizes: use --micro-batch and --global-batch, not --set of them" ;;
esac
FABULA=$(command -v "${FABULA:-fabula}") || die "no fabula binary (set FABULA or put fabula on PATH)"
export FABULA
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

# batch_args SWEEP N: the batch triple of a point
batch_args() {
    if [ "$1" = strong ]; then
        echo "--set train_batch_size=$GLOBAL --set train_micro_batch_size_per_gpu=$MICRO" \
            "--set gradient_accumulation_steps=$((GLOBAL / (MICRO * $2)))"
    else
        echo "--set train_batch_size=$((MICRO * $2)) --set train_micro_batch_size_per_gpu=$MICRO" \
            "--set gradient_accumulation_steps=1"
    fi
}
common=(--steps "$STEPS" --set checkpoint.save_interval=-1 --set run.resume=none)

report() { # prints the tables; status: the worst of the reports
    status=0
    for s in $SWEEPS; do
        dirs=()
        for n in $RANKS; do dirs+=("$OUT/$s-n$n"); done
        if [ "$s" = strong ]; then echo "## strong scaling: global batch $GLOBAL samples, $STEPS steps"
        else echo "## weak scaling: $MICRO samples per rank, $STEPS steps"; fi
        echo
        "$FABULA" report --scaling "${dirs[@]}" --output "$OUT/$s" || status=$?
        echo
    done
    return "$status"
}

if [ -n "$REPORT" ]; then
    report
    exit $?
fi
for s in $SWEEPS; do
    for n in $RANKS; do
        [ -e "$OUT/$s-n$n" ] && die "$OUT/$s-n$n exists: remove it or choose another --out (a point starts from step 0)"
    done
done

if [ -n "$LOCAL" ]; then
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    for s in $SWEEPS; do
        for n in $RANKS; do
            echo "scaling.sh: $s, $n rank(s): ${MPIEXEC:-mpiexec} -n $n fabula train --run-dir $OUT/$s-n$n" >&2
            # shellcheck disable=SC2046
            ${MPIEXEC:-mpiexec} -n "$n" "$FABULA" train --run-dir "$OUT/$s-n$n" "${common[@]}" \
                $(batch_args "$s" "$n") "$@" >"$OUT/$s-n$n.out" 2>&1 ||
                { rc=$?; tail -n 20 "$OUT/$s-n$n.out" >&2; die "point $s-n$n failed (exit $rc; log $OUT/$s-n$n.out)"; }
        done
    done
    report
    exit $?
fi

