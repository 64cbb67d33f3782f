#!/bin/sh
# Sample units of `fabula prep --split` (windows, chapters, scenes) compared
# on real novels: for each tokenizer, max_seq_len and unit, the corpus is
# prepared and `fabula plan sampler --corpus` runs its training samples
# through the step plan at 8 and 64 simulated ranks (docs/prep.md, "Sample
# units", argues the default from these numbers).
#
#   bench/units.sh CORPUS.jsonl TOKENIZER "L1 L2 ..." [SCRATCH]
#
# TOKENIZER: bytes or a tokenizer file. Run from the repository top; FABULA
# names the binary (default ./fabula), RANKS the two simulated rank counts
# (default 8,64), BATCH the samples offered per rank per step (default 16). Prints one Markdown table row per
# (L, unit):
#   samples, share of samples at full length, curriculum classes (short <
#   1024 <= medium < 2048 <= long), pieces and the pieces windowed;
#   16 micro-batches of L per rank (the default plan: G = B = 16): lpt's cost
#   imbalance mean/max, best_fit's packing efficiency;
#   1 micro-batch of B L per rank (gradient accumulation 1): the cost
#   imbalance with best_fit and with balanced packing (one micro-batch a rank
#   leaves the balancer no choice: every strategy gives the same).
set -eu

FABULA=${FABULA:-./fabula}
CORPUS=$1
TOK=$2
LENS=$3
SCRATCH=${4:-$(mktemp -d)}
RANKS=${RANKS:-8,64}
STEPS=50
BATCH=${BATCH:-16}
R1=${RANKS%,*}
R2=${RANKS#*,}

[ -x "$FABULA" ] || { echo "bench/units.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
[ -r "$CORPUS" ] || { echo "bench/units.sh: cannot read $CORPUS" >&2; exit 2; }
mkdir -p "$SCRATCH"

echo "| L | unit | samples | at L | short / medium / long | pieces (windowed) | $BATCH x L: lpt cost imbalance mean / max, $R1 and $R2 ranks | best_fit packing $R1 / $R2 | 1 x $BATCH L: best_fit, $R1 / $R2 | balanced, $R1 / $R2 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for L in $LENS; do
    for unit in windows chapters scenes; do
        h5="$SCRATCH/$unit-$L.h5"
        "$FABULA" prep -q --force --tokenizer "$TOK" --split "$unit" --max-seq-len "$L" -o "$h5" "$CORPUS" \
            >"$SCRATCH/prep.txt" 2>&1 || { cat "$SCRATCH/prep.txt" >&2; exit 1; }
        pieces=$(sed -n "s/^  sample unit $unit: \([0-9]*\) [a-z]* with text, \([0-9]*\) of them.*/\1 (\2)/p" \
            "$SCRATCH/prep.txt")
        "$FABULA" plan sampler --corpus "$h5" --simulate-ranks $RANKS --steps $STEPS --batch $BATCH \
            >"$SCRATCH/many.txt" 2>&1
        "$FABULA" plan sampler --corpus "$h5" --simulate-ranks $RANKS --steps $STEPS --batch $BATCH \
            --max-tokens $((BATCH * L)) --accum 1 --set data.packing=balanced >"$SCRATCH/bal.txt" 2>&1
        "$FABULA" plan sampler --corpus "$h5" --simulate-ranks $RANKS --steps $STEPS --batch $BATCH \
            --max-tokens $((BATCH * L)) --accum 1 >"$SCRATCH/one.txt" 2>&1
        awk -v L="$L" -v unit="$unit" -v pieces="$pieces" -v r1="$R1" -v r2="$R2" '
            function imb(line) { split(line, f, "|"); sub(/^ +/, "", f[2]); sub(/ +\/.*/, "", f[2]); return f[2] }
            function imbmax(line) { split(line, f, "|"); sub(/.*\/ +/, "", f[2]); sub(/ +$/, "", f[2]); return f[2] }
            FILENAME ~ /many/ && /^corpus:/ { n = $2 }
            FILENAME ~ /many/ && /^lengths:/ { at = $2; s = $5; m = $9; l = $11; sub(/,$/, "", m) }
            FILENAME ~ /many/ && $2 == "lpt" { lpt[$1] = imb($0) " / " imbmax($0) }
            FILENAME ~ /many/ && $2 == "packing" { p = $0; sub(/.*best_fit /, "", p); sub(/ .*/, "", p); pk[$1] = p }
            FILENAME ~ /one/ && $2 == "lpt" { o[$1] = imb($0) }
            FILENAME ~ /bal/ && $2 == "lpt" { b[$1] = imb($0) }
            END {
                printf "| %s | %s | %s | %s | %s / %s / %s | %s | %s, %s | %s / %s | %s / %s | %s / %s |\n",
                    L, unit, n, at, s, m, l, pieces, lpt[r1], lpt[r2], pk[r1], pk[r2], o[r1], o[r2], b[r1], b[r2]
            }' "$SCRATCH/many.txt" "$SCRATCH/one.txt" "$SCRATCH/bal.txt"
    done
done
