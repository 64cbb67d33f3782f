#!/bin/sh
# fabula plan memory (docs/plan.md, "Memory"): for every layout the suite
# trains (1, 2, 4 ranks x ZeRO 0-3, optimizer and parameter offload, expert
# parallelism 2 on the MoE model, 16-bit activations of run.backend cpu16,
# model.recompute selective and full, a layout's recompute=full, and tensor
# parallelism 2 with dp 2, ep 2 ZeRO 3 and full recomputation, sequence
# parallelism at tp 2, dp 2 x tp 2 ZeRO 1 and tp 4 with full recomputation
# and 126-token micro-batches (uneven shards); `--layout dp=1,tp=2,sp` too;
# fewer kv heads than tp: tp 4 with 2 kv heads, dp 2 x tp 2 ZeRO 3 with 1;
# pipeline parallelism 2 and 4 with dp, tp, ep, ZeRO 0-2, tied embeddings,
# an explicit split, full recomputation and interleaved stages, stage by
# stage) train's start-up "memory bytes:" line equals `plan memory --world N` field
# by field, and the peak RSS of the run (the step records'
# ranks.rss_max_bytes) is within 10% of the plan's total plus the process
# baseline: what a rank holds beyond its model (the MPI library, the loader's
# corpus, code, stacks), measured here as the peak RSS of the same run with a
# 32-wide model minus the plan's total for it (about 35 MiB on Linux/MPICH).
# Models of 8M parameters (ZeRO-3 over several ranks: 2M, its gathers are slow
# on oversubscribed cores) keep the states and workspaces well above that
# baseline. Bad layouts: one check per division plan_layout_check refuses
# (exit 2, the message naming it), and train refuses tensor/pipeline/sequence
# parallelism by key.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/memory_lib.sh"
measure_baselines

for np in 1 2 4; do
    for stage in 0 1 2; do
        same "np$np-z$stage" $np $BIG --set zero_optimization.stage=$stage
    done
done
same np1-z3 1 $BIG --set zero_optimization.stage=3
same np2-z3 2 $MID --set zero_optimization.stage=3
same np4-z3 4 $MID --set zero_optimization.stage=3
same np2-z1-overlap 2 $BIG --set zero_optimization.stage=1 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=200000
same np2-z2-off 2 $BIG --set zero_optimization.stage=2 --set zero_optimization.offload_optimizer.device=cpu
same np2-z3-offp 2 $MID --set zero_optimization.stage=3 --set zero_optimization.offload_param.device=cpu
same np4-z3-off 4 $MID --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu \
    --set zero_optimization.offload_param.device=cpu
same np2-ep2-z0 2 $BIG --set parallel.expert_parallel_size=2 --set zero_optimization.stage=0
same np4-ep2-z1 4 $BIG --set parallel.expert_parallel_size=2 --set zero_optimization.stage=1
# 16-bit activations and the weights' 16-bit compute copy (the CUDA backend's storage, on the CPU)
same np2-z1-cpu16 2 $BIG --set run.backend=cpu16 --set zero_optimization.stage=1
# model.recompute: the arena of what each mode keeps (docs/model.md, "Recomputation")
same np1-z0-full 1 $BIG --set zero_optimization.stage=0 --set model.recompute=full
same np2-ep2-sel 2 $BIG --set parallel.expert_parallel_size=2 --set model.recompute=selective
same np2-z3-full-cpu16 2 $MID --set zero_optimization.stage=3 --set model.recompute=full --set run.backend=cpu16
# tensor parallelism: each tp rank's slices of the weights (ZeRO shards them
# over the dp ranks), its heads' and FFN columns' activations, the
# vocabulary-parallel logits and the embedding's token maps
TP2="--set parallel.tensor_parallel_size=2 --set run.resume=\"none\" --set checkpoint.save_interval=-1"
same np2-tp2 2 $BIG $TP2
same np4-dp2-tp2-z1 4 $BIG $TP2 --set zero_optimization.stage=1
same np4-tp2-ep2-z3 4 $MID $TP2 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3

# pipeline parallelism: each stage's own layers (the embedding on the first,
# the head on the last, a tied embedding's copy and its summing workspace on
# both), its ZeRO shards (ZeRO 0-2 here; ZeRO-3 in tests/e2e/plan_semantics.sh),
# and the activations of the min(pp - s, accum)
# micro-batches 1F1B keeps in flight on stage s: train's "memory bytes stage S:" lines
# equal plan memory's stage_lines field by field
same_pp() {
    name=$1; np=$2; shift 2
    run "$name" "$np" --set 'run.resume="none"' "$@"
    plan "$np" --set 'run.resume="none"' --set checkpoint.save_interval=-1 "$@"
    check "$name: plan memory's stage_lines equal train's memory bytes stage lines" \
        '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/$name.out" "$SCRATCH/plan.json" <<PYEOF
import json, sys
lines = [l.split("memory bytes stage ")[1] for l in open(sys.argv[1]) if "memory bytes stage " in l]
got = {int(l.split(":")[0]): dict(kv.split("=") for kv in l.split(":")[1].split()) for l in lines}
p = json.load(open(sys.argv[2]))
ok = not p["predicted"] and len(p["stage_lines"]) == p["pp"] == len(got)
for st in p["stage_lines"]:
    s = st["stage"]
    bad = [k for k in ("params", "grads", "optimizer", "workspace", "activations") if int(got[s][k]) != st[k]]
    print("  stage %d (%d in flight): train %s" % (s, st["inflight_microbatches"], " ".join("%s=%s" % kv for kv in got[s].items())))
    if bad:
        print("  differ: %s" % bad); ok = False
sys.exit(0 if ok else 1)
PYEOF'
}
PP="--set model.num_hidden_layers=4 --set parallel.pipeline_parallel_size"
same_pp np2-pp2-z1 2 $MID $PP=2 --set zero_optimization.stage=1
same_pp np4-pp4-z0 4 $MID $PP=4 --set zero_optimization.stage=0
# 2 micro-batches a step: stages 0 and 1 hold 2, not 4 and 3
same_pp np4-pp4-accum2 4 $MID $PP=4 --set zero_optimization.stage=0 --set train_batch_size=4
same_pp np4-dp2-pp2-z2-tied 4 $MID $PP=2 --set zero_optimization.stage=2 --set model.tie_word_embeddings=true
same_pp np4-tp2-pp2-z1 4 $MID $PP=2 $TP2 --set zero_optimization.stage=1 --set 'parallel.pipeline_layers=[3,1]'
same_pp np4-ep2-pp2-full 4 $MID $PP=2 --set parallel.expert_parallel_size=2 --set model.recompute=full
# interleaved 1F1B: each stage's two chunks in one table, and the models its
# order keeps in flight (4 micro-batches: stage 0 holds 4 at pp 2, not 2)
same_pp np2-pp2-v2 2 $MID $PP=2 --set parallel.virtual_pipeline_stages=2 --set train_batch_size=8
same_pp np4-pp4-v2-tied 4 $MID $PP=4 --set model.num_hidden_layers=8 --set parallel.virtual_pipeline_stages=2 \
    --set model.tie_word_embeddings=true --set zero_optimization.stage=1
same np2-tp2-full 2 $BIG $TP2 --set model.recompute=full
# sequence parallelism: the residual stream, the norms' inputs and outputs
# and the backward's residual gradient on token shards (ceil(tokens / tp)
# rows), plus one gathered and one scattered buffer
SP="--set parallel.sequence_parallel=true"
same np2-tp2-sp 2 $BIG $TP2 $SP
same np4-dp2-tp2-sp-z1 4 $BIG $TP2 $SP --set zero_optimization.stage=1
same np4-tp4-sp-full 4 $MID $TP2 $SP --set parallel.tensor_parallel_size=4 --set model.num_key_value_heads=4 \
    --set model.recompute=full --set data.max_tokens_per_batch=126
check "sequence parallelism holds fewer activation bytes than tp 2 alone" '"$PY" - "$SCRATCH/np2-tp2.out" \
    "$SCRATCH/np2-tp2-sp.out" <<PYEOF
import re, sys
a, b = (int(re.search(r"memory bytes:.* activations=(\d+)", open(f).read()).group(1)) for f in sys.argv[1:3])
print("  activations: tp 2 %d, tp 2 + sp %d" % (a, b))
sys.exit(0 if b < a else 1)
PYEOF'
# a layout's sp part stands for parallel.sequence_parallel
(cd "$FB_SRCDIR" && "$FABULA" plan memory --layout dp=1,tp=2,sp --json $COMMON --set train_batch_size=4 $BIG) \
    >"$SCRATCH/plan.json" 2>"$SCRATCH/plan.err"
check "plan memory --layout dp=1,tp=2,sp equals train's line with parallel.sequence_parallel" \
    '"$PY" - "$SCRATCH/np2-tp2-sp.out" "$SCRATCH/plan.json" <<PYEOF
import json, sys
line = [l for l in open(sys.argv[1]) if "memory bytes:" in l][0]
got = dict(kv.split("=") for kv in line.split("memory bytes:")[1].split())
p = json.load(open(sys.argv[2]))
want = p["train_line"]
print("  plan  %s (predicted: %s)" % (" ".join("%s=%d" % kv for kv in want.items()), p["predicted"]))
sys.exit(0 if all(int(got[k]) == want[k] for k in want) and not p["predicted"] else 1)
PYEOF'
# a layout's recompute part stands for model.recompute: --layout dp=1,recompute=full
# of a config without it gives the line train printed with model.recompute=full
(cd "$FB_SRCDIR" && "$FABULA" plan memory --layout dp=1,zero=0,recompute=full --json $COMMON \
    --set train_batch_size=2 $BIG) >"$SCRATCH/plan.json" 2>"$SCRATCH/plan.err"
check "plan memory --layout dp=1,recompute=full equals train's line with model.recompute=full" \
    '"$PY" - "$SCRATCH/np1-z0-full.out" "$SCRATCH/plan.json" <<PYEOF
import json, sys
line = [l for l in open(sys.argv[1]) if "memory bytes:" in l][0]
got = dict(kv.split("=") for kv in line.split("memory bytes:")[1].split())
want = json.load(open(sys.argv[2]))["train_line"]
print("  plan  %s" % " ".join("%s=%d" % kv for kv in want.items()))
sys.exit(0 if all(int(got[k]) == want[k] for k in want) else 1)
PYEOF'

# bad layouts: exit 2 and the failing division named
bad() {
    what=$1; pattern=$2; shift 2
    (cd "$FB_SRCDIR" && "$FABULA" plan memory "$@") >"$SCRATCH/bad.out" 2>&1
    rc=$?
    check "bad layout ($what): exit 2, says '$pattern'" \
        '[ $rc -eq 2 ] && grep -q -- "$pattern" "$SCRATCH/bad.out" || { cat "$SCRATCH/bad.out"; false; }'
}
bad "world" "world size 8 is not dp x tp x pp" --layout world=8,dp=2,tp=2
bad "heads" "does not divide model.num_attention_heads = 4" --layout dp=1,tp=3
bad "kv heads" "model.num_key_value_heads = 3" --layout dp=1,tp=2 --set model.hidden_size=192 \
    --set model.num_attention_heads=6 --set model.num_key_value_heads=3
bad "intermediate" "does not divide model.intermediate_size = 250" --layout dp=1,tp=4 --set model.intermediate_size=250
bad "vocab" "does not divide model.vocab_size = 301" --layout dp=1,tp=2 --set model.vocab_size=301
bad "layers" "does not divide model.num_hidden_layers = 2" --layout dp=1,pp=3
bad "experts" "does not divide model.num_local_experts = 4" --layout dp=3,ep=3
bad "ep vs dp" "ep = 4 does not divide dp = 2" --layout dp=2,ep=4,tp=2
bad "sp without tp" "sequence parallelism needs tp > 1" --layout dp=2,sp
bad "offload_param below stage 3" "offload=param needs zero = 3" --layout dp=2,zero=2,offload=param
bad "ep on a dense model" "needs an MoE model" --layout dp=2,ep=2 --set model.num_local_experts=1
bad "unknown part" "unknown part 'xp'" --layout dp=2,xp=2
bad "neither --world nor --layout" "give exactly one of" 

# kv heads fewer than tp but dividing it: replicated (one head's k/v rows a
# rank), sized exactly as train builds it
(cd "$FB_SRCDIR" && "$FABULA" plan memory --layout dp=1,tp=4) >"$SCRATCH/kv.out" 2>&1
check "kv heads (2) below tp (4): replicated, planned exactly (no prediction note)" \
    '[ $? -eq 0 ] && ! grep -q "predictions of the Megatron-style implementation" "$SCRATCH/kv.out"'
same np4-tp4-kv2 4 $MID $TP2 --set parallel.tensor_parallel_size=4 --set zero_optimization.stage=1
same np4-dp2-tp2-kv1-z3 4 $MID $TP2 --set model.num_key_value_heads=1 --set zero_optimization.stage=3

# tp/pp on one rank: train refuses them by name (exit 2: they do not divide
# the world size), sp too since tp is 1
for kv in parallel.tensor_parallel_size=2 parallel.pipeline_parallel_size=2 parallel.sequence_parallel=true; do
    (cd "$FB_SRCDIR" && "$FABULA" train --dry-run --set "$kv") >"$SCRATCH/refuse.out" 2>&1
    rc=$?
    check "train refuses $kv naming the key (exit 2)" \
        '[ $rc -eq 2 ] && grep -q "config key .${kv%%=*}." "$SCRATCH/refuse.out"'
done
finish
