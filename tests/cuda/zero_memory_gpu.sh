#!/bin/sh
# Device memory on the CUDA backend against `plan memory` (docs/zero.md,
# "Mixed precision"): for every ZeRO stage x offload in bf16 (and ZeRO 3 in
# fp16) on 1 and 2 ranks of one device, one training step's start-up
# "memory bytes:" line must equal the plan field by field, and the backend
# allocator's high-water (ranks.device_mem_max_bytes: every cudaMalloc
# fabula makes, its scratch included) must lie within 10% + 64 MiB of the
# plan's device total. NVML's figure for the whole process (context,
# cuBLAS, NCCL) is printed beside it, not checked. Skips (77) without a
# CUDA device. FB_DRY_BACKEND=cpu16 runs the same cases on cpu16 and checks
# the memory line alone (a dry run of this script on a machine without one).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/memory_lib.sh"

BACKEND=cuda
if [ -n "${FB_DRY_BACKEND:-}" ]; then
    BACKEND=$FB_DRY_BACKEND
    echo "dry run on $BACKEND: the device high-water is not checked"
elif ! "$FABULA" --version 2>/dev/null | grep -q "device 0:"; then
    echo "SKIP: no CUDA device"
    exit 77
fi

OO="--set zero_optimization.offload_optimizer.device=cpu"
OP="--set zero_optimization.offload_param.device=cpu"
BF16="--set run.backend=$BACKEND --set bf16.enabled=true"
FP16="--set run.backend=$BACKEND --set fp16.enabled=true"

# device NAME NP ARGS...: the line equals the plan, the high-water is near its device total
device() {
    name=$1; np=$2; shift 2
    run "$name" "$np" "$@"
    plan "$np" "$@"
    check "$name: plan memory equals train's memory bytes, device high-water within 10% + 64 MiB of the plan" \
        '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/$name.out" "$SCRATCH/$name" "$SCRATCH/plan.json" "$BACKEND" <<PYEOF
import json, sys
line = [l for l in open(sys.argv[1]) if "memory bytes:" in l][0]
got = dict(kv.split("=") for kv in line.split("memory bytes:")[1].split())
p = json.load(open(sys.argv[3]))
want = p["train_line"]
bad = [k for k in want if int(got[k]) != want[k]]
print("  train %s" % line.split("memory bytes:")[1].strip())
print("  plan  %s" % " ".join("%s=%d" % kv for kv in want.items()))
if bad:
    print("  differ: %s" % bad)
ok = not bad
if sys.argv[4] == "cuda":
    recs = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
    recs = [r for r in recs if "ranks" in r]
    peak = max(r["ranks"].get("device_mem_max_bytes", -1) for r in recs)
    nvml = max(r["ranks"].get("gpu", {}).get("mem_used_max_bytes", -1) for r in recs)
    dev = p["device_total"]
    print("  device high-water %d, plan device total %d (%+.1f%%); NVML process-wide %d" %
          (peak, dev, 100.0 * (peak - dev) / dev, nvml))
    ok = ok and peak >= 0 and abs(peak - dev) <= 0.10 * dev + (64 << 20)
sys.exit(0 if ok else 1)
PYEOF'
}

for np in 1 2; do
    device "bf16-np$np-z0" "$np" $BIG $BF16 --set zero_optimization.stage=0
    device "bf16-np$np-z1" "$np" $BIG $BF16 --set zero_optimization.stage=1
    device "bf16-np$np-z2" "$np" $BIG $BF16 --set zero_optimization.stage=2
    device "bf16-np$np-z2-oo" "$np" $BIG $BF16 --set zero_optimization.stage=2 $OO
    device "bf16-np$np-z3" "$np" $BIG $BF16 --set zero_optimization.stage=3
    device "bf16-np$np-z3-oo" "$np" $BIG $BF16 --set zero_optimization.stage=3 $OO
    device "bf16-np$np-z3-oo-op" "$np" $BIG $BF16 --set zero_optimization.stage=3 $OO $OP
done
device "fp16-np2-z3" 2 $BIG $FP16 --set zero_optimization.stage=3
finish
