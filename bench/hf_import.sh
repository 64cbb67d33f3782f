#!/bin/sh
# Import time of a ~1 GB safetensors model (docs/init-from.md): fabula's
# reader (`fabula eval --model DIR --tokens 1 --logits-out`, its own
# "imported ... in S s" line: the header checks, the preads, widening,
# copying into the model) beside safetensors' Python load_file (torch and
# numpy flavours; torch's maps the file lazily, so also with a clone() of
# each tensor, which reads it as fabula does) on the same file, alternating, REPEAT times each; the
# table shows medians. The page cache is warm for both (the file is read
# once first); nothing drops caches, as the machine may be shared.
#
#   FABULA=/path/to/build/fabula HF_PYTHON=/opt/fabula-hf/bin/python bench/hf_import.sh [OUT_DIR]
#
# Environment: REPEAT (default 5), DTYPE (float32 or bfloat16, default float32).
set -eu
: "${FABULA:?set FABULA to the fabula binary}"
: "${HF_PYTHON:?set HF_PYTHON to a Python with transformers and safetensors}"
OUT=${1:-/tmp/fabula-hf-import-bench}
REPEAT=${REPEAT:-5}
DTYPE=${DTYPE:-float32}
DIR="$OUT/llama-$DTYPE"
mkdir -p "$OUT"
if [ ! -f "$DIR/model.safetensors" ]; then
    # 12 layers of hidden 1024, intermediate 4096, vocab 32000: 257M
    # parameters, 1.03 GB in fp32, in one file (max_shard_size 5GB)
    "$HF_PYTHON" - "$DIR" "$DTYPE" <<'PYEOF'
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=12,
                  num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=2048)
torch.manual_seed(0)
m = LlamaForCausalLM(cfg).to(getattr(torch, sys.argv[2]))
m.save_pretrained(sys.argv[1], safe_serialization=True, max_shard_size="5GB")
PYEOF
fi
F="$DIR/model.safetensors"
BYTES=$(stat -c %s "$F")
cat "$F" >/dev/null
py_load() {
    "$HF_PYTHON" - "$F" "$1" <<'PYEOF'
import sys, time
path, kind = sys.argv[1], sys.argv[2]
if kind.startswith("torch"):
    from safetensors.torch import load_file
else:
    from safetensors.numpy import load_file
t = time.perf_counter()
d = load_file(path)
if kind == "torch-copy":  # load_file maps the file lazily: copy, as into a model's own memory
    d = {k: v.clone() for k, v in d.items()}
n = sum(v.numel() if kind != "numpy" else v.size for v in d.values())
print("%.4f %d" % (time.perf_counter() - t, n))
PYEOF
}
: >"$OUT/times.txt"
for i in $(seq "$REPEAT"); do
    "$FABULA" eval --model "$DIR" --tokens 1 --logits-out "$OUT/x.npy" 2>"$OUT/fabula.err" >/dev/null
    s=$(sed -n 's/.*parameters in \([0-9.]*\) s$/\1/p' "$OUT/fabula.err")
    echo "fabula $s" >>"$OUT/times.txt"
    echo "torch $(py_load torch | cut -d' ' -f1)" >>"$OUT/times.txt"
    echo "torch-copy $(py_load torch-copy | cut -d' ' -f1)" >>"$OUT/times.txt"
    echo "numpy $(py_load numpy | cut -d' ' -f1)" >>"$OUT/times.txt"
done
echo "file: $F ($BYTES bytes, $DTYPE), $REPEAT runs each, warm page cache; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| reader | median s | GB/s | runs (s) |"
echo "|---|---:|---:|---|"
for k in fabula torch torch-copy numpy; do
    grep "^$k " "$OUT/times.txt" | cut -d' ' -f2 | sort -n | awk -v k="$k" -v b="$BYTES" '
        { v[NR] = $1; all = all (NR > 1 ? " " : "") $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              name = (k == "fabula") ? "fabula (hf_import_weights)" : (k == "torch-copy") ? \
                  "safetensors.torch.load_file + clone()" : (k == "torch") ? \
                  "safetensors.torch.load_file (lazy mmap, no page read)" : "safetensors.numpy.load_file"
              printf "| %s | %.3f | %.2f | %s |\n", name, m, b / m / 1e9, all }'
done
