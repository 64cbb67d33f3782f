#!/bin/sh
# The validation loss per genre and `fabula eval` (docs/monitoring.md
# "Validation loss"): training with run.eval_interval writes valid_ppl and
# valid_genre_lm_loss beside valid_lm_loss; `fabula eval --checkpoint` on the
# checkpoint of an evaluation step prints the same digits as the training
# (1 rank, and 2 ranks with ep 2 and ZeRO 3), on another rank count within
# 1e-6; per-genre rows weighted by their tokens give the total; a
# single-genre evaluation's genre loss is the total; --split train spreads
# its samples over the training novels; bad input refused.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}

# twelve short novels of two genres, so that the held-out ones mix them
"$PY" - "$FB_SRCDIR/inputs/sample.jsonl" "$SCRATCH/small.jsonl" <<'PYEOF'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as out:
    for k in range(3):
        for d in src:
            out.write(json.dumps({"title": "%s %d" % (d["title"], k), "genre": d["genre"],
                                  "content": d["content"][k * 1200:(k + 1) * 1200]}, ensure_ascii=False) + "\n")
PYEOF
run_fabula 1 prep -q --max-seq-len 128 --overlap 16 --min-seq-len 16 --valid-fraction 0.34 --seed 7 \
    --output "$SCRATCH/split.h5" "$SCRATCH/small.jsonl"
check "prep with a validation split" '[ $RC -eq 0 ]'
run_fabula 1 prep -q --max-seq-len 128 --overlap 16 --min-seq-len 16 --output "$SCRATCH/nosplit.h5" "$SCRATCH/small.jsonl"
check "prep without one" '[ $RC -eq 0 ]'

SMALL="--set model.hidden_size=32 --set model.intermediate_size=64"
train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    run_fabula "$np" train --steps 4 --run-dir "$SCRATCH/$name" --set data.corpus="$SCRATCH/split.h5" \
        --set data.tokenizer=bytes --set data.seq_len=128 --set train_batch_size=8 \
        --set train_micro_batch_size_per_gpu=2 --set run.eval_interval=2 --set run.eval_samples=40 \
        --set checkpoint.save_interval=2 --set checkpoint.keep_last=0 $SMALL "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.out"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/$name.out"
}
evaluate() { # NP OUT ARGS...
    np=$1; out=$2; shift 2
    run_fabula "$np" eval "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$out"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/$out"
}
# same STEP RUN EVAL_OUT TOL: the table of EVAL_OUT equals step STEP's
# validation fields of RUN's metrics.jsonl (TOL 0: the same digits), its
# genre rows weighted by tokens give the total, ppl = exp(loss)
same() {
    "$PY" - "$1" "$SCRATCH/$2/metrics.jsonl" "$SCRATCH/$3" "$4" <<'PYEOF'
import json, math, sys
step, metrics, table, tol = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
rec = [json.loads(l) for l in open(metrics) if json.loads(l)["step"] == step][-1]
rows = {}
for l in open(table):
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    if l.startswith("| ") and c[0] != "genre":
        rows[c[0]] = (int(c[1]), int(c[2]), float(c[3]), float(c[4]))
def eq(a, b):
    return a == b if tol == 0 else abs(a - b) <= tol * abs(b)
ok = eq(rows["all"][2], rec["valid_lm_loss"]) and eq(rows["all"][3], rec["valid_ppl"])
ok &= set(rows) - {"all"} == set(rec["valid_genre_lm_loss"])
for g, v in rec["valid_genre_lm_loss"].items():
    ok &= eq(rows[g][2], v)
# independent of fabula's own sums: the genres' token-weighted mean is the total
genres = [r for g, r in rows.items() if g != "all"]
ok &= sum(r[1] for r in genres) == rows["all"][1] and sum(r[0] for r in genres) == rows["all"][0]
ok &= abs(sum(r[1] * r[2] for r in genres) / rows["all"][1] - rows["all"][2]) <= 1e-7 * rows["all"][2]
ok &= abs(math.exp(rec["valid_lm_loss"]) - rec["valid_ppl"]) <= 1e-7 * rec["valid_ppl"]
print("step %d: metrics %s ppl %s %s; eval %s" % (step, rec["valid_lm_loss"], rec["valid_ppl"],
      rec["valid_genre_lm_loss"], rows))
sys.exit(0 if ok else 1)
PYEOF
}

train 1 v1
check "1 rank: training with evaluation" '[ $RC -eq 0 ]'
check "the console prints the perplexity and both genres" \
    'grep -q "^step 2 | validation lm loss [0-9.]* | ppl [0-9.]* | fantasy [0-9.]*, romance [0-9.]*$" "$SCRATCH/v1.out"'
check "metrics: valid_ppl and valid_genre_lm_loss on evaluation steps only" \
    '[ "$(grep -c "\"valid_ppl\":.*\"valid_genre_lm_loss\":{\"fantasy\":[-0-9.e]*,\"romance\":" "$SCRATCH/v1/metrics.jsonl")" -eq 2 ] &&
     [ "$(grep -c valid_ppl "$SCRATCH/v1/metrics.jsonl")" -eq 2 ]'
evaluate 1 e1.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000002.h5"
cat "$SCRATCH/e1.txt"
check "fabula eval on step 2's checkpoint: exit 0, the training's digits (total, ppl, per genre)" \
    '[ $RC -eq 0 ] && same 2 v1 e1.txt 0'
evaluate 2 e1r2.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000004.h5"
check "the 1-rank checkpoint of step 4 evaluated on 2 ranks: within 1e-6" '[ $RC -eq 0 ] && same 4 v1 e1r2.txt 1e-6'

train 2 v2 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3
check "2 ranks, ep 2, ZeRO 3: training with evaluation" '[ $RC -eq 0 ]'
evaluate 2 e2.txt --checkpoint "$SCRATCH/v2/checkpoints/step-00000004.h5"
check "fabula eval on 2 ranks: the training's digits" '[ $RC -eq 0 ] && same 4 v2 e2.txt 0'
evaluate 1 e2r1.txt --checkpoint "$SCRATCH/v2/checkpoints/step-00000004.h5"
check "the same checkpoint on 1 rank (ep 1): within 1e-6" '[ $RC -eq 0 ] && same 4 v2 e2r1.txt 1e-6'

evaluate 1 e1.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000002.h5" --samples 1
check "--samples 1 (one sample, so one genre): one genre row, its loss is the total" \
    '[ $RC -eq 0 ] && [ "$(grep -Ec "^\| [a-z]+ \| 1 \|" "$SCRATCH/e1.txt")" -eq 2 ] &&
     [ "$(sed -n "/^| all /d; s/^| [a-z]* | 1 | [0-9]* | \([^ ]*\) |.*/\1/p" "$SCRATCH/e1.txt")" = "$(sed -n "s/^| all | 1 | [0-9]* | \([^ ]*\) |.*/\1/p" "$SCRATCH/e1.txt")" ]'
evaluate 1 etrain.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000002.h5" --split train --samples 30
check "--split train: the training samples, spread over its novels" \
    '[ $RC -eq 0 ] && grep -q "training split of .*split.h5: 30 of [0-9]* samples (spread over 8 novels, 2 genres)" "$SCRATCH/etrain.txt"'

# bad input
evaluate 1 bad.txt --checkpoint "$SCRATCH/none.h5"
check "a missing checkpoint: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "none.h5: cannot open" "$SCRATCH/bad.txt"'
echo "not a checkpoint" >"$SCRATCH/fake.h5"
evaluate 2 bad.txt --checkpoint "$SCRATCH/fake.h5"
check "a file that is not a checkpoint: exit 3, one message" \
    '[ $RC -eq 3 ] && [ "$(grep -c "fake.h5: HDF5 cannot open it" "$SCRATCH/bad.txt")" -eq 1 ]'
evaluate 1 bad.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000002.h5" --corpus "$SCRATCH/nosplit.h5"
check "a corpus without a validation split: exit 2 naming --split val" \
    '[ $RC -eq 2 ] && grep -q "fabula eval --split val: .*nosplit.h5 has no validation sample" "$SCRATCH/bad.txt"'
evaluate 1 bad.txt --checkpoint "$SCRATCH/v1/checkpoints/step-00000002.h5" --corpus "$SCRATCH/nowhere.h5"
check "a missing corpus: exit 4" '[ $RC -eq 4 ] && grep -q "nowhere.h5" "$SCRATCH/bad.txt"'
evaluate 1 bad.txt --split val
check "no --checkpoint: exit 2" '[ $RC -eq 2 ] && grep -q "checkpoint CKPT is required" "$SCRATCH/bad.txt"'
evaluate 1 bad.txt --checkpoint x.h5 --split test
check "--split test: exit 2" '[ $RC -eq 2 ] && grep -q "expected val or train" "$SCRATCH/bad.txt"'
evaluate 1 bad.txt --checkpoint x.h5 --samples 0
check "--samples 0: exit 2" '[ $RC -eq 2 ] && grep -q "samples" "$SCRATCH/bad.txt"'
# a model trained on text (the default source) has no validation split
run_fabula 1 train --steps 1 --run-dir "$SCRATCH/text" $SMALL --set data.seq_len=32
check "a text-source run" '[ $RC -eq 0 ]'
evaluate 1 bad.txt --checkpoint "$SCRATCH/text/checkpoints/step-00000001.h5"
check "its checkpoint with --split val: exit 2 saying to give --corpus" '[ $RC -eq 2 ] && grep -q "give --corpus" "$SCRATCH/bad.txt"'
evaluate 1 etext.txt --checkpoint "$SCRATCH/text/checkpoints/step-00000001.h5" --split train --samples 8
check "its checkpoint with --split train: the text's windows" '[ $RC -eq 0 ] && grep -q "^| all | 8 |" "$SCRATCH/etext.txt"'
run_fabula 1 eval --help
check "--help: exit 0, the usage" '[ $RC -eq 0 ] && grep -q "usage: fabula eval --checkpoint CKPT" "$SCRATCH/out.txt"'
finish
