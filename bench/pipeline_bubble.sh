#!/bin/sh
# The pipeline bubble (docs/parallel.md, "Pipeline parallelism"): for pp 2
# and 4 stages, v = 1 and 2 chunks a stage (1F1B and interleaved 1F1B) and
# m = 4, 8 and 16 micro-batches a step, the share of the step
# time each stage spent waiting on the pipeline (its receives and the step's
# last sends, as `fabula train` measures and prints at the end), against
# 1F1B's (p - 1) / (m + p - 1) (interleaved: (p - 1) / (v m + p - 1)) for
# micro-batches of equal cost and free transfers. One data-parallel rank; 8 layers of hidden 128, micro-batches
# of one 128-token sample.
#
# usage: bench/pipeline_bubble.sh [--steps N]      (from the repository top)
# env:   FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich)
# On fewer cores than ranks the stages also wait for each other's CPU
# time: the measured share is then no measure of the schedule alone.
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
STEPS=10
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N]" >&2; exit 2 ;;
    esac
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
printf '%-4s %-2s %-4s %-40s %-8s %s\n' pp v m "idle share by stage" mean "theory"
for v in 1 2; do
for pp in 2 4; do
    for m in 4 8 16; do
        $MPIEXEC -n "$pp" "$FABULA" train --steps "$STEPS" --run-dir "$OUT/pp$pp-v$v-m$m" \
            --set checkpoint.save_interval=-1 --set 'run.resume="none"' --set model.num_local_experts=0 \
            --set model.num_hidden_layers=8 --set model.hidden_size=128 --set model.intermediate_size=256 \
            --set data.seq_len=128 --set train_batch_size="$m" --set train_micro_batch_size_per_gpu=1 \
            --set parallel.pipeline_parallel_size="$pp" --set parallel.virtual_pipeline_stages="$v" \
            >"$OUT/pp$pp-v$v-m$m.out" 2>&1 ||
            { echo "pp $pp, v $v, m $m failed:" >&2; tail -n 20 "$OUT/pp$pp-v$v-m$m.out" >&2; exit 1; }
        sed -n 's/^fabula: pipeline: .*stage: \(.*\); mean \([0-9.]*\), .*theory [^=]*= \([0-9.]*\).*$/\1|\2|\3/p' \
            "$OUT/pp$pp-v$v-m$m.out" |
            awk -F'|' -v pp="$pp" -v v="$v" -v m="$m" '{printf "%-4s %-2s %-4s %-40s %-8s %s\n", pp, v, m, $1, $2, $3}'
    done
done
done
