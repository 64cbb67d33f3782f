#!/bin/sh
# Expert parallelism with the token exchange split into chunks
# (parallel.moe_a2a_chunks: the all-to-all of one chunk overlaps the expert
# compute of another): ep = 2 and 4 on 4 ranks, each ZeRO stage, and with
# optimizer and parameter offload, give the losses and tokens per expert of
# the single-rank run (dropless, aux 0: docs/zero.md); the same layout run
# twice gives bit-identical losses. Every launch runs under a timeout.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}

STEPS=20
train() { # NP NAME ARGS...
    np=$1; name=$2; shift 2
    (cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n "$np" "$FABULA" train --steps $STEPS --run-dir "$SCRATCH/$name" \
        --set checkpoint.save_interval=-1 --set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 \
        --set data.seq_len=64 --set model.hidden_size=64 --set model.intermediate_size=128 --set model.capacity_factor=0 \
        --set model.router_aux_loss_coef=0 "$@") >"$SCRATCH/$name.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}
compare() { # A B TOL: losses within TOL relative, expert_tokens equal
    "$PY" - "$SCRATCH/$1/metrics.jsonl" "$SCRATCH/$2/metrics.jsonl" "$3" "$STEPS" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol, steps = float(sys.argv[3]), int(sys.argv[4])
ok = len(a) == steps and len(b) == steps
for x, y in zip(a, b):
    if abs(x["loss"] - y["loss"]) > tol * abs(x["loss"]) or x["expert_tokens"] != y["expert_tokens"]:
        print("step %d: loss %.9g vs %.9g, experts %s vs %s" % (x["step"], x["loss"], y["loss"],
              x["expert_tokens"], y["expert_tokens"])); ok = False
sys.exit(0 if ok else 1)
EOF
}

train 1 ref
check "reference run (1 rank, dropless)" '[ $RC -eq 0 ]'
for ep in 2 4; do
    for stage in 0 1 2 3; do
        name="ep$ep-z$stage-c3"
        train 4 $name --set parallel.expert_parallel_size=$ep --set parallel.moe_a2a_chunks=3 \
            --set zero_optimization.stage=$stage --set zero_optimization.overlap_comm=true
        check "4 ranks, ep $ep, ZeRO $stage, 3 chunks: losses within 1e-5 of 1 rank, same tokens per expert" \
            "[ $RC -eq 0 ] && compare ref $name 1e-5"
    done
done
train 4 ep2-z2-off --set parallel.expert_parallel_size=2 --set parallel.moe_a2a_chunks=2 \
    --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
check "ep 2, ZeRO 2, optimizer offload, 2 chunks" "[ $RC -eq 0 ] && compare ref ep2-z2-off 1e-5"
train 4 ep4-z3-off --set parallel.expert_parallel_size=4 --set parallel.moe_a2a_chunks=2 \
    --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
check "ep 4, ZeRO 3, optimizer and parameter offload, 2 chunks" "[ $RC -eq 0 ] && compare ref ep4-z3-off 1e-5"
train 4 ep4-z3-c3-again --set parallel.expert_parallel_size=4 --set parallel.moe_a2a_chunks=3 \
    --set zero_optimization.stage=3 --set zero_optimization.overlap_comm=true
check "same layout twice: bit-identical losses" "[ $RC -eq 0 ] && compare ep4-z3-c3 ep4-z3-c3-again 0"
finish
