#!/bin/sh
# Expert count at fixed active parameters: training-step throughput of one
# MoE model on the CPU with 4/16/64/128 experts (top-2, the same expert
# width, so every token does the same FLOPs) against the dense model of the
# same FLOPs (FFN width 2 x the expert width), for one or more fabula builds,
# at each thread count, rounds interleaved so the machine's other load hits
# every build alike.
#
#   bench/moe_experts.sh [--rounds N] [--threads "1 2"] [--experts "4 16 64 128"] NAME=BENCH...
#
# NAME=BENCH: a label and a fabula-model-bench binary (e.g. before=/tmp/old
# after=./bench/fabula-model-bench). Prints one line per run and, per
# (build, threads, model), the median tokens/s with its range and the median
# CPU seconds (user+sys) per step.
set -eu

ROUNDS=3
THREADS="1 2"
EXPERTS="4 16 64 128"
# the model: small enough for a 2-core machine, big enough that the GEMMs
# dominate; 1024 tokens a step, so 128 experts get 16 rows each (MOE_BENCH_SHAPE
# replaces these flags)
SHAPE=${MOE_BENCH_SHAPE:-"--layers 2 --hidden 256 --heads 4 --kv-heads 4 --vocab 256 --batch 4 --seq 256 --steps 3 --warmup 1"}
EXPERT_HIDDEN=512
TOPK=2

usage() { echo "usage: bench/moe_experts.sh [--rounds N] [--threads \"1 2\"] [--experts \"4 16 64 128\"] NAME=BENCH..."; }
die_usage() { echo "bench/moe_experts.sh: $1" >&2; usage >&2; exit 2; }

BUILDS=
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) [ $# -ge 2 ] || die_usage "$1 needs a value"; ROUNDS=$2; shift 2 ;;
    --threads) [ $# -ge 2 ] || die_usage "$1 needs a value"; THREADS=$2; shift 2 ;;
    --experts) [ $# -ge 2 ] || die_usage "$1 needs a value"; EXPERTS=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *=*) BUILDS="$BUILDS $1"; shift ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
done
case "$ROUNDS" in '' | *[!0-9]* | 0) die_usage "--rounds wants a positive integer, not '$ROUNDS'" ;; esac
[ -n "$BUILDS" ] || die_usage "name at least one NAME=BENCH"
for b in $BUILDS; do
    [ -x "${b#*=}" ] || die_usage "no fabula-model-bench at '${b#*=}'"
done
[ -x /usr/bin/time ] || { echo "bench/moe_experts.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

OUT=$(mktemp "${TMPDIR:-/tmp}/moe-experts.XXXXXX")
trap 'rm -f "$OUT" "$OUT.t"' EXIT

MODELS="dense"
for e in $EXPERTS; do MODELS="$MODELS moe$e"; done
echo "== bench/moe_experts.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) core(s), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "shape: $SHAPE; experts top-$TOPK x $EXPERT_HIDDEN wide, dense FFN $((TOPK * EXPERT_HIDDEN)) wide"
for r in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        for m in $MODELS; do
            for b in $BUILDS; do
                name=${b%%=*} bin=${b#*=}
                if [ "$m" = dense ]; then
                    args="--model dense --ffn-hidden $((TOPK * EXPERT_HIDDEN))"
                else
                    args="--model moe --experts ${m#moe} --topk $TOPK --expert-hidden $EXPERT_HIDDEN"
                fi
                # shellcheck disable=SC2086
                line=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t /usr/bin/time -f "CPU %U %S" -o "$OUT.t" \
                    "$bin" --backend cpu $SHAPE $args | tail -n 1)
                tps=$(echo "$line" | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p')
                cpu=$(awk '/^CPU/ {print $2 + $3}' "$OUT.t")
                echo "round $r threads $t $m $name: $tps tokens/s, $cpu CPU s (run), load $(cut -d' ' -f1 /proc/loadavg)"
                echo "$name $t $m $tps $cpu" >>"$OUT"
            done
        done
    done
done
echo
echo "build threads model: median tokens/s [min-max], median CPU s per run (all steps + ceiling)"
awk -f "$(dirname "$0")/median_rounds.awk" "$OUT"
