#!/bin/sh
# Tensor-parallel step time and communication volume (docs/parallel.md,
# "Tensor parallelism: step time and volume"): tp 1, 2 and 4 ranks on one
# node, the dense variant of bench/configs/cpu_small.json (4 layers, hidden
# 256, 8 heads, 4 kv heads, micro-batches of 8 x 256 tokens, fp32). For each
# tp: the median step time after 3 warm-up steps, and the bytes rank 0 handed
# to its tp group's all-reduces over the run (`fabula train` prints them at
# the end) per step, beside
#   Megatron's count: 4 all-reduces of T x D elements per layer and
#     micro-batch (2 forward, 2 backward), 4 L D b bytes a token;
#   fabula's, as it issues them: those, plus the vocabulary-parallel
#     embedding's forward sum and the head's input-gradient sum (T x D each),
#     the cross-entropy's row maxima (T doubles) and exp sums and target
#     logits (2 T doubles), and the gradient norm's sum (one double a step):
#     ((4 L + 2) D b + 24) bytes a token + 8 a step.
# b = 4 (fp32 activations). T summed over the steps is the metrics' tokens
# (one data-parallel rank). The per-token figures do not depend on the ring
# or tree the MPI library uses: they count what a rank hands to the call.
#
# usage: bench/tp_step.sh [--steps N]      (from the repository top)
# env:   FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich)
# On fewer cores than ranks (tp 4 on 2 cores) the step time measures the
# oversubscription as much as the split.
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
L=4
D=256

median_step_time() { # metrics.jsonl -> median step_time (s) after 3 warm-up steps
    sed -n 's/.*"step_time": *\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +4 | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

printf '%-3s %-10s %-12s %-16s %-16s %-16s %s\n' tp "step (s)" "all-reduces" "bytes/step" "fabula formula" \
    "Megatron 4LTDb" "measured - Megatron"
for tp in 1 2 4; do
    $MPIEXEC -n "$tp" "$FABULA" train bench/configs/cpu_small.json --steps "$STEPS" --run-dir "$OUT/tp$tp" \
        --set checkpoint.save_interval=-1 --set 'run.resume="none"' --set model.num_local_experts=0 \
        --set parallel.tensor_parallel_size="$tp" >"$OUT/tp$tp.out" 2>&1 ||
        { echo "tp $tp failed:" >&2; tail -n 20 "$OUT/tp$tp.out" >&2; exit 1; }
    t=$(median_step_time "$OUT/tp$tp/metrics.jsonl")
    tokens=$(sed -n 's/.*"tokens": *\([0-9]*\).*/\1/p' "$OUT/tp$tp/metrics.jsonl" | awk '{s += $1} END {print s}')
    if [ "$tp" -eq 1 ]; then
        calls=0 bytes=0
    else
        set -- $(sed -n 's/^fabula: tensor-parallel comm of rank 0: \([0-9]*\) all-reduces, \([0-9]*\) bytes over .*/\1 \2/p' \
            "$OUT/tp$tp.out")
        calls=$1 bytes=$2
    fi
    awk -v tp="$tp" -v t="$t" -v calls="$calls" -v bytes="$bytes" -v z="$tokens" -v n="$STEPS" -v L=$L -v D=$D '
    BEGIN {
        fab = tp > 1 ? ((4 * L + 2) * D * 4 + 24) * z + 8 * n : 0
        meg = tp > 1 ? 4 * L * D * 4 * z : 0
        printf "%-3s %-10.3f %-12.1f %-16.1f %-16.1f %-16.1f %+.1f\n", tp, t, calls / n, bytes / n, fab / n, meg / n,
            (bytes - meg) / n
        if (bytes != fab) { printf "tp %d: measured %d bytes, formula %d\n", tp, bytes, fab > "/dev/stderr"; exit 1 }
    }'
done
