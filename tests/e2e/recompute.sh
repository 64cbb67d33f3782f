#!/bin/sh
# model.recompute (docs/model.md, "Recomputation"): a few steps of the tiny
# MoE (capacity factor 1.25: assignments dropped) with each mode give the
# step records of "none" bit for bit (every loss part, the gradient norm,
# the tokens per expert and per genre, the drops in all and per layer), on
# 1 rank (with expert dropout, and with 16-bit activations of run.backend
# cpu16), 2 ranks ZeRO 3, 2 ranks tensor-parallel (tp 2), 2 ranks
# pipeline-parallel (pp 2: the default model's 2 layers, one a stage), and 2 ranks with expert parallelism 2 and ZeRO 3
# whose micro-batches 2 and 3 are empty (the idle ranks' exchanges of the
# recomputed forward must line up, or the run hangs and the timeout fails
# it). The memory line's activation figure drops by what docs/model.md says
# a mode leaves out (the expert-parallel buffers included), computed here
# from the shapes. DeepSpeed's activation_checkpointing.partition_activations
# under tp 2 gives sequence parallelism's step records bit for bit (it is
# mapped onto it), and is refused against it or with 16 bits; on 1 rank it,
# and cpu_checkpointing on the CPU backends, are accepted without effect;
# cpu_checkpointing on cuda is refused. Bad values of model.recompute exit 2
# naming the key. Every launch runs under a timeout.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh"
STEPS=3
SAME="lm_loss aux_loss z_loss grad_norm expert_tokens dropped layer_dropped genre_expert_tokens"
MB="--set data.max_tokens_per_batch=128"

# modes NAME NP ARGS...: trains none, selective and full into NAME-MODE
modes() {
    base=$1; nranks=$2; shift 2   # train() sets name and np
    for mode in none selective full; do
        train "$nranks" "$base-$mode" $MB --set model.recompute=$mode "$@"
        eval "RC_$mode=\$RC"
    done
}

# same NAME WHAT: selective and full bitwise equal to none
same() {
    for mode in selective full; do
        check "$2, recompute $mode: step records bit-identical to none" \
            "[ \$RC_none -eq 0 ] && [ \$RC_$mode -eq 0 ] && compare $1-none $1-$mode 0 $SAME"
    done
}

# memory NAME ACT_BYTES EP T: none - selective and none - full, from the
# memory lines, equal what the layers leave out (the default model: every
# layer MoE, hidden 64, intermediate 128, 4 heads, 2 kv heads, 4 experts,
# top 2, 2 layers; each buffer rounded up to 256 bytes)
memory() {
    "$PY" - "$SCRATCH/$1" "$2" "$3" "$4" <<'PYEOF'
import re, sys
base, b, ep, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
act = {}
for mode in ("none", "selective", "full"):
    line = [l for l in open("%s-%s.out" % (base, mode)) if "memory bytes:" in l][0]
    act[mode] = int(re.search(r"activations=(\d+)", line).group(1))
D, I, H, KV, E, K, L = 64, 128, 4, 2, 4, 2, 2
hd = D // H; q = D; kv = hd * KV; R = T * K
al = lambda n: (n + 255) // 256 * 256
# what selective leaves out of a layer's arena: the attention output, its
# log-sum-exp, the SwiGLU product and the expert dropout mask (with ep > 1
# the expert rows live in the ep buffers instead)
sel = al(T * q * b) + al(T * H * 4) + (al(R * I * b) + al(R * I) if ep == 1 else 0)
# and the rest of the layer but its input, which full leaves out too
kept = (2 * al(T * D * b) + 2 * al(T * 4) + al(T * q * b) + 2 * al(T * kv * b) + al(T * D * b)
        + (2 * al(R * I * b) if ep == 1 else 0)
        + 2 * al(T * E * 4) + al(T * 4) + 2 * al(T * K * 4) + al(E * 4) + 2 * al(R * D * b) + 2 * al(R * 4))
# with ep > 1 the expert-parallel buffers of each MoE layer (T K rows at
# start, exact sizes): the SwiGLU product and mask, which selective leaves
# out, and the received rows, gate and up projections and two row maps
ep_sel = R * I * b + R * I if ep > 1 else 0
ep_kept = R * D * b + 2 * R * I * b + 2 * R * 4 if ep > 1 else 0
# every layer's is dropped but the one shared set
want = {"selective": (L - 1) * (sel + ep_sel), "full": (L - 1) * (sel + kept + ep_sel + ep_kept)}
ok = True
for mode in ("selective", "full"):
    got = act["none"] - act[mode]
    print("  %s: activations none %d, %s %d: %d less, expected %d" % (base.split("/")[-1], act["none"], mode,
          act[mode], got, want[mode]))
    ok &= got == want[mode]
sys.exit(0 if ok else 1)
PYEOF
}

modes np1 1 --set model.expert_dropout=0.1
check "reference run: capacity drops assignments" \
    '[ $RC_none -eq 0 ] && grep -q "\"dropped\":[1-9]" "$SCRATCH/np1-none/metrics.jsonl"'
same np1 "1 rank, expert dropout"
check "1 rank: the activations drop as docs/model.md says" "memory np1 4 1 128"

modes np1-cpu16 1 --set run.backend=cpu16
same np1-cpu16 "1 rank, 16-bit activations (cpu16)"
check "1 rank, cpu16: the activations drop as docs/model.md says" "memory np1-cpu16 2 1 128"

modes np2-z3 2 --set zero_optimization.stage=3
same np2-z3 "2 ranks, ZeRO 3"

# each rank's 3 samples (<= 64 tokens) fit its first micro-batch of 256
# tokens: micro-batches 2 and 3 are empty on both ranks (as in moe_ep.sh)
modes np2-ep2 2 --set data.max_tokens_per_batch=256 --set parallel.expert_parallel_size=2 --set parallel.moe_a2a_chunks=2 \
    --set zero_optimization.stage=3 --set train_batch_size=6 --set train_micro_batch_size_per_gpu=1 \
    --set gradient_accumulation_steps=3
same np2-ep2 "2 ranks, ep 2, ZeRO 3, empty micro-batches"
check "2 ranks, ep 2: the activations drop as docs/model.md says" "memory np2-ep2 4 2 256"

# tensor parallelism: the recomputed forward repeats the tp sums of its
# row-parallel blocks on every tp rank (and reuses the scratch they use)
modes np2-tp2 2 --set parallel.tensor_parallel_size=2 --set checkpoint.save_interval=-1 --set 'run.resume="none"'
same np2-tp2 "2 ranks, tp 2"

# pipeline parallelism: each stage recomputes its own layers, the in-flight
# micro-batches' models each theirs
modes np2-pp2 2 --set parallel.pipeline_parallel_size=2 --set checkpoint.save_interval=-1 --set 'run.resume="none"'
same np2-pp2 "2 ranks, pp 2"

# bad values: exit 2, one message naming the key
bad() {
    what=$1; key=$2; shift 2
    (cd "$FB_SRCDIR" && "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/bad" "$@") >"$SCRATCH/bad.out" 2>&1
    rc=$?
    check "$what: exit 2 naming $key" \
        '[ $rc -eq 2 ] && grep -q "config key .$key." "$SCRATCH/bad.out" || { cat "$SCRATCH/bad.out"; false; }'
}
bad "model.recompute \"some\"" model.recompute --set model.recompute=some
bad "model.recompute true" model.recompute --set model.recompute=true
# DeepSpeed's partition_activations: under tp the saved inputs kept on token
# shards, i.e. sequence parallelism (the same step records as asking for it);
# refused against an explicit sequence_parallel false and with 16 bits
TP2="--set parallel.tensor_parallel_size=2 --set checkpoint.save_interval=-1 --set run.resume=\"none\""
train 2 np2-part $MB $TP2 --set model.recompute=full --set activation_checkpointing.partition_activations=true
train 2 np2-sp $MB $TP2 --set model.recompute=full --set parallel.sequence_parallel=true
check "partition_activations true at tp 2: the step records of sequence parallelism, bit for bit" \
    '[ $RC -eq 0 ] && compare np2-sp np2-part 0 $SAME && grep -q "\"sequence_parallel\": true" "$SCRATCH/np2-part/config.json"'
bad_np() {
    what=$1; key=$2; shift 2
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/bad" "$@") \
        >"$SCRATCH/bad.out" 2>&1
    rc=$?
    check "$what: exit 2 naming $key" \
        '[ $rc -eq 2 ] && grep -q "config key .$key." "$SCRATCH/bad.out" || { cat "$SCRATCH/bad.out"; false; }'
}
bad_np "partition_activations true, sequence_parallel false, tp 2" activation_checkpointing.partition_activations \
    $TP2 --set activation_checkpointing.partition_activations=true --set parallel.sequence_parallel=false
bad_np "partition_activations true, bf16 on cpu16, tp 2" activation_checkpointing.partition_activations \
    $TP2 --set activation_checkpointing.partition_activations=true --set bf16.enabled=true --set 'run.backend="cpu16"'
# cpu_checkpointing: activations in host memory are the CPU backends' own;
# on the GPU backend it is refused
bad "activation_checkpointing.cpu_checkpointing true, run.backend cuda" activation_checkpointing.cpu_checkpointing \
    --set activation_checkpointing.cpu_checkpointing=true --set 'run.backend="cuda"'
(cd "$FB_SRCDIR" && "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/bad" \
    --set activation_checkpointing.partition_activations=true --set activation_checkpointing.cpu_checkpointing=true) \
    >"$SCRATCH/inert1.out" 2>&1
rc=$?
check "1 rank, cpu: partition_activations and cpu_checkpointing true accepted, listed without effect" \
    '[ $rc -eq 0 ] && grep "accepted without effect" "$SCRATCH/inert1.out" | grep -q "activation_checkpointing.partition_activations" &&
     grep "accepted without effect" "$SCRATCH/inert1.out" | grep -q "activation_checkpointing.cpu_checkpointing" &&
     grep -q "\"sequence_parallel\": false" "$SCRATCH/inert1.out"'
# the rest of DeepSpeed's block: accepted without effect, named in the note
(cd "$FB_SRCDIR" && "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/bad" \
    --set activation_checkpointing.partition_activations=false --set activation_checkpointing.number_checkpoints=4 \
    --set activation_checkpointing.contiguous_memory_optimization=true --set activation_checkpointing.profile=true \
    --set activation_checkpointing.synchronize_checkpoint_boundary=false) >"$SCRATCH/inert.out" 2>&1
rc=$?
check "activation_checkpointing's other keys: accepted, listed without effect" \
    '[ $rc -eq 0 ] && grep "accepted without effect" "$SCRATCH/inert.out" | grep -q "activation_checkpointing.number_checkpoints"'
finish
