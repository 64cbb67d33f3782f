#!/bin/sh
# Load balance and packing of the data-parallel sampler on the real length
# distribution of the shared corpus, at 8, 64 and 1024 simulated ranks
# (`fabula plan sampler`, no MPI, no model; see docs/loader.md).
#
#   bench/sampler.sh [CORPUS.jsonl]      (default ../shared/corpus/novels.jsonl)
#
# Run from the repository top; FABULA names the binary (default ./fabula).
# Goals (issues 4, 13): lpt imbalance <= 2 % with >= 4 micro-batches per rank,
# packing efficiency >= 98 %. The micro-batches do not depend on the rank count.
set -eu

FABULA=${FABULA:-./fabula}
CORPUS=${1:-../shared/corpus/novels.jsonl}
RANKS=8,64,1024
STEPS=50
BATCH=16          # samples offered per rank per step
LONG=32768        # chapters: max sample length (few chapters are longer)
WIN=4096          # windows: the training samples at this seq_len

[ -x "$FABULA" ] || { echo "bench/sampler.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
[ -r "$CORPUS" ] || { echo "bench/sampler.sh: cannot read $CORPUS" >&2; exit 2; }

run() { # title, then plan options
    title=$1
    shift
    echo
    echo "== $title"
    "$FABULA" plan sampler --jsonl "$CORPUS" --simulate-ranks $RANKS --steps $STEPS --batch $BATCH "$@" 2>/dev/null
}

echo "fabula plan sampler on $CORPUS: $STEPS steps, $BATCH samples offered per rank per step,"
echo "attention cost c from the default model (data.attention_cost \"auto\")."
echo "imbalance = max/mean - 1 over ranks (cost = len + c len^2, and tokens), mean / max over steps;"
echo "packing efficiency = real tokens / (micro-batches x capacity); padded = tokens / (samples x max_seq_len)."

# One sample per chapter: the uneven lengths of fiction.
run "chapters, max_seq_len $LONG, memory per rank = the padded offer (16 x $LONG): capacity $LONG, 16 micro-batches" \
    --split chapters --max-seq-len $LONG --max-tokens $LONG --accum 16
for split in "1 8" "2 4" "4 2" "8 1"; do
    set -- $split
    run "chapters, max_seq_len $LONG, memory 8 x $LONG per rank: capacity $1 x $LONG, $2 micro-batches" \
        --split chapters --max-seq-len $LONG --max-tokens $(($1 * LONG)) --accum $2
done
# The training windows: nearly all exactly seq_len long.
run "windows of $WIN, memory 16 x $WIN per rank: capacity 4 x $WIN, 4 micro-batches" \
    --split windows --max-seq-len $WIN --max-tokens $((4 * WIN)) --accum 4
