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
#   --ncpus C            cores per node to ask for (default: R)
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
# (run.resume "none"). When all points have ended, `fabula report --scaling`
# prints each sweep's table (ranks, tokens/s, per rank, efficiency against
# the smallest point, time split, memory per rank) and writes scaling.md
# and scaling.svg into DIR/strong and DIR/weak.
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
        args="${common[*]} $(batch_args "$s" "$n") $*"
        id=$(qsub -N "fabula-$s-n$n" -l "select=$nodes:ncpus=$NCPUS_NODE:mpiprocs=$rpn" -j oe -o "$OUT/$s-n$n.out" \
            -v "FABULA=$FABULA,FABULA_RUN_DIR=$OUT/$s-n$n,FABULA_MAX_RESTARTS=0,FABULA_ARGS=$args" \
            "$here/train.pbs") || die "qsub of point $s-n$n failed"
        echo "scaling.sh: $s, $n rank(s) on $nodes node(s): job $id, run dir $OUT/$s-n$n" >&2
        ids="$ids:$id"
    done
done
# the report runs after every point has ended, however it ended
wait_opt=()
[ -n "$WAIT" ] && wait_opt=(-W block=true)
id=$(qsub "${wait_opt[@]}" -N fabula-scaling-report -l select=1:ncpus=1 -W "depend=afterany$ids" -j oe \
    -o "$OUT/report.md" -- "$here/scaling.sh" --report --out "$OUT" --ranks "$RANKS" --sweep "$SWEEP" \
    --micro-batch "$MICRO" --global-batch "$GLOBAL" --steps "$STEPS") ||
    { [ -n "$WAIT" ] && cat "$OUT/report.md" 2>/dev/null; die "the report job failed (see $OUT/report.md)"; }
echo "scaling.sh: report: job $id, output $OUT/report.md" >&2
[ -n "$WAIT" ] && cat "$OUT/report.md"
exit 0
