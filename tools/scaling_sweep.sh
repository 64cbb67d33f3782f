# The part of slurm/scaling.sh and pbs/scaling.sh that does not depend on the
# scheduler: options, checks, the batch triple of each point, the tables, and
# the --report and --local modes. Sourced (not run) by those scripts with
# their arguments; on return the arguments left are fabula's, and the
# variables below (RANKS, RPN, SWEEPS, MICRO, GLOBAL, STEPS, REPEATS,
# MACHINE, OUT, WAIT, FABULA, common) describe the sweep; run_names S N
# lists a point's run directories (one per repeat) and report_args the
# options that repeat the sweep's --report. A script with options of its own
# defines sweep_option, which gets the remaining arguments and returns 0
# after setting SWEEP_SHIFT to how many it took (pbs/scaling.sh: --ncpus).
# `here` is the sourcing script's folder (its train script lives there).
RANKS="1 2 4"
RPN=2
SWEEP=both
MICRO=2
GLOBAL=
STEPS=20
REPEATS=1
MACHINE=
OUT=runs/scaling
LOCAL=
WAIT=
REPORT=
die() { echo "scaling.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --ranks|--ranks-per-node|--sweep|--micro-batch|--global-batch|--steps|--repeats|--machine|--out)
        [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --ranks-per-node) RPN=$2; shift 2 ;;
    --sweep) SWEEP=$2; shift 2 ;;
    --micro-batch) MICRO=$2; shift 2 ;;
    --global-batch) GLOBAL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --machine) MACHINE=$2; shift 2 ;;
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
is_count "$REPEATS" || die "--repeats: '$REPEATS' is not a positive count"
if [ -n "$MACHINE" ]; then
    [ -f "$MACHINE" ] && [ -r "$MACHINE" ] || die "--machine: cannot read the machine file '$MACHINE'"
    MACHINE=$(cd "$(dirname "$MACHINE")" && pwd)/$(basename "$MACHINE")
fi
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
# steps_per_print 1: every step gathers every rank's phase times, so the
# spread over ranks is an average over all measured steps, not one or two
common=(--steps "$STEPS" --set checkpoint.save_interval=-1 --set run.resume=none --set steps_per_print=1)

# run_names SWEEP N: the run directories of a point, one per repeat
run_names() {
    if [ "$REPEATS" -eq 1 ]; then echo "$1-n$2"; return; fi
    for k in $(seq 1 "$REPEATS"); do echo "$1-n$2-r$k"; done
}

# the options of a --report run that reads this sweep back
report_args() {
    printf '%q ' --report --out "$OUT" --ranks "$RANKS" --sweep "$SWEEP" --micro-batch "$MICRO" \
        --global-batch "$GLOBAL" --steps "$STEPS" --repeats "$REPEATS"
    [ -z "$MACHINE" ] || printf '%q ' --machine "$MACHINE"
}

# predict DIR N: `fabula plan time` of the point's config and rank count on
# the machine file, beside the run (DIR/plan_time.json), for the report
predict() {
    "$FABULA" plan time "$1/config.json" --world "$2" --machine "$MACHINE" --json >"$1/plan_time.json.tmp" \
        2>"$1/plan_time.err" ||
        { rc=$?; cat "$1/plan_time.err" >&2; rm -f "$1/plan_time.json.tmp"
          die "fabula plan time for $1 failed (exit $rc)"; }
    mv "$1/plan_time.json.tmp" "$1/plan_time.json" && rm -f "$1/plan_time.err" || die "cannot write $1/plan_time.json"
}

report() { # prints the tables; status: the worst of the reports
    status=0
    for s in $SWEEPS; do
        dirs=()
        for n in $RANKS; do
            for r in $(run_names "$s" "$n"); do
                dirs+=("$OUT/$r")
                [ -z "$MACHINE" ] || [ ! -f "$OUT/$r/config.json" ] || predict "$OUT/$r" "$n"
            done
        done
        if [ "$s" = strong ]; then echo "## strong scaling: global batch $GLOBAL samples, $STEPS steps, $REPEATS run(s) a point"
        else echo "## weak scaling: $MICRO samples per rank, $STEPS steps, $REPEATS run(s) a point"; fi
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
        for r in $(run_names "$s" "$n"); do
            [ -e "$OUT/$r" ] && die "$OUT/$r exists: remove it or choose another --out (a point starts from step 0)"
        done
    done
done

if [ -n "$LOCAL" ]; then
    # every point's ranks share this machine's CPUs; GNU nproc would answer
    # OMP_NUM_THREADS when it is set
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) || die "nproc failed"
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    for s in $SWEEPS; do
        for n in $RANKS; do
            [ $((n * OMP_NUM_THREADS)) -le "$cpus" ] ||
                echo "scaling.sh: warning: point $s-n$n is oversubscribed: $n rank(s) x $OMP_NUM_THREADS thread(s)" \
                    "on $cpus CPU(s) here; its figures measure the sharing of cores, not the scaling" >&2
            for r in $(run_names "$s" "$n"); do
                echo "scaling.sh: $s, $n rank(s): ${MPIEXEC:-mpiexec} -n $n fabula train --run-dir $OUT/$r" >&2
                # shellcheck disable=SC2046
                ${MPIEXEC:-mpiexec} -n "$n" "$FABULA" train --run-dir "$OUT/$r" "${common[@]}" \
                    $(batch_args "$s" "$n") "$@" >"$OUT/$r.out" 2>&1 ||
                    { rc=$?; tail -n 20 "$OUT/$r.out" >&2; die "point $r failed (exit $rc; log $OUT/$r.out)"; }
            done
        done
    done
    report
    exit $?
fi

