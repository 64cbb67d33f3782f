#!/bin/sh
# The load-balancing loss over each micro-batch vs over the whole step
# (model.router_aux_loss_scope, docs/model.md "Losses"): the same small MoE
# trained from the same seed on the same data with each scope, side by side
# in one run; prints the training LM loss at the end, the LM loss on 256
# held-out samples (novels prep puts in the validation split), how much the expert
# choice tells about the genre (mutual information per MoE layer, from
# metrics.jsonl's genre_expert_tokens), plus each run's step time.
#
#   bench/aux_scope.sh [CORPUS.jsonl] [STEPS] [RANKS]
#        (defaults ../shared/corpus/novels.jsonl, 200, 1)
#
# Run from the repository top; FABULA names the binary (default ./fabula),
# MPIEXEC the launcher (default mpiexec).
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec}
CORPUS=${1:-../shared/corpus/novels.jsonl}
STEPS=${2:-200}
RANKS=${3:-1}
OUT=${OUT:-bench-aux-scope}
[ -x "$FABULA" ] || { echo "bench/aux_scope.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
[ -r "$CORPUS" ] || { echo "bench/aux_scope.sh: cannot read $CORPUS" >&2; exit 2; }
HERE=$(dirname "$0")
rm -rf "$OUT"
mkdir -p "$OUT"
# 10% of the novels held out, whole (prep's validation split)
"$MPIEXEC" -n 1 "$FABULA" prep -q --max-seq-len 256 --overlap 32 --min-seq-len 64 --valid-fraction 0.1 \
    --seed 11 --output "$OUT/corpus.h5" "$CORPUS" >"$OUT/prep.log" 2>&1 || { tail -n 20 "$OUT/prep.log" >&2; exit 1; }
for scope in micro_batch global_batch; do
    echo "bench/aux_scope.sh: $scope, $STEPS steps on $RANKS rank(s) ..." >&2
    "$MPIEXEC" -n "$RANKS" "$FABULA" train --run-dir "$OUT/$scope" --steps "$STEPS" \
        --set data.corpus="$OUT/corpus.h5" --set data.tokenizer=bytes --set data.seq_len=256 \
        --set train_batch_size=16 --set run.eval_interval="$STEPS" --set run.eval_samples=256 \
        --set train_micro_batch_size_per_gpu=4 --set model.num_local_experts=8 \
        --set model.router_aux_loss_scope="$scope" >"$OUT/$scope.log" 2>&1 ||
        { tail -n 20 "$OUT/$scope.log" >&2; exit 1; }
done
python3 "$HERE/aux_scope_report.py" "$OUT/micro_batch/metrics.jsonl" "$OUT/global_batch/metrics.jsonl"
