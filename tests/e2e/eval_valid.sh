#!/bin/sh
# The validation loss (run.eval_interval, run.eval_samples; docs/config.md):
# measured on the novels `fabula prep --valid-fraction` held out, every N
# steps and at the last; the same on 1, 2 and 4 ranks (ep 2, ZeRO 3) within
# 1e-6 (one sample per forward, so only the order of the final sum
# differs); absent between evaluations; training's losses unchanged by it; refused with exit 2 for a text
# source or a corpus without a validation split.
. "$FB_SRCDIR/tests/e2e/lib.sh"

run_fabula 1 prep -q --max-seq-len 128 --overlap 16 --min-seq-len 16 --valid-fraction 0.25 --seed 7 \
    --output "$SCRATCH/split.h5" inputs/sample.jsonl
check "prep with a validation split" '[ $RC -eq 0 ]'
run_fabula 1 prep -q --max-seq-len 128 --overlap 16 --min-seq-len 16 --output "$SCRATCH/nosplit.h5" inputs/sample.jsonl
check "prep without one" '[ $RC -eq 0 ]'

train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps 6 --run-dir "$SCRATCH/$name" --set data.corpus="$SCRATCH/split.h5" \
        --set data.tokenizer=bytes --set data.seq_len=128 --set train_batch_size=8 \
        --set train_micro_batch_size_per_gpu=2 --set run.eval_interval=3 --set run.eval_samples=20 "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/$name.out"
}
valid() { sed -n 's/.*"step":\([0-9]*\),.*"valid_lm_loss":\([-0-9.e+]*\).*/\1 \2/p' "$SCRATCH/$1/metrics.jsonl"; }

train 1 v1
valid v1
check "1 rank: validation losses at steps 3 and 6 only" '[ $RC -eq 0 ] && [ "$(valid v1 | cut -d" " -f1 | tr "\n" " ")" = "3 6 " ]'
check "1 rank: the validation loss is printed, with its perplexity and genre" 'grep -q "^step 3 | validation lm loss [0-9.]* | ppl [0-9.]* | romance [0-9.]*$" "$SCRATCH/v1.out"'
check "1 rank: the log names the split and its novel" \
    'grep -q "validation split of .*split.h5: 1 novel held out by prep (.* (romance)), [0-9]* samples" "$SCRATCH/v1.out"'
close() { # A B: every validation loss of B within 1e-6 relative of A's
    valid "$1" >"$SCRATCH/a.txt"; valid "$2" >"$SCRATCH/b.txt"
    [ "$(wc -l <"$SCRATCH/b.txt")" -eq 2 ] && paste "$SCRATCH/a.txt" "$SCRATCH/b.txt" | awk '
        {d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-6 * $2) bad = 1} END {exit bad}'
}
train 2 v2 --set zero_optimization.stage=1
check "2 ranks: the same validation losses within 1e-6" '[ $RC -eq 0 ] && close v1 v2'
train 4 v4 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3
check "4 ranks, ep 2, ZeRO 3: the same validation losses within 1e-6" '[ $RC -eq 0 ] && close v1 v4'
train 1 v0 --set run.eval_interval=0
losses() { sed -n 's/.*"loss":\([-0-9.e+]*\),.*/\1/p' "$SCRATCH/$1/metrics.jsonl"; }
check "evaluating does not change training: the same losses bit for bit as without it" \
    '[ $RC -eq 0 ] && [ -n "$(losses v0)" ] && [ "$(losses v0)" = "$(losses v1)" ] && [ -z "$(valid v0)" ]'
first=$(valid v1 | head -n 1 | cut -d" " -f2) last=$(valid v1 | tail -n 1 | cut -d" " -f2)
echo "validation lm loss: step 3 $first, step 6 $last"
check "the validation loss falls while training" "awk -v a=$first -v b=$last 'BEGIN{exit !(b < a)}'"

run_fabula 1 train --steps 2 --run-dir "$SCRATCH/text" --set run.eval_interval=1
check "a text source: exit 2 naming run.eval_interval" \
    '[ $RC -eq 2 ] && grep -q "run.eval_interval = 1 needs a validation split" "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/text" ]'
run_fabula 2 train --steps 2 --run-dir "$SCRATCH/nosplit" --set data.corpus="$SCRATCH/nosplit.h5" \
    --set data.tokenizer=bytes --set run.eval_interval=1
check "a corpus without a validation split: exit 2, one message" \
    '[ $RC -eq 2 ] && [ "$(grep -c "has no validation sample" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q Abort "$SCRATCH/out.txt"'
run_fabula 1 train --dry-run --set run.eval_interval=-1
check "a negative interval: exit 2 naming the key" '[ $RC -eq 2 ] && grep -q "run.eval_interval" "$SCRATCH/out.txt"'
finish
