#!/bin/bash
# Strong and weak scaling sweeps of fabula on PBS Pro / OpenPBS, or locally
# with mpiexec
# (docs/batch.md, "Scaling studies").
#
#   pbs/scaling.sh [options] [-- fabula train arguments]
#
#   --ranks "1 2 4 8"    total ranks of each point (default "1 2 4")
#   --ranks-per-node R   ranks per node (default 2): a point of n ranks asks
#                        for select=ceil(n / R):ncpus=C:mpiprocs=min(n, R)
#   --ncpus C            cores per node to ask for (default: R); below R
#                        the points are oversubscribed, which it warns of
#   --sweep S            strong, weak or both (default both)
#   --micro-batch M      samples per micro-batch (default 2)
#   --global-batch G     strong sweep: samples per step on every point
#                        (default M x the largest rank count); every rank
#                        count must divide G / M (gradient accumulation)
#   --steps N            steps per point (default 20)
#   --repeats K          runs of each point (default 1); the report gives
#                        the median tokens/s of a point and its min-max
#   --machine FILE       a machine file (docs/plan.md, "Machine files"): the
#                        report puts `fabula plan time`'s predicted step
#                        time and tokens/s beside the measured ones, with
#                        the error in % (written to each run dir as
#                        plan_time.json); without it, no prediction
#   --out DIR            sweep directory (default runs/scaling): each point
#                        trains into DIR/strong-nN or DIR/weak-nN (with
#                        --repeats K > 1, DIR/strong-nN-r1 ... -rK), which
#                        must not exist yet; the tables go to DIR/strong,
#                        DIR/weak
#   --local              run the points one after the other here with
#                        ${MPIEXEC:-mpiexec} -n N, no scheduler (OMP_NUM_THREADS
#                        defaults to 1); warns of a point whose ranks x
#                        threads exceed this machine's CPUs (nproc)
#   --wait               PBS: wait for the report job (qsub -W block=true)
#                        and print the tables
#   --report             only print and write the tables of a sweep that has
#                        run (the same options; what the report job runs)
#
# The strong sweep keeps the global batch (train_batch_size G; each rank
# takes G / n samples per step, as gradient accumulation of micro-batches
# of M): the same work split over more ranks. The weak sweep keeps each
# rank's batch (M, no accumulation): n times the work on n ranks. Points do
# not checkpoint (checkpoint.save_interval -1) and start from step 0
# (run.resume "none") and gather every rank's phase times at every step
# (steps_per_print 1). When all points have ended, `fabula report
# --scaling` prints each sweep's tables (ranks, runs, median tokens/s and
# its spread over the repeats, per rank, efficiency against the smallest
# point, time split, memory per rank, the node's ranks x threads / CPUs
# flagged where oversubscribed; each phase's min/median/max over ranks;
# the prediction with --machine) and writes scaling.md and scaling.svg
# (throughput on log-log axes, efficiency against the ideal) into
# DIR/strong and DIR/weak.
#
# On PBS every point is one pbs/train.pbs job (FABULA passes through; the
# fabula arguments after -- travel in FABULA_ARGS, so they may not contain
# commas) and the report one more job that depends on them all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
NCPUS_NODE=
sweep_option() {
    case $1 in --ncpus) [ $# -ge 2 ] || die "--ncpus needs a value"; NCPUS_NODE=$2; SWEEP_SHIFT=2 ;; *) return 1 ;; esac
}
# shellcheck source=../tools/scaling_sweep.sh
source "$here/../tools/scaling_sweep.sh"

command -v qsub >/dev/null || die "no qsub here: run on a PBS login node, or with --local"
NCPUS_NODE=${NCPUS_NODE:-$RPN}
is_count "$NCPUS_NODE" || die "--ncpus: '$NCPUS_NODE' is not a positive count"
case "$*" in *,*) die "a fabula argument contains a comma, which qsub -v cannot pass: put it in a config file" ;; esac
ids=
for s in $SWEEPS; do
    for n in $RANKS; do
        rpn=$((n < RPN ? n : RPN))
        nodes=$(((n + RPN - 1) / RPN))
        [ "$rpn" -le "$NCPUS_NODE" ] ||
            echo "scaling.sh: warning: point $s-n$n is oversubscribed: $rpn rank(s) a node on ncpus=$NCPUS_NODE;" \
                "its figures measure the sharing of cores, not the scaling" >&2
        args="${common[*]} $(batch_args "$s" "$n") $*"
        for r in $(run_names "$s" "$n"); do
            id=$(qsub -N "fabula-$r" -l "select=$nodes:ncpus=$NCPUS_NODE:mpiprocs=$rpn" -j oe -o "$OUT/$r.out" \
                -v "FABULA=$FABULA,FABULA_RUN_DIR=$OUT/$r,FABULA_MAX_RESTARTS=0,FABULA_ARGS=$args" \
                "$here/train.pbs") || die "qsub of point $r failed"
            echo "scaling.sh: $s, $n rank(s) on $nodes node(s): job $id, run dir $OUT/$r" >&2
            ids="$ids:$id"
        done
    done
done
# the report runs after every point has ended, however it ended
wait_opt=()
[ -n "$WAIT" ] && wait_opt=(-W block=true)
id=$(qsub "${wait_opt[@]}" -N fabula-scaling-report -l select=1:ncpus=1 -W "depend=afterany$ids" -j oe \
    -o "$OUT/report.md" -- "$here/scaling.sh" --report --out "$OUT" --ranks "$RANKS" --sweep "$SWEEP" \
    --micro-batch "$MICRO" --global-batch "$GLOBAL" --steps "$STEPS" --repeats "$REPEATS" \
    ${MACHINE:+--machine "$MACHINE"}) ||
    { [ -n "$WAIT" ] && cat "$OUT/report.md" 2>/dev/null; die "the report job failed (see $OUT/report.md)"; }
echo "scaling.sh: report: job $id, output $OUT/report.md" >&2
[ -n "$WAIT" ] && cat "$OUT/report.md"
exit 0
