#!/bin/sh
# `fabula plan sampler`: the sampler simulated on the bundled corpus, and its
# usage and input errors; `fabula plan calibrate`'s form and usage errors.
. "$FB_SRCDIR/tests/e2e/lib.sh"

(cd "$FB_SRCDIR" && "$FABULA" plan sampler --jsonl inputs/sample.jsonl --split chapters --max-seq-len 32768 \
    --simulate-ranks 2,4 --steps 5 --batch 4) >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
rc=$?
check "chapters of the bundled corpus: exit 0" '[ $rc -eq 0 ]'
check "33 chapter samples reported" 'grep -q "^corpus: 33 samples (chapters)" "$SCRATCH/out.txt"'
for r in 2 4; do
    for s in uniform greedy lpt packing; do
        check "a $s line for $r ranks" 'grep -Eq "^ +$r +$s " "$SCRATCH/out.txt"'
    done
done
check "packing compared with padding" 'grep -q "best_fit .* padded to 32768" "$SCRATCH/out.txt"'

# One micro-batch per rank: best_fit fills micro-batches one after the
# other, so their costs differ widely; balanced packing evens them out.
(cd "$FB_SRCDIR" && "$FABULA" plan sampler --jsonl inputs/sample.jsonl --split chapters --max-seq-len 32768 \
    --max-tokens 131072 --accum 1 --simulate-ranks 4 --steps 8 --batch 8) >"$SCRATCH/one.txt" 2>&1
rc=$?
lpt=$(sed -n 's/^ *4 *lpt *| *\([0-9.]*\)%.*/\1/p' "$SCRATCH/one.txt")
bal=$(sed -n 's/.*balanced [0-9.]*% ([0-9]*, [0-9]*; cost imbalance \([0-9.]*\)%.*/\1/p' "$SCRATCH/one.txt")
echo "one micro-batch per rank, 4 ranks: mean cost imbalance best_fit + lpt $lpt%, balanced + lpt $bal%"
check "one micro-batch per rank: balanced packing below a quarter of best_fit's imbalance" \
    "[ $rc -eq 0 ] && [ -n \"$lpt\" ] && [ -n \"$bal\" ] && awk -v a=$lpt -v b=$bal 'BEGIN{exit !(b < a / 4)}'"

printf '12\n# comment\n\n300\n' >"$SCRATCH/lens.txt"
"$FABULA" plan sampler --corpus-lengths "$SCRATCH/lens.txt" --simulate-ranks 3 --max-seq-len 200 \
    >"$SCRATCH/out.txt" 2>&1
rc=$?
check "lengths file: exit 0, the long one cut" '[ $rc -eq 0 ] && grep -q "2 samples.*1 cut to max_seq_len 200" "$SCRATCH/out.txt"'

printf '12\nseven\n' >"$SCRATCH/bad.txt"
"$FABULA" plan sampler --corpus-lengths "$SCRATCH/bad.txt" --simulate-ranks 3 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "bad length: exit 3 naming FILE:LINE" '[ $rc -eq 3 ] && grep -q "bad.txt:2" "$SCRATCH/out.txt"'

"$FABULA" plan sampler --corpus-lengths "$SCRATCH/lens.txt" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "no --simulate-ranks: exit 2" '[ $rc -eq 2 ] && grep -q -- "--simulate-ranks" "$SCRATCH/out.txt"'
"$FABULA" plan sampler --corpus-lengths "$SCRATCH/lens.txt" --simulate-ranks 0 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "zero ranks: exit 2" '[ $rc -eq 2 ]'
"$FABULA" plan nothing >"$SCRATCH/out.txt" 2>&1
rc=$?
check "unknown plan: exit 2 naming it" '[ $rc -eq 2 ] && grep -q nothing "$SCRATCH/out.txt"'
# plan calibrate: a measurement (its value varies from run to run, so only
# its form is checked), and its usage errors
(cd "$FB_SRCDIR" && "$FABULA" plan calibrate --long 256 --tokens 512 --repeats 1) >"$SCRATCH/out.txt" 2>&1
rc=$?
cat "$SCRATCH/out.txt"
check "plan calibrate: exit 0, both passes timed, a c or the reason there is none" \
    '[ $rc -eq 0 ] && grep -q "^calibrate: 512 tokens as samples of 64: [0-9.]* s, of 256: [0-9.]* s" "$SCRATCH/out.txt" && grep -Eq "^data.attention_cost measured [0-9.e+-]+ \(FLOP-based|no attention term measurable" "$SCRATCH/out.txt"'
"$FABULA" plan calibrate --short 128 --long 64 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan calibrate: --short above --long: exit 2 naming both" '[ $rc -eq 2 ] && grep -q -- "--short (128) must be below --long (64)" "$SCRATCH/out.txt"'
# a bad config is named (the error was once swallowed: exit 2, no message)
printf '{"model": {"hidden_size": -3}}\n' >"$SCRATCH/bad.json"
"$FABULA" plan calibrate "$SCRATCH/bad.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan calibrate: a bad config key: exit 2 and the message naming it" \
    '[ $rc -eq 2 ] && grep -q "model.hidden_size" "$SCRATCH/out.txt"'
"$FABULA" plan calibrate --help >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan calibrate --help: exit 0" '[ $rc -eq 0 ] && grep -q -- "--repeats" "$SCRATCH/out.txt"'
"$FABULA" plan sampler --help >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan sampler --help: exit 0" '[ $rc -eq 0 ] && grep -q -- "--split" "$SCRATCH/out.txt"'
finish
