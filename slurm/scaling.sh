#!/bin/bash
# Strong and weak scaling sweeps of fabula on Slurm, or locally with mpiexec
# (docs/batch.md, "Scaling studies").
#
#   slurm/scaling.sh [options] [-- fabula train arguments]
#
#   --ranks "1 2 4 8"    total ranks of each point (default "1 2 4")
#   --ranks-per-node R   ranks per node (default 2): a point of n ranks asks
#                        for ceil(n / R) nodes
#   --sweep S            strong, weak or both (default both)
#   --micro-batch M      samples per micro-batch (default 2)
#   --global-batch G     strong sweep: samples per step on every point
#                        (default M x the largest rank count); every rank
#                        count must divide G / M (gradient accumulation)
#   --steps N            steps per point (default 20)
#   --out DIR            sweep directory (default runs/scaling): each point
#                        trains into DIR/strong-nN or DIR/weak-nN, which must
#                        not exist yet; the tables go to DIR/strong, DIR/weak
#   --local              run the points one after the other here with
#                        ${MPIEXEC:-mpiexec} -n N, no scheduler (OMP_NUM_THREADS
#                        defaults to 1)
#   --wait               Slurm: wait for the report job and print the tables
#   --report             only print and write the tables of a sweep that has
#                        run (the same options; what the report job runs)
#
# The strong sweep keeps the global batch (train_batch_size G; each rank
# takes G / n samples per step, as gradient accumulation of micro-batches
# of M): the same work split over more ranks. The weak sweep keeps each
# rank's batch (M, no accumulation): n times the work on n ranks. Points do
# not checkpoint (checkpoint.save_interval -1) and start from step 0
# (run.resume "none"). When all points have ended, `fabula report --scaling`
# prints each sweep's table (ranks, tokens/s, per rank, efficiency against
# the smallest point, time split, memory per rank) and writes scaling.md
# and scaling.svg into DIR/strong and DIR/weak.
#
# On Slurm every point is one slurm/train.sbatch job (FABULA, FABULA_LAUNCHER
# pass through), with --exclusive so that points never share a node, and the
# report one more job that depends on them all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
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
    *) die "unknown option '$1' (--help lists them; fabula's own arguments go after --)" ;;
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

command -v sbatch >/dev/null || die "no sbatch here: run on a Slurm login node, or with --local"
ids=
for s in $SWEEPS; do
    for n in $RANKS; do
        rpn=$((n < RPN ? n : RPN))
        nodes=$(((n + RPN - 1) / RPN))
        # shellcheck disable=SC2046
        id=$(sbatch --parsable --exclusive --job-name="fabula-$s-n$n" --nodes="$nodes" --ntasks="$n" --ntasks-per-node="$rpn" \
            --output="$OUT/$s-n$n.out" --export="ALL,FABULA_RUN_DIR=$OUT/$s-n$n,FABULA_MAX_RESTARTS=0" \
            "$here/train.sbatch" "${common[@]}" $(batch_args "$s" "$n") "$@") || die "sbatch of point $s-n$n failed"
        id=${id%%;*}
        echo "scaling.sh: $s, $n rank(s) on $nodes node(s): job $id, run dir $OUT/$s-n$n" >&2
        ids="$ids:$id"
    done
done
# the report runs after every point has ended, however it ended: a point
# without metrics shows in the report's own error
wrap=$(printf '%q ' "$here/scaling.sh" --report --out "$OUT" --ranks "$RANKS" --sweep "$SWEEP" \
    --micro-batch "$MICRO" --global-batch "$GLOBAL" --steps "$STEPS")
wait_opt=()
[ -n "$WAIT" ] && wait_opt=(--wait)
id=$(sbatch --parsable "${wait_opt[@]}" --job-name=fabula-scaling-report --ntasks=1 --dependency="afterany$ids" \
    --output="$OUT/report.md" --wrap "$wrap") ||
    { [ -n "$WAIT" ] && cat "$OUT/report.md" 2>/dev/null; die "the report job failed (see $OUT/report.md)"; }
echo "scaling.sh: report: job ${id%%;*}, output $OUT/report.md" >&2
[ -n "$WAIT" ] && cat "$OUT/report.md"
exit 0
