#!/bin/sh
# Hostile Hugging Face model directories (docs/init-from.md, "Hostile
# files"): `fabula eval --model` and `fabula generate --model` on seeded
# mutations of config.json, of a safetensors header (one file and a shard)
# and of model.safetensors.index.json, in a directory `fabula export` wrote
# from a tiny MoE trained here, exit 0, 2 or 3 (never 1, 4, a signal or a
# hang) within 20 s and 2 GiB. And the cases that used to hang or blow
# that bound: a FIFO in the place of model.safetensors, a shard, the index
# or config.json (eval, generate and model.init_from blocked forever), a
# config.json saying vocab_size 10^8 beside a 50 KB file (21 GB), an
# embedding with fewer rows than vocab_size (accepted).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/fuzz_lib.sh"
SEED=${FB_FUZZ_SEED:-3801}
N=${FB_FUZZ_CASES:-100}
S=$SCRATCH
TINY="--set model.hidden_size=16 --set model.intermediate_size=32 --set model.num_hidden_layers=1
      --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.num_local_experts=2
      --set data.seq_len=32 --set train_batch_size=2 --set train_micro_batch_size_per_gpu=1"
run_fabula 1 train --steps 1 --run-dir "$S/run" $TINY --set checkpoint.save_interval=1
CK="$S/run/checkpoints/step-00000001.h5"
[ $RC -eq 0 ] || { tail -n 5 "$S/out.txt"; exit 99; }
for d in one:5GB sharded:10KiB; do
    run_fabula 1 export --checkpoint "$CK" --output "$S/${d%%:*}" --max-shard-size "${d#*:}" -q --allow-dropless-inference
    [ $RC -eq 0 ] || { tail -n 5 "$S/out.txt"; exit 99; }
done
[ -f "$S/sharded/model.safetensors.index.json" ] || { echo "the export is not sharded"; exit 99; }
EVAL="eval --tokens 1,2,3 --logits-out x.npy --model"
bounded "$FABULA" $EVAL one
check "the exported directory evaluates (exit $RC)" '[ $RC -eq 0 ]'

# fresh DIR: a copy of SRC to mutate
fresh() { rm -rf "$S/$2" && cp -r "$S/$1" "$S/$2"; }

# a FIFO in each file's place: refused at once
for f in one/model.safetensors one/config.json sharded/model-00002-of-00004.safetensors \
         sharded/model.safetensors.index.json; do
    d=${f%%/*}
    fresh "$d" fifo
    fifo_in "$S/fifo/${f#*/}"
    refused "a FIFO as $f: eval --model" 3 "fifo/${f#*/}: not a regular file (a FIFO)" "$FABULA" $EVAL fifo
done
fresh one fifo
fifo_in "$S/fifo/model.safetensors"
refused "a FIFO as model.safetensors: generate --model" 3 "not a regular file (a FIFO)" \
    "$FABULA" generate --model fifo --prompt ab --max-new-tokens 2
run_fabula 1 prep -q --tokenizer bytes --max-seq-len 32 --overlap 4 --min-seq-len 8 --output "$S/c.h5" \
    "$FB_SRCDIR/inputs/sample.jsonl"
# (one process without mpiexec: a rank blocked in open() ignores the
# launcher's SIGTERM, which fabula takes as a preemption request)
refused "a FIFO as model.safetensors: model.init_from" 3 "not a regular file (a FIFO)" \
    "$FABULA" train --steps 1 --run-dir "$S/init" --set model.init_from="$S/fifo" \
    --set data.corpus="$S/c.h5" --set data.tokenizer=bytes --set data.seq_len=32 --set train_batch_size=2 \
    --set train_micro_batch_size_per_gpu=1
fresh one dir
rm "$S/dir/model.safetensors" && mkdir "$S/dir/model.safetensors"
refused "a directory as model.safetensors" 3 "not a regular file (a directory)" "$FABULA" $EVAL dir

# sizes: a config.json that a 50 KB file does not back, vocabulary rows
fresh one big
sed 's/"vocab_size": 272/"vocab_size": 100000000/' "$S/one/config.json" >"$S/big/config.json"
refused "config.json vocab_size 10^8 beside a 50 KB file: eval --model" 3 \
    "has shape [272, 16], but config.json's vocab_size is 100000000" "$FABULA" $EVAL big
refused "the same: generate --model" 3 "config.json's vocab_size is 100000000" \
    "$FABULA" generate --model big --prompt ab --max-new-tokens 2
fresh one rows
sed 's/"vocab_size": 272/"vocab_size": 300/' "$S/one/config.json" >"$S/rows/config.json"
refused "embedding rows fewer than vocab_size (transformers refuses it)" 3 \
    "tensor \"model.embed_tokens.weight\" has shape [272, 16], but config.json's vocab_size is 300" \
    "$FABULA" $EVAL rows

# seeded mutations
i=0
while [ $i -lt "$N" ]; do
    i=$((i + 1))
    fresh one m
    "$FUZZ_TOOL" json $((SEED + i)) "$S/one/config.json" "$S/m/config.json"
    fuzz_case "config.json seed $((SEED + i))" "$S/m" "$FABULA" $EVAL m
    fresh one m
    "$FUZZ_TOOL" safetensors $((SEED + i)) "$S/one/model.safetensors" "$S/m/model.safetensors"
    fuzz_case "model.safetensors seed $((SEED + i))" "$S/m" "$FABULA" $EVAL m
    if [ $((i % 5)) -eq 0 ]; then
        fuzz_case "the same, generate" "$S/m" "$FABULA" generate --model m --prompt ab --max-new-tokens 2
    fi
    fresh sharded m
    shard=$(printf 'model-%05d-of-00004.safetensors' $((1 + i % 4)))
    "$FUZZ_TOOL" safetensors $((SEED + i)) "$S/sharded/$shard" "$S/m/$shard"
    fuzz_case "$shard seed $((SEED + i))" "$S/m" "$FABULA" $EVAL m
    fresh sharded m
    "$FUZZ_TOOL" json $((SEED + i)) "$S/sharded/model.safetensors.index.json" "$S/m/model.safetensors.index.json"
    fuzz_case "model.safetensors.index.json seed $((SEED + i))" "$S/m" "$FABULA" $EVAL m
done
fuzz_summary "hostile model directories"
finish
