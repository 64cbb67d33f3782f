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
# shellcheck source=../tools/scaling_sweep.sh
source "$here/../tools/scaling_sweep.sh"

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
