#!/bin/sh
# model.init_from: DIR and `fabula eval --model DIR` on tiny Llama and
# Mixtral models that transformers itself makes and saves (random init,
# save_pretrained): fp32 single file (untied), bf16 (tied, padding rows),
# sharded with model.safetensors.index.json (untied Mixtral), fp16 (tied
# Mixtral). The reference is transformers' own forward (tests/e2e/
# hf_import_ref.py), run with $HF_PYTHON; without it the test skips.
#  - `fabula eval --model DIR --tokens --logits-out`: the logits within 1e-5
#    relative of transformers' (fp32);
#  - `fabula train` with model.init_from on a corpus prepared with DIR's
#    tokenizer.json (fabula's specials appended): one step at lr 0 leaves the
#    imported weights; its checkpoint's logits (`eval --checkpoint
#    --logits-out`) equal transformers', the appended rows' logits the final
#    hidden state times the mean row, at 2 ranks ZeRO-3 (each rank read its
#    shard's slices) and, for Mixtral, expert parallelism 2;
#  - 10 steps at 1 rank and at 2 ranks ZeRO-3 (and ep 2): the same losses
#    within 1e-5;
#  - `eval --model DIR --corpus` gives the loss of that checkpoint;
#  - bad input: each a message naming the file and the documented exit code;
#    embedding or lm_head rows other than config.json's vocab_size refused,
#    as transformers refuses them.
. "$FB_SRCDIR/tests/e2e/lib.sh"
[ -n "${HF_PYTHON:-}" ] || { echo "HF_PYTHON is empty (configure found no transformers): skipped"; exit 77; }
cd "$SCRATCH" || exit 99
HP="$HF_PYTHON"
REF="$FB_SRCDIR/tests/e2e/hf_import_ref.py"
IDS=5,17,250,3,99,120,7,0,299,42,11,64,1,2,3
"$HP" "$REF" make m >make.out 2>&1 || { cat make.out; exit 99; }

for n in llama llama_tied_bf16 mixtral_sharded mixtral_tied_f16; do
    "$FABULA" eval --model "m/$n" --tokens "$IDS" --logits-out "f_$n.npy" >"eval_$n.out" 2>&1
    RC=$?
    "$HP" "$REF" logits "m/$n" "$IDS" "h_$n.npy" >/dev/null 2>&1
    check "$n: eval --model --logits-out (exit $RC) equals transformers' logits within 1e-5" \
        '[ $RC -eq 0 ] && "$HP" "$REF" compare "f_$n.npy" "h_$n.npy" 1e-5'
done
printf '5, 17\n250\t3,99 120,7 0 299 42 11 64 1 2 3\n' >ids.txt
"$FABULA" eval --model m/llama --tokens @ids.txt --logits-out f_file.npy >/dev/null 2>&1
check "--tokens @FILE: the same logits as the comma list" '"$HP" "$REF" compare f_file.npy f_llama.npy 0'

"$FABULA" prep -q -t m/tokenizer.json --max-seq-len 64 --overlap 8 --min-seq-len 16 -o corpus.h5 \
    "$FB_SRCDIR/inputs/sample.jsonl" >prep.out 2>&1 || { cat prep.out; exit 99; }

. "$FB_SRCDIR/tests/e2e/hf_lib.sh"

for case in "llama 313" "llama_tied_bf16 320" "mixtral_sharded 313" "mixtral_tied_f16 313"; do
    set -- $case
    n=$1; V=$2
    EP=""
    case $n in mixtral*) EP="--set parallel.expert_parallel_size=2" ;; esac
    # one step at lr 0: the checkpoint holds the imported weights
    train 2 "s0_$n" "$n" 1 --set zero_optimization.stage=3 --set checkpoint.save_interval=0 \
        --set scheduler.params.warmup_min_lr=0 $EP
    check "$n: 1 step at 2 ranks ZeRO-3 $EP at lr 0 (exit $RC)" \
        '[ $RC -eq 0 ] && grep -q "^step 1/1 .*lr 0.000e+00" "s0_$n.out"'
    "$FABULA" eval --checkpoint "s0_$n/checkpoints/step-00000001.h5" --tokens "$IDS" --logits-out "c_$n.npy" \
        >"ce_$n.out" 2>&1
    RC=$?
    "$HP" "$REF" logits "m/$n" "$IDS" "hv_$n.npy" "$V" >/dev/null 2>&1
    check "$n: its checkpoint's logits [T, $V] (exit $RC) are transformers', the appended rows' from the mean row" \
        '[ $RC -eq 0 ] && "$HP" "$REF" compare "c_$n.npy" "hv_$n.npy" 1e-5'
    train 1 "t1_$n" "$n" 10
    check "$n: 10 steps at 1 rank (exit $RC)" '[ $RC -eq 0 ]'
    train 2 "t2_$n" "$n" 10 --set zero_optimization.stage=3
    check "$n: 10 steps at 2 ranks ZeRO-3: the losses of 1 rank within 1e-5" '[ $RC -eq 0 ] && same_losses "t1_$n" "t2_$n"'
    if [ -n "$EP" ]; then
        train 2 "te_$n" "$n" 10 $EP --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
        check "$n: 10 steps at 2 ranks ep 2, ZeRO-2 with offload: the same losses" \
            '[ $RC -eq 0 ] && same_losses "t1_$n" "te_$n"'
    fi
done
# ZeRO-3 with the parameters offloaded: the import writes the host shards
train 2 t3_llama llama 10 --set zero_optimization.stage=3 --set zero_optimization.offload_param.device=cpu \
    --set zero_optimization.offload_optimizer.device=cpu
check "llama: 10 steps at 2 ranks ZeRO-3 with parameter offload: the same losses" \
    '[ $RC -eq 0 ] && same_losses t1_llama t3_llama'
# a resume (grown vocabulary, another layout) continues the same run
train 1 res_llama llama 2 --set checkpoint.save_interval=2
train 2 res_llama llama 10 --set checkpoint.save_interval=2 --set zero_optimization.stage=3
check "llama: resumed at step 2 on 2 ranks ZeRO-3 (exit $RC): the uninterrupted run's losses" \
    '[ $RC -eq 0 ] && grep -q "resumed from res_llama/checkpoints/step-00000002.h5" res_llama.out && same_losses t1_llama res_llama'
check "llama: the vocabulary grows by the 13 appended specials (said)" \
    'grep -q "vocabulary grows from 300 to 313" t1_llama.out && grep -q "\"vocab_size\": 313" t1_llama/config.json'
check "llama_tied_bf16: the padding rows hold the appended specials: no growth" \
    '! grep -q "vocabulary grows" t1_llama_tied_bf16.out && grep -q "\"vocab_size\": 320" t1_llama_tied_bf16/config.json'

# eval --model DIR --corpus: the loss of the imported weights, as the lr-0 checkpoint's
"$FABULA" eval --model m/llama --corpus corpus.h5 --tokenizer m/tokenizer.json --split train --samples 16 >em.out 2>&1
RC=$?
"$FABULA" eval --checkpoint s0_llama/checkpoints/step-00000001.h5 --split train --samples 16 >ec.out 2>&1
check "eval --model DIR --corpus (exit $RC): the loss of the lr-0 checkpoint" \
    '[ $RC -eq 0 ] && [ "$(grep "^| all" em.out)" = "$(grep "^| all" ec.out)" ] && grep -q "^| all | 16 " em.out'

# A training key may be set next to init_from; a function key must agree.
train 1 key_ok mixtral_sharded 1 --set model.router_aux_loss_coef=0.02 --set model.output_router_logits=true \
    --set model.capacity_factor=1.5
check "training keys next to init_from are the user's (exit $RC)" '[ $RC -eq 0 ]'
train 1 key_bad llama 1 --set model.hidden_size=64 --set model.rms_norm_eps=1e-5
check "a function key that disagrees: exit 2 naming it and the file (exit $RC)" \
    '[ $RC -eq 2 ] && grep -q "model.hidden_size.*m/llama/config.json" key_bad.out && ! grep -q rms_norm_eps key_bad.out'

# bad input
"$HP" "$REF" bad m/llama bad >bad.out 2>&1 || { cat bad.out; exit 99; }
# expect NAME CODE PATTERN: eval --model bad/NAME fails with CODE, the message matches PATTERN
expect() {
    B=$1; CODE=$2; PAT=$3
    "$FABULA" eval --model "bad/$B" --tokens 1,2 --logits-out x.npy >"bad_$B.out" 2>&1
    RC=$?
    check "bad input $B: exit $CODE (got $RC), the message names it" \
        '[ $RC -eq $CODE ] && grep -q -- "$PAT" "bad_$B.out" && [ ! -e x.npy ]'
    [ $RC -eq "$CODE" ] || cat "bad_$B.out"
}
expect no_config 2 "bad/no_config/config.json"
expect qwen2 2 "model.model_type.*qwen2.*biases on q_proj"
expect gpt2 2 "model.model_type.*gpt2"
expect truncated 3 "bad/truncated/model.safetensors: truncated"
expect dtype 3 "bad/dtype/model.safetensors: tensor \"model.norm.weight\".*F16"
expect missing 3 "bad/missing: tensor \"model.layers.1.mlp.up_proj.weight\" is missing"
# vocabulary rows other than config.json's vocab_size: transformers refuses
# them (fewer and more alike), so fabula does too
expect vocab_rows 3 "tensor \"model.embed_tokens.weight\" has shape \[300, 32\], but config.json's vocab_size is 320"
expect tied_head_rows 3 "tensor \"lm_head.weight\" has shape \[200, 32\], but config.json's vocab_size is 300"
for B in vocab_rows tied_head_rows; do
    "$HP" "$REF" loads "bad/$B" >"loads_$B.out" 2>&1
    RC=$?
    check "bad input $B: transformers refuses it too (exit $RC)" '[ $RC -eq 1 ] && grep -q "size mismatch" "loads_$B.out"'
done
train 1 small_vocab ../bad/small_vocab 1
check "a model vocabulary smaller than the tokenizer's own ids: exit 2 naming it (got $RC)" \
    '[ $RC -eq 2 ] && grep -q "model.vocab_size = 200 is smaller than the vocabulary of corpus.h5" small_vocab.out'
"$FABULA" eval --model m/llama --tokens 1,400 --logits-out x.npy >ids_bad.out 2>&1
RC=$?
check "--tokens: an id past the vocabulary is exit 2 (got $RC)" '[ $RC -eq 2 ] && grep -q "id 400" ids_bad.out'
"$FABULA" eval --model m/llama --checkpoint x.h5 --tokens 1 --logits-out x.npy >both.out 2>&1
RC=$?
check "--model and --checkpoint together: exit 2 (got $RC)" '[ $RC -eq 2 ] && grep -q "not both" both.out'
"$FABULA" eval --model m/llama --tokens 1 >nolog.out 2>&1
RC=$?
check "--tokens without --logits-out: exit 2 (got $RC)" '[ $RC -eq 2 ] && grep -q "go together" nolog.out'
finish
