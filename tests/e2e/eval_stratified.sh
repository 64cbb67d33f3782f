#!/bin/sh
# Which samples a validation takes (docs/loader.md, "Validation samples"):
# prep prints the novels it held out, by title (checked against the input
# read by Python, through the novel rows the file records); run.eval_samples
# takes samples of every held-out novel and genre, not the first novel's
# (the old order: 4 samples were 4 windows of the first held-out novel, one
# genre); the same set on 1 and 2 ranks; `fabula eval --samples 4` counts 2
# of each novel; too few eval_samples for the held-out novels is said.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TOOL="$FB_BUILDDIR/tests/e2e/corpus_tool"
PY=${PYTHON:-python3}

# seed 3 holds out 紅樓夢 (romance, the first novel of the file) and Alice's
# Adventures in Wonderland (fantasy)
run_fabula 1 prep --max-seq-len 128 --overlap 16 --min-seq-len 16 --valid-fraction 0.5 --seed 3 \
    --output "$SCRATCH/c.h5" inputs/sample.jsonl
cp "$SCRATCH/out.txt" "$SCRATCH/prep.txt"
check "prep with a validation split" '[ $RC -eq 0 ]'
sed -n '/validation novels (held out, whole):/,/^  segment/p' "$SCRATCH/prep.txt" | sed '1d;$d' \
    | sed 's/^    \(.*\) ([a-z]*, [0-9]* samples\{0,1\})$/\1/' >"$SCRATCH/printed.txt"
"$MPIEXEC" -n 1 "$TOOL" novels "$SCRATCH/c.h5" 1 >"$SCRATCH/valid_rows.txt" 2>&1
"$PY" - "$FB_SRCDIR/inputs/sample.jsonl" "$SCRATCH/valid_rows.txt" >"$SCRATCH/expected.txt" <<'PYEOF'
import json, sys
titles = [json.loads(l)["title"] for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
for row in open(sys.argv[2]):
    print(titles[int(row)])
PYEOF
echo "held out, as prep printed them:"; cat "$SCRATCH/printed.txt"
check "prep prints the held-out novels by title: the titles of the rows /novels/split marks" \
    '[ "$(wc -l <"$SCRATCH/expected.txt")" -eq 2 ] && cmp -s "$SCRATCH/printed.txt" "$SCRATCH/expected.txt"'

train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps 2 --run-dir "$SCRATCH/$name" --set data.corpus="$SCRATCH/c.h5" \
        --set data.tokenizer=bytes --set data.seq_len=128 --set train_batch_size=4 \
        --set train_micro_batch_size_per_gpu=2 --set run.eval_interval=1 --set run.eval_samples=4 "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/$name.out"
}
genres() { sed -n 's/.*"valid_genre_lm_loss":{\([^}]*\)}.*/\1/p' "$SCRATCH/$1/metrics.jsonl" | sed 's/:[-0-9.e+]*//g'; }
valid() { sed -n 's/.*"step":\([0-9]*\),.*"valid_lm_loss":\([-0-9.e+]*\).*/\1 \2/p' "$SCRATCH/$1/metrics.jsonl"; }

train 1 s1
echo "genres evaluated: $(genres s1 | tr '\n' ' ')"
check "4 validation samples cover both held-out genres at every evaluation" \
    '[ $RC -eq 0 ] && [ "$(genres s1 | sort -u)" = "\"fantasy\",\"romance\"" ] && [ "$(genres s1 | wc -l)" -eq 2 ]'
check "the start says which novels and how much of them the evaluations cover" \
    'grep -q "validation split of .*c.h5: 2 novels held out by prep (紅樓夢 (romance), Alice.s Adventures in Wonderland (fantasy)), [0-9]* samples.*the same 4 samples are evaluated, spread over 2 of the 2 novels and 2 of the 2 genres" "$SCRATCH/s1.out"'
train 2 s2
valid s1 >"$SCRATCH/a.txt"; valid s2 >"$SCRATCH/b.txt"
check "2 ranks evaluate the same samples: the same validation losses within 1e-6" \
    '[ $RC -eq 0 ] && [ "$(wc -l <"$SCRATCH/b.txt")" -eq 2 ] && paste "$SCRATCH/a.txt" "$SCRATCH/b.txt" |
     awk "{d = \$2 - \$4; if (d < 0) d = -d; if (\$1 != \$3 || d > 1e-6 * \$2) bad = 1} END {exit bad}"'

run_fabula 1 eval --checkpoint "$SCRATCH/s1/checkpoints/step-00000002.h5" --samples 4
cat "$SCRATCH/out.txt"
check "fabula eval --samples 4: 2 samples of each held-out novel" \
    '[ $RC -eq 0 ] && grep -q "^| fantasy | 2 |" "$SCRATCH/out.txt" && grep -q "^| romance | 2 |" "$SCRATCH/out.txt" &&
     grep -q "4 of [0-9]* samples (spread over 2 novels, 2 genres)" "$SCRATCH/out.txt"'
check "... without noting the checkpoint config's default data.train and data.overlap as without effect" \
    '! grep -q "accepted without effect" "$SCRATCH/out.txt"'

train 1 few --set run.eval_samples=1
check "run.eval_samples below the held-out novels: said at start, with the value that covers them" \
    '[ $RC -eq 0 ] && grep -q "warning: run.eval_samples = 1 covers 1 of the 2 validation novels .*give run.eval_samples >= 2" "$SCRATCH/few.out"'
finish
