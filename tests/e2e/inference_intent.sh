#!/bin/sh
# The inference commands do what their user expects (issue 46):
#  - `generate --tokenizer` / `export --tokenizer` with another tokenizer
#    than the checkpoint's: exit 3 naming both (checked against its
#    data.tokenizer, or, that file gone, its corpus's record of it); the
#    same tokenizer from another place runs;
#  - `eval --checkpoint --logits-out` of an MoE trained with capacity gives
#    the logits of its export (dropless, as `generate` and transformers'
#    Mixtral compute), bit for bit, and says so, on a sequence whose tokens
#    crowd one expert;
#  - `export` of the default MoE without --allow-dropless-inference: exit 2
#    naming the flag and the default's capacity; the help says so;
#  - `plan memory` with bf16 on the CPU backend says it plans fp32.
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
SMALL="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=64 --set data.train=$SAMPLE"
show() { sed 's/^/  | /' "$1" | head -n 8; }

# a byte-tokenizer MoE (capacity 1.25, the default) with room for 512 ids
timeout 120 "$FABULA" train --steps 5 --run-dir bytes_run $SMALL --set model.vocab_size=512 >train.out 2>&1 ||
    { tail -5 train.out; exit 99; }
CK=bytes_run/checkpoints/step-00000005.h5
"$FABULA" tokenizer train --input "$SAMPLE" --output bpe.json --vocab-size 300 >tok.out 2>&1 || { cat tok.out; exit 99; }

timeout 60 "$FABULA" generate --checkpoint "$CK" --prompt "The" --max-new-tokens 4 --tokenizer bpe.json >gen.out 2>gen.err
RC=$?
check "generate --tokenizer of another vocabulary: exit 3 naming both tokenizers" \
    '[ $RC -eq 3 ] && grep -q "error: --tokenizer bpe.json (fabula-bpe, vocabulary 300, sha256 .*) is not the tokenizer .*step-00000005.h5 was trained with, data.tokenizer = bytes (bytes, vocabulary 269" gen.err && [ ! -s gen.out ]' ||
    show gen.err
timeout 60 "$FABULA" generate --checkpoint "$CK" --prompt "The" --max-new-tokens 4 --tokenizer bytes >gen.out 2>gen.err
RC=$?
check "generate --tokenizer bytes, the checkpoint's own: exit 0" '[ $RC -eq 0 ]' || show gen.err
timeout 60 "$FABULA" export --checkpoint "$CK" --output exp_bad --tokenizer bpe.json --allow-dropless-inference -q \
    >exp.out 2>exp.err
RC=$?
check "export --tokenizer of another vocabulary: exit 3 naming both, nothing written" \
    '[ $RC -eq 3 ] && grep -q "is not the tokenizer .* was trained with" exp.err && [ ! -e exp_bad/config.json ]' || show exp.err

# trained on a corpus whose tokenizer file is then gone: its record decides
cp bpe.json tokA.json
"$FABULA" prep -q -t tokA.json --max-seq-len 64 --overlap 8 --min-seq-len 16 -o corpus.h5 "$SAMPLE" >prep.out 2>&1 ||
    { cat prep.out; exit 99; }
timeout 120 "$FABULA" train --steps 2 --run-dir bpe_run $SMALL --set model.vocab_size=512 --set data.corpus=corpus.h5 \
    --set data.tokenizer=tokA.json >train2.out 2>&1 || { tail -5 train2.out; exit 99; }
mv tokA.json tokA_moved.json
CK2=bpe_run/checkpoints/step-00000002.h5
timeout 60 "$FABULA" generate --checkpoint "$CK2" --prompt "The" --max-new-tokens 4 --tokenizer bytes >gen.out 2>gen.err
RC=$?
check "data.tokenizer gone, --tokenizer bytes against the corpus's record: exit 3" \
    '[ $RC -eq 3 ] && grep -q "its corpus corpus.h5 was made with a fabula-bpe tokenizer of vocabulary 300" gen.err' || show gen.err
timeout 60 "$FABULA" generate --checkpoint "$CK2" --prompt "The" --max-new-tokens 4 --tokenizer tokA_moved.json \
    >gen.out 2>gen.err
RC=$?
check "data.tokenizer moved, --tokenizer at its new place: exit 0" '[ $RC -eq 0 ]' || show gen.err

# the logits of eval --logits-out are those of the export
IDS=$(awk 'BEGIN { s = "101"; for (i = 1; i < 48; i++) s = s ",101"; for (i = 0; i < 16; i++) s = s ",32"; print s }')
timeout 60 "$FABULA" export --checkpoint "$CK" --output exp -q >exp.out 2>exp.err
RC=$?
check "export of the default MoE without --allow-dropless-inference: exit 2 naming the flag and the default's 1.25" \
    '[ $RC -eq 2 ] && grep -q "model.capacity_factor = 1.25 (the default MoE.s is 1.25) dropped the assignments" exp.err &&
     grep -q "Give --allow-dropless-inference to export it" exp.err' || show exp.err
"$FABULA" export --help >help.txt
check "export --help: a model trained with capacity (the default MoE) needs --allow-dropless-inference" \
    'grep -q "model.capacity_factor > 0: the default" help.txt && grep -q "is exported only with --allow-dropless-inference" help.txt'
timeout 60 "$FABULA" export --checkpoint "$CK" --output exp --allow-dropless-inference -q >exp.out 2>exp.err ||
    { cat exp.err; exit 99; }
timeout 60 "$FABULA" eval --checkpoint "$CK" --tokens "$IDS" --logits-out ck.npy >eval_ck.out 2>&1
RC1=$?
timeout 60 "$FABULA" eval --model exp --tokens "$IDS" --logits-out ex.npy >eval_ex.out 2>&1
RC2=$?
check "eval --checkpoint --logits-out of a capacity-trained MoE equals its export's, bit for bit, and says dropless" \
    '[ $RC1 -eq 0 ] && [ $RC2 -eq 0 ] && cmp -s ck.npy ex.npy &&
     grep -q "dropless, as .fabula generate. and the export compute them (the checkpoint.s model.capacity_factor 1.25" eval_ck.out' ||
    show eval_ck.out

# plan memory says what it plans
"$FABULA" plan memory --world 2 --set bf16.enabled=true >plan.txt 2>&1
check "plan memory, bf16 on the CPU backend: a note that it plans the fp32 run" \
    'grep -q "^note: bf16.enabled, but run.backend \"cpu\" computes in fp32" plan.txt'
"$FABULA" plan memory --world 2 --set bf16.enabled=true --json >plan.json 2>&1
"$FABULA" plan memory --world 2 --set bf16.enabled=true --set run.backend=cpu16 --json >plan16.json 2>&1
check "plan memory --json: compute_dtype fp32 on cpu, bf16 on cpu16" \
    'grep -q "\"compute_dtype\":\"fp32\"" plan.json && grep -q "\"compute_dtype\":\"bf16\"" plan16.json'
"$FABULA" plan memory --world 2 --set bf16.enabled=true --set run.backend=cpu16 >plan16.txt 2>&1
check "plan memory, bf16 on cpu16: no note" '! grep -q "^note: bf16" plan16.txt'
finish
