#!/bin/sh
# `fabula export` (docs/export.md): tiny dense and MoE models trained a few
# steps, exported, loaded by transformers ($HF_PYTHON) with
# AutoModelForCausalLM / AutoTokenizer; their logits on one sequence equal
# validation/reference_model.py's float64 forward on the checkpoint's
# weights (1e-5 relative); bf16/fp16 exports load and equal the fp32 export
# rounded by numpy/torch; a sharded export loads and equals the unsharded
# one; the tokenizer gives fabula's ids on inputs/sample.jsonl for bytes,
# fabula-bpe and a Hugging Face tokenizer.json; a 4-rank ep 2 ZeRO-3
# checkpoint exports to the same bytes as the same weights saved by 1 rank;
# bad input refused with its exit code, naming the file.
. "$FB_SRCDIR/tests/e2e/lib.sh"
if [ -z "${HF_PYTHON:-}" ]; then
    echo "HF_PYTHON is empty (configure found no Python with transformers): skipped"
    exit 77
fi
PY=${PYTHON:-/usr/bin/python3}
CHK="$FB_SRCDIR/tests/e2e/hf_export_check.py"
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
S=$SCRATCH

run_fabula 1 tokenizer train --input "$SAMPLE" --output "$S/bpe.json" --vocab-size 400
check "a fabula-bpe tokenizer trained" '[ $RC -eq 0 ]'
run_fabula 1 prep -q --tokenizer "$S/bpe.json" --max-seq-len 64 --overlap 8 --min-seq-len 16 --output "$S/bpe.h5" "$SAMPLE"
check "a corpus prepared with it" '[ $RC -eq 0 ]'

TINY="--set model.hidden_size=32 --set model.intermediate_size=48 --set model.num_hidden_layers=2
      --set model.num_attention_heads=4 --set model.num_key_value_heads=2 --set data.seq_len=64
      --set train_batch_size=4 --set train_micro_batch_size_per_gpu=1 --set checkpoint.keep_last=0"
train() { # NP NAME STEPS ARGS...
    np=$1; name=$2; steps=$3; shift 3
    run_fabula "$np" train --steps "$steps" --run-dir "$S/$name" $TINY "$@"
    [ $RC -eq 0 ] || tail -n 15 "$S/out.txt"
}
export_() { # OUTDIR ARGS...
    out=$1; shift
    run_fabula 1 export --output "$S/$out" "$@"
    cp "$S/out.txt" "$S/$out.log"
    [ $RC -eq 0 ] || tail -n 5 "$S/$out.log"
}
# dense, tied embeddings, rope_theta and eps off their defaults, the byte
# tokenizer; vocabulary room for the MiniMind tokenizer.json (6413 ids)
train 1 dense 3 --set model.num_local_experts=0 --set model.tie_word_embeddings=true \
    --set model.vocab_size=6416 --set model.rope_theta=50000 --set model.rms_norm_eps=1e-6
check "dense model trained" '[ $RC -eq 0 ]'
DENSE=$S/dense/checkpoints/step-00000003.h5
# MoE, dropless, trained on the fabula-bpe corpus (its data.tokenizer)
train 1 moe 3 --set model.num_local_experts=4 --set model.num_experts_per_tok=2 --set model.capacity_factor=0 \
    --set model.vocab_size=448 --set data.corpus="$S/bpe.h5" --set data.tokenizer="$S/bpe.json"
check "MoE model trained" '[ $RC -eq 0 ]'
MOE=$S/moe/checkpoints/step-00000003.h5

export_ dense32 --checkpoint "$DENSE"
check "dense export" '[ $RC -eq 0 ] && grep -q "LlamaForCausalLM, 20 tensors" "$S/dense32.log" && grep -q "tensor 20/20" "$S/dense32.log"'
check "dense: no lm_head tensor (tied)" \
    '"$HF_PYTHON" -c "import sys,json; from safetensors import safe_open; f=safe_open(sys.argv[1],\"pt\"); sys.exit(\"lm_head.weight\" in f.keys())" "$S/dense32/model.safetensors"'
export_ moe32 --checkpoint "$MOE"
check "MoE export" '[ $RC -eq 0 ] && grep -q "MixtralForCausalLM" "$S/moe32.log"'
check "MoE: config.json is Mixtral's with the model's sizes" \
    '"$HF_PYTHON" -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c[\"model_type\"]==\"mixtral\" and c[\"num_local_experts\"]==4 and c[\"num_experts_per_tok\"]==2 and c[\"vocab_size\"]==448 and c[\"torch_dtype\"]==\"float32\" and c[\"head_dim\"]==8))" "$S/moe32/config.json"'

# logits on one sequence: transformers against the float64 reference
"$PY" -c "import numpy as np; np.save('$S/ids_dense.npy', np.random.RandomState(1).randint(0, 6416, 50).astype(np.int32)); np.save('$S/ids_moe.npy', np.random.RandomState(2).randint(0, 448, 50).astype(np.int32))"
for m in dense moe; do
    ckpt=$DENSE arch=LlamaForCausalLM
    [ $m = moe ] && ckpt=$MOE arch=MixtralForCausalLM
    "$PY" "$CHK" ref "$ckpt" "$S/ids_$m.npy" "$S/ref_$m.npy"
    check "$m: reference logits" '[ $? -eq 0 ]'
    "$HF_PYTHON" "$CHK" logits "$S/${m}32" "$S/ids_$m.npy" "$S/ref_$m.npy" $arch
    check "$m: transformers' logits equal the reference's (1e-5)" '[ $? -eq 0 ]'
done

for d in dense32 moe32; do
    "$HF_PYTHON" "$CHK" st_same "$S/$d" "$S/$d.py.safetensors"
    check "$d: model.safetensors = safetensors' own save_file of the same tensors" '[ $? -eq 0 ]'
done

for dt in bf16 fp16; do
    export_ moe_$dt --checkpoint "$MOE" --dtype $dt
    check "MoE export --dtype $dt" '[ $RC -eq 0 ]'
    "$HF_PYTHON" "$CHK" dtype "$S/moe32" "$S/moe_$dt" $dt
    check "$dt: loads, tensors = the fp32 export rounded to nearest even" '[ $? -eq 0 ]'
    "$HF_PYTHON" "$CHK" st_same "$S/moe_$dt" "$S/moe_$dt.py.safetensors"
    check "$dt: byte-identical to safetensors' save_file" '[ $? -eq 0 ]'
done

# a weight beyond fp16's range (set with h5py, its checksum recomputed from
# docs/checkpoint.md's formula): exported as inf, with a warning naming it
cp "$MOE" "$S/big.h5"
"$PY" -c "
import h5py, sys, numpy as np
with h5py.File(sys.argv[1], 'r+') as f:
    d = f['params/model.norm.weight']; x = d[...]; x[3] = 1e5; d[...] = x
    i = np.arange(x.size, dtype=np.uint64); b = x.reshape(-1).view(np.uint32).astype(np.uint64)
    with np.errstate(over='ignore'):
        y = ((i * np.uint64(0x9e3779b97f4a7c15)) ^ b) * np.uint64(0xbf58476d1ce4e5b9)
        d.attrs['checksum'] = np.uint64(np.sum(y ^ (y >> np.uint64(31)), dtype=np.uint64))" "$S/big.h5"
export_ big16 -q --checkpoint "$S/big.h5" --dtype fp16
check "fp16: a value beyond 65504 becomes inf, with a warning naming the tensor" \
    '[ $RC -eq 0 ] && grep -q "tensor model.norm.weight: 1 finite value beyond the range of float16" "$S/big16.log" &&
     "$HF_PYTHON" -c "import sys,torch; from safetensors.torch import load_file; w=load_file(sys.argv[1])[\"model.norm.weight\"]; sys.exit(not (torch.isinf(w[3]) and torch.isfinite(w[:3]).all()))" "$S/big16/model.safetensors"'

export_ moe_sharded --checkpoint "$MOE" --max-shard-size 20KB
check "sharded export" '[ $RC -eq 0 ] && [ -f "$S/moe_sharded/model.safetensors.index.json" ] && [ ! -f "$S/moe_sharded/model.safetensors" ]'
"$HF_PYTHON" "$CHK" sharded "$S/moe32" "$S/moe_sharded" 20000
check "sharded: loads and equals the unsharded export" '[ $? -eq 0 ]'
export_ moe_sharded_mib --checkpoint "$MOE" --max-shard-size 0.05MiB -q
check "--max-shard-size 0.05MiB: shards of at most 52428 bytes" '[ $RC -eq 0 ] && "$HF_PYTHON" "$CHK" sharded "$S/moe32" "$S/moe_sharded_mib" 52428'

touch "$S/moe_sharded_mib/README.md" "$S/moe_sharded_mib/.model.safetensors.partial"
export_ moe_sharded_mib -q --checkpoint "$MOE" --force
check "--force over a sharded export: one file, no stale shard, index or partial; other files kept" \
    '[ $RC -eq 0 ] && [ -f "$S/moe_sharded_mib/model.safetensors" ] && [ -f "$S/moe_sharded_mib/README.md" ] &&
     [ -z "$(ls -A "$S/moe_sharded_mib" | grep -e "^model-" -e index -e partial)" ] &&
     cmp "$S/moe_sharded_mib/model.safetensors" "$S/moe32/model.safetensors"'

# tokenizers: ids of every novel of the sample equal `fabula tokenizer encode`'s.
# --tokenizer gives the tokenizer.json the model was trained with (another
# vocabulary is refused, exit 3: inference_intent.sh), so a dense model is
# trained on a corpus the MiniMind tokenizer.json made
MINIMIND=$FB_SRCDIR/tests/data/tokenizers/minimind/tokenizer.json
run_fabula 1 prep -q --tokenizer "$MINIMIND" --max-seq-len 64 --overlap 8 --min-seq-len 16 --output "$S/mm.h5" "$SAMPLE"
check "a corpus prepared with the MiniMind tokenizer.json" '[ $RC -eq 0 ]'
train 1 dense_mm 2 --set model.num_local_experts=0 --set model.vocab_size=6416 \
    --set data.corpus="$S/mm.h5" --set data.tokenizer="$MINIMIND"
export_ dense_minimind -q --checkpoint "$S/dense_mm/checkpoints/step-00000002.h5" --tokenizer "$MINIMIND"
check "export with --tokenizer (the tokenizer.json it was trained with)" '[ $RC -eq 0 ]'
for pair in "dense32 bytes" "moe32 $S/bpe.json" "dense_minimind $FB_SRCDIR/tests/data/tokenizers/minimind/tokenizer.json"; do
    set -- $pair
    run_fabula 1 tokenizer encode --tokenizer "$2" --input "$SAMPLE" --output "$S/$1.ids" --force
    run_fabula 1 tokenizer info "$2"
    cp "$S/out.txt" "$S/$1.info"
    "$HF_PYTHON" "$CHK" tok "$S/$1" "$SAMPLE" "$S/$1.ids" "$S/$1.info"
    check "tokenizer of $1 ($2): fabula's ids and specials" '[ $? -eq 0 ]'
done

# a 4-rank ep 2 ZeRO-3 checkpoint and the same weights saved by 1 rank: the
# 4-rank one resumed on 1 rank for one step whose update is exactly 0 in
# fp32 (Adam eps 1e30: |lr m / (sqrt v + eps)| is far below half an ulp of
# any weight; no weight decay), so that file holds the same weights written
# by another layout
MOE4="--set model.num_local_experts=4 --set model.capacity_factor=0 --set model.vocab_size=448
      --set data.corpus=$S/bpe.h5 --set data.tokenizer=$S/bpe.json"
train 4 ep4 2 $MOE4 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3
check "4 ranks, ep 2, ZeRO 3" '[ $RC -eq 0 ]'
train 1 ep1 3 $MOE4 --set run.resume="$S/ep4/checkpoints/step-00000002.h5" --set optimizer.params.eps=1e30 \
    --set optimizer.params.weight_decay=0
check "resumed on 1 rank, one zero update" '[ $RC -eq 0 ]'
"$PY" -c "
import h5py, sys, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
ok = a.attrs['step'] != b.attrs['step'] and a['layout'].attrs['world_size'] == 4 and b['layout'].attrs['world_size'] == 1
ok &= set(a['params']) == set(b['params']) and all(np.array_equal(a['params'][k][...], b['params'][k][...]) for k in a['params'])
sys.exit(0 if ok else 1)" "$S/ep4/checkpoints/step-00000002.h5" "$S/ep1/checkpoints/step-00000003.h5"
check "the two checkpoints: other layouts and steps, the same weights" '[ $? -eq 0 ]'
export_ x4 -q --checkpoint "$S/ep4/checkpoints/step-00000002.h5"
export_ x1 -q --checkpoint "$S/ep1/checkpoints/step-00000003.h5"
check "their exports are byte-identical" \
    'for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json; do cmp "$S/x4/$f" "$S/x1/$f" || exit 1; done'
run_fabula 2 export -q --checkpoint "$S/ep4/checkpoints/step-00000002.h5" --output "$S/x4np2"
check "under mpiexec -n 2 (rank 0 writes): the same bytes" '[ $RC -eq 0 ] && cmp "$S/x4/model.safetensors" "$S/x4np2/model.safetensors"'

# bad input: the exit code of README's table and the file named
bad() { # CODE TEXT ARGS...
    code=$1; text=$2; shift 2
    run_fabula 1 export "$@"
    check "refused ($code): $text" '[ $RC -eq $code ] && grep -q -- "$text" "$S/out.txt"' || cat "$S/out.txt"
}
bad 4 "$S/none.h5: cannot open" --checkpoint "$S/none.h5" --output "$S/o1"
printf 'not hdf5\n' >"$S/junk.h5"
bad 3 "$S/junk.h5: not a checkpoint" --checkpoint "$S/junk.h5" --output "$S/o2"
head -c 20000 "$MOE" >"$S/cut.h5"
bad 3 "$S/cut.h5" --checkpoint "$S/cut.h5" --output "$S/o3"
# one float of a tensor's data changed: its checksum names it
cp "$MOE" "$S/flip.h5"
"$PY" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r'); off = f['params/model.norm.weight'].id.get_offset(); f.close()
with open(sys.argv[1], 'r+b') as g:
    g.seek(off); b = g.read(1); g.seek(off); g.write(bytes([b[0] ^ 0x10]))" "$S/flip.h5"
bad 3 "damaged checkpoint: tensor model.norm.weight: checksum" --checkpoint "$S/flip.h5" --output "$S/o4"
bad 2 "exists (use --force" --checkpoint "$MOE" --output "$S/moe32"
bad 2 "dtype 'fp8'" --checkpoint "$MOE" --output "$S/o5" --dtype fp8
bad 2 "max-shard-size '5XB'" --checkpoint "$MOE" --output "$S/o6" --max-shard-size 5XB
bad 2 "max-shard-size '-1'" --checkpoint "$MOE" --output "$S/o6" --max-shard-size -1
bad 2 "--checkpoint CKPT is required" --output "$S/o7"
bad 4 "$S/no-tokenizer.json" --checkpoint "$MOE" --output "$S/o8" --tokenizer "$S/no-tokenizer.json"
# the checkpoint's data.tokenizer gone (moved since training)
mv "$S/bpe.json" "$S/bpe.moved.json"
bad 4 "its data.tokenizer $S/bpe.json cannot be read from here" --checkpoint "$MOE" --output "$S/o11"
mv "$S/bpe.moved.json" "$S/bpe.json"
check "nothing written by a refused export" \
    '[ ! -e "$S/o2" ] && [ ! -e "$S/o5" ] && [ -z "$(ls -A "$S/o4")" ]'
# models transformers' classes cannot compute
train 1 cap 1 --set model.num_local_experts=4 --set model.capacity_factor=1.25
bad 2 "model.capacity_factor = 1.25" --checkpoint "$S/cap/checkpoints/step-00000001.h5" --output "$S/o9"
export_ cap_dropless --checkpoint "$S/cap/checkpoints/step-00000001.h5" --allow-dropless-inference
check "--allow-dropless-inference exports it (with a note)" '[ $RC -eq 0 ] && grep -q "dropless" "$S/cap_dropless.log"'
train 1 freq 1 --set model.num_local_experts=4 --set model.moe_layer_freq=2 --set model.capacity_factor=0
bad 2 "model.moe_layer_freq = 2 makes layer 1 dense" --checkpoint "$S/freq/checkpoints/step-00000001.h5" --output "$S/o10"
run_fabula 1 export --help
check "--help" '[ $RC -eq 0 ] && grep -q "usage: fabula export" "$S/out.txt"'
finish
