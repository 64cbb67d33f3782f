#!/bin/sh
# `fabula plan calibrate` on the CUDA backend (run.backend "cuda"): the
# default job's model timed on the GPU, and a machine file whose figures are
# the GPU's (docs/plan.md, "Calibrating a GPU"): its matmul rate, AdamW over
# device memory, the pinned host-to-device copy rate, the GPU's memory and
# name. --clock cpu is refused there. Skips (77) without a CUDA device.
. "$FB_SRCDIR/tests/e2e/lib.sh"

if ! "$FABULA" --version 2>/dev/null | grep -q "device 0:"; then
    echo "SKIP: no CUDA device"
    exit 77
fi
run_fabula 1 plan calibrate --set run.backend=cuda --short 16 --long 64 --tokens 256 --repeats 3 \
    --write-machine "$SCRATCH/gpu.json"
cat "$SCRATCH/out.txt"
check "calibrate on the CUDA backend exits 0 and says so" \
    '[ $RC -eq 0 ] && grep -q "^calibrate: the CUDA backend" "$SCRATCH/out.txt"'
# the bounds: far above any CPU's and below any GPU's datasheet (an H200:
# about 990 TFLOP/s bf16, 4.8 TB/s, PCIe 5 x16 about 64 GB/s a direction)
check "the machine file carries the GPU's figures" "\$PYTHON -c '
import json, sys
d = json.load(open(sys.argv[1]))
v = lambda k: d[k][\"value\"]
ok = \"each on the GPU \" in d[\"description\"] and \"(the CUDA backend)\" in d[\"description\"]
ok = ok and d[\"name\"] == \"gpu-this\"
ok = ok and 1e13 < v(\"gemm_flops\") < 2e15 and \"cuBLASLt\" in d[\"gemm_flops\"][\"source\"]
ok = ok and 1e11 < v(\"memory_bandwidth\") < 1e13 and \"device memory\" in d[\"memory_bandwidth\"][\"source\"]
ok = ok and 1e9 < v(\"host_link_bandwidth\") < 2e11 and v(\"device_memory\") > 1e9
ok = ok and v(\"flops\") > 0
sys.exit(not ok)' \"$SCRATCH/gpu.json\""
run_fabula 1 plan time --world 1 --machine "$SCRATCH/gpu.json" --set run.backend=cuda
check "plan time loads the GPU machine file" '[ $RC -eq 0 ]'
run_fabula 1 plan calibrate --set run.backend=cuda --clock cpu --repeats 1 --write-machine "$SCRATCH/x.json"
check "--clock cpu on the CUDA backend: exit 2 naming --clock cpu" \
    '[ $RC -eq 2 ] && grep -q -- "--clock cpu" "$SCRATCH/out.txt"'
finish
