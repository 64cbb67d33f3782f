#!/bin/sh
# The whole Hugging Face round trip, from a model transformers made to one
# it loads back: tiny Llama (fp32, untied) and Mixtral (sharded) saved by
# transformers itself (tests/e2e/hf_import_ref.py make), then
#  - `fabula train` with model.init_from, 10 steps, on a corpus prepared
#    with the model's tokenizer.json (fabula's specials appended);
#  - `fabula export` of the last checkpoint, loaded by transformers
#    (AutoModelForCausalLM, AutoTokenizer): its logits equal fabula's
#    (`eval --checkpoint --logits-out`) within 1e-5 relative, and so do
#    fabula's own of the export (`eval --model`);
#  - the exported tokenizer encodes every novel of inputs/sample.jsonl to
#    the ids `fabula tokenizer encode` gives, its added tokens at fabula's ids;
#  - greedy `fabula generate --model EXPORT` of 64 tokens equals
#    transformers' generate(do_sample=False) token for token, and
#    `generate --checkpoint` of the same weights; a seeded sample from the
#    export is the same run to run;
#  - bad input to `generate --model`.
# transformers is $HF_PYTHON; without it the test skips.
. "$FB_SRCDIR/tests/e2e/lib.sh"
[ -n "${HF_PYTHON:-}" ] || { echo "HF_PYTHON is empty (configure found no transformers): skipped"; exit 77; }
cd "$SCRATCH" || exit 99
HP="$HF_PYTHON"
MAKE="$FB_SRCDIR/tests/e2e/hf_import_ref.py"
REF="$FB_SRCDIR/tests/e2e/hf_roundtrip_ref.py"
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
IDS0=5,17,250,3,99,120,7,0,299,42,11,64,1,2,3
IDS=$IDS0,310
"$HP" "$MAKE" make m >make.out 2>&1 || { cat make.out; exit 99; }
"$FABULA" prep -q -t m/tokenizer.json --max-seq-len 64 --overlap 8 --min-seq-len 16 -o corpus.h5 "$SAMPLE" \
    >prep.out 2>&1 || { cat prep.out; exit 99; }
"$FABULA" tokenizer encode --tokenizer m/tokenizer.json --input "$SAMPLE" --output fabula.ids >enc.out 2>&1 \
    || { cat enc.out; exit 99; }
"$FABULA" tokenizer info m/tokenizer.json | awk '/^  [0-9]+ </ {print $2, $1}' >sp_fabula.txt
[ -s sp_fabula.txt ] || exit 99
GENRE=$(awk '$1 == "<|genre_romance|>" {print $2}' sp_fabula.txt)

for n in llama mixtral_sharded; do
    printf '{"model": {"init_from": "m/%s"}, "data": {"corpus": "corpus.h5", "tokenizer": "m/tokenizer.json", "seq_len": 64, "overlap": 8, "min_seq_len": 16}, "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.0005}}}\n' \
        "$n" >"$n.json"
    timeout 300 $MPIEXEC -n 2 "$FABULA" train --steps 10 --run-dir "run_$n" "$n.json" >"train_$n.out" 2>&1
    RC=$?
    CK="run_$n/checkpoints/step-00000010.h5"
    check "$n: 10 steps from init_from at 2 ranks (exit $RC) leave a checkpoint" '[ $RC -eq 0 ] && [ -f "$CK" ]' \
        || tail -n 15 "train_$n.out"
    "$FABULA" export --checkpoint "$CK" --output "x_$n" -q >"export_$n.out" 2>&1
    RC=$?
    check "$n: fabula export (exit $RC)" '[ $RC -eq 0 ]' || cat "export_$n.out"

    "$FABULA" eval --checkpoint "$CK" --tokens "$IDS" --logits-out "f_$n.npy" >/dev/null 2>&1
    "$FABULA" eval --model "x_$n" --tokens "$IDS" --logits-out "fx_$n.npy" >/dev/null 2>&1
    "$HP" "$REF" logits "x_$n" "$IDS" "h_$n.npy" >"hl_$n.out" 2>&1
    check "$n: transformers' logits of the export equal fabula's of the checkpoint within 1e-5" \
        '"$HP" "$MAKE" compare "f_$n.npy" "h_$n.npy" 1e-5'
    check "$n: fabula's logits of the export (eval --model) equal transformers' within 1e-5" \
        '"$HP" "$MAKE" compare "fx_$n.npy" "h_$n.npy" 1e-5'
    check "$n: the 10 steps changed the weights (logits differ from the untrained model's)" \
        '"$HP" "$REF" logits "m/$n" "$IDS0" "h0_$n.npy" && "$FABULA" eval --checkpoint "$CK" --tokens "$IDS0" --logits-out "f0_$n.npy" >/dev/null 2>&1 && "$HP" "$REF" diff "f0_$n.npy" "h0_$n.npy" 1e-3'

    "$HP" "$REF" encode "x_$n" "$SAMPLE" "hf_$n.ids" >"henc_$n.out" 2>&1
    check "$n: the exported tokenizer encodes every novel to fabula's ids" 'cmp -s fabula.ids "hf_$n.ids"'
    "$HP" "$REF" specials "x_$n" >"sp_$n.txt" 2>&1
    check "$n: its added tokens are fabula's special tokens at fabula's ids" 'cmp -s sp_fabula.txt "sp_$n.txt"' \
        || diff sp_fabula.txt "sp_$n.txt" | head -n 5
    P="The old house stood"
    "$HP" "$REF" greedy "x_$n" "$P" 64 "hg_$n.txt" >"hg_$n.out" 2>&1 || cat "hg_$n.out"
    "$FABULA" generate --model "x_$n" --prompt "$P" --max-new-tokens 64 --stop-at none --ids-out "fg_$n.txt" \
        >"fg_$n.out" 2>"fg_$n.err"
    RC=$?
    check "$n: greedy generate --model of the export (exit $RC) equals transformers' generate, 64 tokens" \
        '[ $RC -eq 0 ] && [ $(wc -w <"fg_$n.txt") -eq 64 ] && cmp -s "fg_$n.txt" "hg_$n.txt" &&
         [ $(tr " " "\n" <"fg_$n.txt" | sort -u | wc -l) -gt 2 ]' \
        || { head -c 300 "fg_$n.txt"; echo; head -c 300 "hg_$n.txt"; echo; tail -n 3 "fg_$n.err"; }
    "$HP" "$REF" greedy "x_$n" "$P" 64 "hgg_$n.txt" "$GENRE" >/dev/null 2>&1
    "$FABULA" generate --model "x_$n" --genre romance --prompt "$P" --max-new-tokens 64 --stop-at none \
        --ids-out "fgg_$n.txt" >/dev/null 2>&1
    check "$n: the same with --genre romance (the genre token first)" \
        '[ -s "fgg_$n.txt" ] && cmp -s "fgg_$n.txt" "hgg_$n.txt" && ! cmp -s "fgg_$n.txt" "fg_$n.txt"'
    "$FABULA" generate --checkpoint "$CK" --prompt "$P" --max-new-tokens 64 --stop-at none --ids-out "fc_$n.txt" \
        >/dev/null 2>&1
    check "$n: generate --checkpoint gives the same tokens" 'cmp -s "fg_$n.txt" "fc_$n.txt"'
    for r in 1 2; do
        "$FABULA" generate --model "x_$n" --prompt "Once" --temperature 0.9 --top-p 0.9 --seed 7 --max-new-tokens 32 \
            --stop-at none --ids-out "fs${r}_$n.txt" >/dev/null 2>&1
    done
    check "$n: seeded sampling from the export is the same run to run" \
        '[ -s "fs1_$n.txt" ] && cmp -s "fs1_$n.txt" "fs2_$n.txt"'
done

mkdir empty
"$FABULA" generate --model empty --prompt hi >bad1.out 2>&1
RC=$?
check "generate --model DIR without config.json: exit 2 naming the file (got $RC)" \
    '[ $RC -eq 2 ] && grep -q "empty/config.json" bad1.out' || cat bad1.out
"$FABULA" generate --model x_llama --checkpoint run_llama/checkpoints/step-00000010.h5 --prompt hi >bad2.out 2>&1
RC=$?
check "generate with both --model and --checkpoint: exit 2 (got $RC)" \
    '[ $RC -eq 2 ] && grep -q "one of --checkpoint CKPT and --model DIR" bad2.out' || cat bad2.out
mkdir notok && cp x_llama/config.json x_llama/model.safetensors notok/
"$FABULA" generate --model notok --prompt hi >bad3.out 2>&1
RC=$?
check "generate --model DIR without tokenizer.json: exit 4 naming it (got $RC)" \
    '[ $RC -eq 4 ] && grep -q "notok/tokenizer.json" bad3.out' || cat bad3.out
finish
