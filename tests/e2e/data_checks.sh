#!/bin/sh
# What the data cannot do as the config asks is said once at start, with
# the fix (docs/loader.md, "Start-up checks"); each case also where it does
# not apply: a train_batch_size above the corpus's samples (they repeat
# within a step), a data.seq_len above prep's --max-seq-len, a length
# curriculum whose classes are nearly all one (a windows corpus: the fix is
# --split chapters; a chapters corpus of long chapters: a larger
# --max-seq-len; a corpus of real chapter lengths: no warning), and a
# packing that loads the ranks unevenly where balanced packing would not.
# Before, all of these trained without a word.
. "$FB_SRCDIR/tests/e2e/lib.sh"
SAMPLE=inputs/sample.jsonl
SCENES=tests/data/novels/scenes.jsonl
PY=${PYTHON:-python3}

train() { # NP NAME ARGS...: one step, no checkpoint
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps 1 --run-dir "$SCRATCH/$name" --set checkpoint.save_interval=-1 "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/$name.out"
}
warnings() { grep -c "warning: $2" "$SCRATCH/$1.out"; }

# ---- train_batch_size above the corpus: two short novels, 128-token windows
"$PY" - "$FB_SRCDIR/$SAMPLE" "$SCRATCH/tiny.jsonl" <<'PYEOF'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for d in src[2:4]:
        out.write(json.dumps({"title": d["title"], "genre": d["genre"], "content": d["content"][:700]}) + "\n")
PYEOF
train 1 big --set data.train="$SCRATCH/tiny.jsonl" --set train_batch_size=64 --set train_micro_batch_size_per_gpu=8
n=$(sed -n 's/^fabula: data: .*tiny.jsonl: \([0-9]*\) samples .*/\1/p' "$SCRATCH/big.out")
times=$(awk -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", 64 / n }')
echo "tiny corpus: $n samples; 64 a step is each $times times"
check "train_batch_size 64 over $n samples: one warning with the repeat count and the fix, exit 0" \
    '[ $RC -eq 0 ] && [ "$n" -gt 0 ] && [ "$n" -lt 64 ] && [ "$(warnings big "train_batch_size = 64 is larger than the $n training samples of .*tiny.jsonl: every step trains on each sample about $times times (64 / $n).*give train_batch_size <= $n")" -eq 1 ]'
train 1 fits --set data.train="$SCRATCH/tiny.jsonl" --set train_batch_size=8 --set train_micro_batch_size_per_gpu=8
check "train_batch_size 8: no such warning" '[ $RC -eq 0 ] && [ "$(warnings fits "train_batch_size")" -eq 0 ]'

# ---- data.seq_len above prep's samples
run_fabula 1 prep -q --max-seq-len 64 --min-seq-len 16 -o "$SCRATCH/c64.h5" "$SCRATCH/tiny.jsonl"
train 2 above --set data.corpus="$SCRATCH/c64.h5" --set data.seq_len=128
check "data.seq_len 128 on a corpus of prep --max-seq-len 64: one warning naming both and the fixes" \
    '[ $RC -eq 0 ] && [ "$(warnings above "data.seq_len = 128 is above the longest sample .*c64.h5 can hold (prep --max-seq-len 64).*fabula prep --max-seq-len 128., or set data.seq_len = 64")" -eq 1 ]'
train 2 equal --set data.corpus="$SCRATCH/c64.h5" --set data.seq_len=64
check "data.seq_len 64 on it: no such warning" '[ $RC -eq 0 ] && [ "$(warnings equal "data.seq_len")" -eq 0 ]'

# ---- the curriculum on samples of one length class
CURR="--set data.curriculum.enabled=true --set data.curriculum.short_threshold=256 --set data.curriculum.long_threshold=512"
run_fabula 1 prep -q --split windows --max-seq-len 512 -o "$SCRATCH/w512.h5" "$SAMPLE"
train 2 curr_windows --set data.corpus="$SCRATCH/w512.h5" --set data.seq_len=512 $CURR
check "curriculum on a windows corpus: the class counts, and the fix --split chapters" \
    '[ $RC -eq 0 ] && [ "$(warnings curr_windows "data.curriculum: of the [0-9]* training samples, [0-9]* are short (< 256 tokens), [0-9]* medium and [0-9]* long (>= 512): 9[0-9.]*% are long.*fabula prep --split chapters")" -eq 1 ]'
run_fabula 1 prep -q --split chapters --max-seq-len 512 -o "$SCRATCH/c512.h5" "$SAMPLE"
train 2 curr_long --set data.corpus="$SCRATCH/c512.h5" --set data.seq_len=512 $CURR
check "curriculum on chapters longer than --max-seq-len: the fix is a larger --max-seq-len" \
    '[ $RC -eq 0 ] && [ "$(warnings curr_long "data.curriculum: .*are long.*Most chapters of .*c512.h5 are longer than --max-seq-len 512")" -eq 1 ]'
run_fabula 1 prep -q --split chapters --max-seq-len 4096 -o "$SCRATCH/c4096.h5" "$SCENES"
train 2 curr_ok --set data.corpus="$SCRATCH/c4096.h5" --set data.seq_len=4096 $CURR \
    --set data.curriculum.short_threshold=1000 --set data.curriculum.long_threshold=2000 --set data.packing=balanced
check "curriculum on chapters of real lengths (short, medium and long): no warning" \
    '[ $RC -eq 0 ] && [ "$(warnings curr_ok "data.curriculum")" -eq 0 ]'
train 1 curr_short --set data.train="$SCRATCH/tiny.jsonl" --set data.curriculum.enabled=true
check "curriculum with data.seq_len below long_threshold: the phases ask for classes that cannot exist" \
    '[ $RC -eq 0 ] && [ "$(warnings curr_short "data.curriculum: .*the phases ask for medium samples and there are none.*No sample can be long with data.seq_len = 128 below data.curriculum.long_threshold")" -eq 1 ]'

# ---- packing: one micro-batch per rank of uneven chapters
train 2 pack --set data.corpus="$SCRATCH/c4096.h5" --set data.seq_len=4096 --set train_batch_size=4 \
    --set train_micro_batch_size_per_gpu=2
check "best_fit with 1 micro-batch per rank on uneven chapters: the planned imbalance and the fix" \
    '[ $RC -eq 0 ] && [ "$(warnings pack "data.packing = .best_fit. with 1 micro-batch per rank: on the sample lengths of .*c4096.h5 (sample unit chapters) the step plan gives the busiest of the 2 data-parallel ranks [0-9.]*% more work than the mean .*data.packing = .balanced. brings that to [0-9.]*%")" -eq 1 ]'
train 2 pack_bal --set data.corpus="$SCRATCH/c4096.h5" --set data.seq_len=4096 --set train_batch_size=4 \
    --set train_micro_batch_size_per_gpu=2 --set data.packing=balanced
check "balanced packing: no such warning" '[ $RC -eq 0 ] && [ "$(warnings pack_bal "data.packing")" -eq 0 ]'
finish
