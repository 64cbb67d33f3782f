#!/bin/sh
# The default job on the bundled corpus: the loss falls, the run directory
# holds the effective config and one metrics line per step, the same seed and
# layout reproduce the losses bit for bit, and 2 ranks give the 1-rank losses
# up to rounding.
. "$FB_SRCDIR/tests/e2e/lib.sh"

losses() { sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$1"; }

R1="$SCRATCH/run1"
run_fabula 1 train --steps 40 --run-dir "$R1" --set steps_per_print=10
cat "$SCRATCH/out.txt"
check "default run exits 0" '[ $RC -eq 0 ]'
check "effective config saved" '[ -s "$R1/config.json" ]'
check "one metrics line per step" '[ "$(wc -l < "$R1/metrics.jsonl")" -eq 40 ]'
first=$(losses "$R1/metrics.jsonl" | head -n 1)
last=$(losses "$R1/metrics.jsonl" | tail -n 1)
echo "loss: first $first, last $last"
check "loss falls by at least 1 nat" "awk -v a=$first -v b=$last 'BEGIN{exit !(a - b > 1.0)}'"
check "console lines carry loss, lr and ETA" 'grep -q "step 40/40 | loss" "$SCRATCH/out.txt" && grep -q ETA "$SCRATCH/out.txt"'

R2="$SCRATCH/run2"
run_fabula 1 train --steps 40 --run-dir "$R2"
check "same seed and layout: identical losses" '[ "$(losses "$R1/metrics.jsonl")" = "$(losses "$R2/metrics.jsonl")" ]'

# Same global batch (8 samples) as 1 rank x 2 micro-batches and as 2 ranks x 1
# (dropless, no aux loss: those are per-micro-batch statistics).
A="$SCRATCH/a"; B="$SCRATCH/b"
SAME="--set train_batch_size=8 --set train_micro_batch_size_per_gpu=4 --set model.capacity_factor=0 --set model.router_aux_loss_coef=0"
run_fabula 1 train --steps 10 --run-dir "$A" $SAME
check "1 rank, accumulation 2: exit 0" '[ $RC -eq 0 ]'
run_fabula 2 train --steps 10 --run-dir "$B" $SAME
check "2 ranks, accumulation 1: exit 0" '[ $RC -eq 0 ]'
losses "$A/metrics.jsonl" > "$SCRATCH/a.txt"
losses "$B/metrics.jsonl" > "$SCRATCH/b.txt"
paste "$SCRATCH/a.txt" "$SCRATCH/b.txt"
check "1 vs 2 ranks: losses equal within 1e-5 relative" \
    "paste '$SCRATCH/a.txt' '$SCRATCH/b.txt' | awk '{d=\$1-\$2; if (d<0) d=-d; if (d > 1e-5*\$2) bad=1} END{exit bad}' && [ -s '$SCRATCH/a.txt' ]"

# The length curriculum and the sequence-length warm-up drive the trainer:
# max_len grows from 64 to the full 128 over 8 steps (multiples of 64).
C="$SCRATCH/curriculum"
run_fabula 2 train --steps 12 --run-dir "$C" --set data.curriculum.enabled=true \
    --set data.curriculum.short_threshold=64 --set data.curriculum.long_threshold=120 \
    --set data.seq_len_warmup.enabled=true --set data.seq_len_warmup.start=64 --set data.seq_len_warmup.steps=8
lens=$(sed -n 's/.*"max_len": *\([0-9]*\).*/\1/p' "$C/metrics.jsonl" | tr '\n' ' ')
echo "max_len per step: $lens"
check "curriculum + warm-up run: exit 0, max_len 64 at first and 128 at the end" \
    '[ $RC -eq 0 ] && [ "${lens%% *}" = 64 ] && [ "$(echo $lens | awk "{print \$NF}")" = 128 ]'
finish
