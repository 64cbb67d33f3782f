#!/bin/sh
# `fabula export` (docs/export.md) against safetensors' own Python writer,
# side by side in one run: a ~1 GB model (255M parameters in fp32: an MoE of
# 8 layers, hidden 1024, 4 experts of 2048) trained one step, then REPEAT
# rounds of
#   - fabula export --dtype fp32: the whole command (open the checkpoint,
#     read every tensor from HDF5, check its checksum, write the safetensors
#     file, fsync; config and tokenizer files), and --dtype bf16;
#   - safetensors.torch.save_file of the same tensors, already in memory
#     (loaded from fabula's export), plus an fsync of the file: the writer
#     alone, no reading. Its file is compared with fabula's byte for byte.
#
#   FABULA=/path/to/build/fabula HF_PYTHON=/opt/fabula-hf/bin/python bench/hf_export.sh [OUT_DIR]
#
# Environment: MPIEXEC (default mpiexec.mpich), REPEAT (default 3; medians
# shown). Wall and CPU (user + system) seconds: on a shared machine the
# wall time mostly measures the others' load, the CPU time less so. The page cache is not dropped: the checkpoint is read from it as
# a just-written one would be.
set -eu
: "${FABULA:?set FABULA to the fabula binary}"
: "${HF_PYTHON:?set HF_PYTHON to a Python with torch and safetensors}"
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
REPEAT=${REPEAT:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$PWD/bench-hf-export}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ ! -f "$OUT/run/checkpoints/step-00000001.h5" ]; then
    rm -rf "$OUT/run"
    (cd "$top" && $MPIEXEC -n 1 "$FABULA" train --steps 1 --run-dir "$OUT/run" \
        --set model.hidden_size=1024 --set model.intermediate_size=2048 --set model.num_hidden_layers=8 \
        --set model.num_attention_heads=16 --set model.num_key_value_heads=8 --set model.num_local_experts=4 \
        --set model.num_experts_per_tok=2 --set model.capacity_factor=0 --set data.seq_len=64 \
        --set train_batch_size=1 --set train_micro_batch_size_per_gpu=1) >"$OUT/train.log" 2>&1
fi
CKPT=$OUT/run/checkpoints/step-00000001.h5

: >"$OUT/times.txt"
for r in $(seq "$REPEAT"); do
    for dt in fp32 bf16; do
        /usr/bin/time -f "fabula_$dt %e\nfabula_${dt}_cpu %U %S" -a -o "$OUT/times.txt" \
            "$FABULA" export -q --force --checkpoint "$CKPT" --output "$OUT/x_$dt" --dtype $dt
    done
    "$HF_PYTHON" - "$OUT/x_fp32/model.safetensors" "$OUT/py.safetensors" >>"$OUT/times.txt" <<'PYEOF'
import os, sys, time
from safetensors.torch import load_file, save_file
tensors = load_file(sys.argv[1])
t0, c0 = time.time(), os.times()
save_file(tensors, sys.argv[2], metadata={"format": "pt"})
fd = os.open(sys.argv[2], os.O_RDONLY); os.fsync(fd); os.close(fd)
c1 = os.times()
print("safetensors_fp32 %.3f" % (time.time() - t0))
print("safetensors_fp32_cpu %.3f %.3f" % (c1.user - c0.user, c1.system - c0.system))
PYEOF
    cmp "$OUT/x_fp32/model.safetensors" "$OUT/py.safetensors" && echo "identical 1" >>"$OUT/times.txt" ||
        echo "identical 0" >>"$OUT/times.txt"
done
SIZE=$(stat -c %s "$OUT/x_fp32/model.safetensors")
"$HF_PYTHON" - "$OUT/times.txt" "$SIZE" <<'PYEOF'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    k, *v = l.split()
    rows.setdefault(k, []).append(sum(map(float, v)))
size = int(sys.argv[2])
print("model.safetensors: %.1f MB (fp32); %d rounds; byte-identical to save_file's: %s"
      % (size / 1e6, len(rows["fabula_fp32"]), all(rows["identical"])))
print("| writer | median wall s | MB/s of fp32 file | median CPU s (user+sys) | all runs, wall (s) |")
print("|---|---:|---:|---:|---|")
for k, what in (("fabula_fp32", "fabula export --dtype fp32 (read HDF5 + checksums + write + fsync)"),
                ("fabula_bf16", "fabula export --dtype bf16 (same, rounding, half the bytes written)"),
                ("safetensors_fp32", "safetensors.torch.save_file from memory + fsync")):
    m = statistics.median(rows[k])
    c = statistics.median(rows[k + "_cpu"])
    print("| %s | %.2f | %.0f | %.2f | %s |" % (what, m, size / 1e6 / m, c, " ".join("%.2f" % x for x in rows[k])))
PYEOF
