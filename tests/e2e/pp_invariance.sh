#!/bin/sh
# Pipeline parallelism (docs/parallel.md): STEPS steps of 4-layer tiny
# models split over pp = 2 and 4 stages (1F1B, activations and their
# gradients sent between stages) give the per-step losses of the single-rank
# run within 1e-5 relative (compare_losses.py), the same gradient norms and,
# for the MoE, the same tokens per expert and dropped assignments per layer
# and the same spread of the kept share over each step's micro-batches.
# Gradient clipping is set low enough to act at every step, so a norm that
# missed a stage's parameters (or counted one twice) would change the
# losses too. Layouts: dense and MoE (capacity, aux and z losses) at pp 2
# and pp 4, dp 2 x pp 2 with ZeRO 1 (dense and MoE), ep 2 x pp 2 (MoE),
# tp 2 x pp 2 (dense), an explicit split parallel.pipeline_layers = [3, 1],
# and steps whose micro-batches 1 and 2 are empty (the stages still pass
# them along). ZeRO 2 and 3 under pp (dense, and MoE with overlap_comm),
# ZeRO 3 with both offloads.
# Validation passes (run.eval_interval) through the stages give the
# validation losses of 1 rank. Tied embeddings (the last stage's copy of
# the embedding, its gradient summed with the first stage's, counted once in
# the norm) at pp 2 and 4 (middle stages without either), dp 2 x pp 2 with
# ZeRO 1, 2 and 3, tp 2 x pp 2. The global-batch load-balancing loss
# (model.router_aux_loss_scope) at pp 2 and dp 2 x pp 2. Interleaved 1F1B
# (parallel.virtual_pipeline_stages 2): pp 2 (with validation, tied
# embeddings, the global-batch aux loss), pp 4 of 8 layers, MoE dp 2 x pp 2
# with ZeRO 2. Every launch runs under a timeout, so a hang
# fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
STEPS=20
. "$FB_SRCDIR/tests/e2e/parallel_lib.sh"
PP=parallel.pipeline_parallel_size
L4="--set model.num_hidden_layers=4"
DENSE="$L4 --set model.num_local_experts=0"
MOE="$L4 --set model.router_z_loss_coef=0.001"

train 1 dense-ref $DENSE --set zero_optimization.stage=0
check "reference run (1 rank, dense, 4 layers)" '[ $RC -eq 0 ]'
train 2 dense-pp2 $DENSE --set zero_optimization.stage=0 --set $PP=2
check "dense, pp 2, ZeRO 0: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare dense-ref dense-pp2'
train 4 dense-pp4 $DENSE --set zero_optimization.stage=1 --set $PP=4
check "dense, pp 4 (one layer a stage), ZeRO 1: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-pp4'
train 4 dense-dp2-pp2 $DENSE --set zero_optimization.stage=1 --set $PP=2
check "dense, dp 2 x pp 2, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare dense-ref dense-dp2-pp2'
train 4 dense-tp2-pp2 $DENSE --set zero_optimization.stage=1 --set $PP=2 --set parallel.tensor_parallel_size=2
check "dense, tp 2 x pp 2, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare dense-ref dense-tp2-pp2'
train 2 dense-pp2-31 $DENSE --set zero_optimization.stage=0 --set $PP=2 --set 'parallel.pipeline_layers=[3,1]'
check "dense, pp 2 with pipeline_layers [3, 1]: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-pp2-31 && grep -q "stage 0 layers 0-2, stage 1 layers 3-3" "$SCRATCH/dense-pp2-31.out"'

train 4 dense-dp2-pp2-z2 $DENSE --set zero_optimization.stage=2 --set $PP=2
check "dense, dp 2 x pp 2, ZeRO 2: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare dense-ref dense-dp2-pp2-z2'
train 4 dense-dp2-pp2-z3 $DENSE --set zero_optimization.stage=3 --set $PP=2 --set zero_optimization.overlap_comm=true
check "dense, dp 2 x pp 2, ZeRO 3 with overlap_comm: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-dp2-pp2-z3'
train 2 dense-pp2-z3-off $DENSE --set zero_optimization.stage=3 --set $PP=2 \
    --set zero_optimization.offload_optimizer.device=cpu --set zero_optimization.offload_param.device=cpu
check "dense, pp 2, ZeRO 3 with optimizer and parameter offload: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-pp2-z3-off'

# validation passes: a corpus with a validation split
(cd "$FB_SRCDIR" && timeout 120 "$FABULA" prep -q --max-seq-len 64 --overlap 8 --min-seq-len 16 --valid-fraction 0.25 \
    --seed 7 --output "$SCRATCH/split.h5" inputs/sample.jsonl) >"$SCRATCH/prep.out" 2>&1
check "prep with a validation split" '[ $? -eq 0 ]'
EVAL="--set data.corpus=\"$SCRATCH/split.h5\" --set data.tokenizer=bytes --set run.eval_interval=6 --set run.eval_samples=12"
train 1 eval-ref $DENSE --set zero_optimization.stage=0 $EVAL
check "reference run (1 rank, dense, validation every 6 steps)" \
    '[ $RC -eq 0 ] && [ "$(grep -c valid_lm_loss "$SCRATCH/eval-ref/metrics.jsonl")" -eq 4 ]'
train 2 eval-pp2 $DENSE --set zero_optimization.stage=0 --set $PP=2 $EVAL
check "dense, pp 2, validation: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare eval-ref eval-pp2 && grep -q "validation lm loss" "$SCRATCH/eval-pp2.out"'
train 4 eval-dp2-pp2 $DENSE --set zero_optimization.stage=1 --set $PP=2 $EVAL
check "dense, dp 2 x pp 2, ZeRO 1, validation: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare eval-ref eval-dp2-pp2'
train 4 eval-pp4 $DENSE --set zero_optimization.stage=1 --set $PP=4 $EVAL
check "dense, pp 4, validation: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare eval-ref eval-pp4'

# interleaved 1F1B (parallel.virtual_pipeline_stages): pp 2 x 2 chunks of
# one layer, with validation passes; pp 4 x 2 chunks of 8 layers
VPP=parallel.virtual_pipeline_stages
train 2 eval-pp2-v2 $DENSE --set zero_optimization.stage=0 --set $PP=2 --set $VPP=2 $EVAL
check "dense, pp 2 x 2 virtual stages, validation: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare eval-ref eval-pp2-v2 &&
     grep -q "interleaved 1F1B over 4 micro-batches a step: stage 0 layers 0-0 + 2-2, stage 1 layers 1-1 + 3-3" \
         "$SCRATCH/eval-pp2-v2.out" && grep -q "(p-1)/(v m+p-1) = 0.111 (v = 2)" "$SCRATCH/eval-pp2-v2.out"'
L8="--set model.num_hidden_layers=8 --set model.num_local_experts=0"
train 1 l8-ref $L8 --set zero_optimization.stage=0
check "reference run (1 rank, dense, 8 layers)" '[ $RC -eq 0 ]'
train 4 l8-pp4-v2 $L8 --set zero_optimization.stage=1 --set $PP=4 --set $VPP=2
check "dense, pp 4 x 2 virtual stages, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare l8-ref l8-pp4-v2'

TIED="$DENSE --set model.tie_word_embeddings=true"
train 1 tied-ref $TIED --set zero_optimization.stage=1
check "reference run (1 rank, dense, tied embeddings)" '[ $RC -eq 0 ]'
train 2 tied-pp2 $TIED --set zero_optimization.stage=0 --set $PP=2
check "tied embeddings, pp 2, ZeRO 0: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare tied-ref tied-pp2'
train 4 tied-pp4 $TIED --set zero_optimization.stage=1 --set $PP=4
check "tied embeddings, pp 4, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare tied-ref tied-pp4'
for z in 1 2 3; do
    train 4 tied-dp2-pp2-z$z $TIED --set zero_optimization.stage=$z --set $PP=2
    check "tied embeddings, dp 2 x pp 2, ZeRO $z: losses and norms of 1 rank" \
        "[ \$RC -eq 0 ] && compare tied-ref tied-dp2-pp2-z$z"
done
train 2 tied-pp2-v2 $TIED --set zero_optimization.stage=1 --set $PP=2 --set $VPP=2
check "tied embeddings, pp 2 x 2 virtual stages, ZeRO 1: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare tied-ref tied-pp2-v2'
train 4 tied-tp2-pp2 $TIED --set zero_optimization.stage=1 --set $PP=2 --set parallel.tensor_parallel_size=2
check "tied embeddings, tp 2 x pp 2, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare tied-ref tied-tp2-pp2'

train 1 moe-ref $MOE --set zero_optimization.stage=0
check "reference run (1 rank, MoE, 4 layers) drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/moe-ref/metrics.jsonl")" -gt 0 ]'
SAME="expert_tokens dropped layer_dropped layer_kept"
train 2 moe-pp2 $MOE --set zero_optimization.stage=0 --set $PP=2
check "MoE, pp 2, ZeRO 0: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-pp2 $SAME"
train 4 moe-pp4 $MOE --set zero_optimization.stage=1 --set $PP=4
check "MoE, pp 4, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-pp4 $SAME"
train 4 moe-dp2-pp2 $MOE --set zero_optimization.stage=1 --set $PP=2
check "MoE, dp 2 x pp 2, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-dp2-pp2 $SAME"
train 4 moe-dp2-pp2-z2 $MOE --set zero_optimization.stage=2 --set $PP=2 --set zero_optimization.overlap_comm=true
check "MoE, dp 2 x pp 2, ZeRO 2 with overlap_comm: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-dp2-pp2-z2 $SAME"
train 4 moe-dp2-pp2-v2 $MOE --set zero_optimization.stage=2 --set $PP=2 --set $VPP=2
check "MoE, dp 2 x pp 2 x 2 virtual stages, ZeRO 2: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-dp2-pp2-v2 $SAME"
train 4 moe-ep2-pp2 $MOE --set zero_optimization.stage=0 --set $PP=2 --set parallel.expert_parallel_size=2
check "MoE, ep 2 x pp 2, ZeRO 0: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-pp2 $SAME"

# the global-batch load-balancing loss: its counting pass runs the
# micro-batches through the stages before the 1F1B pass (a coefficient large
# enough that the scope changes the losses)
GB="$MOE --set model.router_aux_loss_coef=0.1"
train 1 gb-ref $GB --set 'model.router_aux_loss_scope="global_batch"' --set zero_optimization.stage=0
train 1 gb-mb $GB --set zero_optimization.stage=0
check "reference runs (1 rank, MoE): the global-batch scope changes the losses" \
    '[ $RC -eq 0 ] && ! "$PY" "$FB_SRCDIR/tests/e2e/compare_losses.py" "$SCRATCH/gb-ref/metrics.jsonl" \
        "$SCRATCH/gb-mb/metrics.jsonl" 1e-5 >/dev/null'
train 2 gb-pp2 $GB --set 'model.router_aux_loss_scope="global_batch"' --set zero_optimization.stage=0 --set $PP=2
check "MoE, global-batch aux loss, pp 2: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare gb-ref gb-pp2 $SAME"
train 2 gb-pp2-v2 $GB --set 'model.router_aux_loss_scope="global_batch"' --set zero_optimization.stage=0 --set $PP=2 \
    --set $VPP=2
check "MoE, global-batch aux loss, pp 2 x 2 virtual stages: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare gb-ref gb-pp2-v2 $SAME"
train 4 gb-dp2-pp2 $GB --set 'model.router_aux_loss_scope="global_batch"' --set zero_optimization.stage=1 --set $PP=2
check "MoE, global-batch aux loss, dp 2 x pp 2, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare gb-ref gb-dp2-pp2 $SAME"

# 3 samples of <= 64 tokens a step fill micro-batch 0 of 256 tokens: 1 and 2 are empty
SPARSE="$MOE --set train_batch_size=3 --set train_micro_batch_size_per_gpu=1 --set gradient_accumulation_steps=3 \
    --set data.max_tokens_per_batch=256 --set zero_optimization.stage=1"
train 1 sparse-ref $SPARSE
check "reference run (1 rank, MoE, empty micro-batches)" \
    '[ $RC -eq 0 ] && grep -q "\"packing\":0.75" "$SCRATCH/sparse-ref/metrics.jsonl"'
train 4 sparse-pp4 $SPARSE --set $PP=4
check "MoE, pp 4, empty micro-batches: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare sparse-ref sparse-pp4 $SAME"
# The balanced split (docs/parallel.md): 6 dense layers, 3 stages and a
# vocabulary of 2048 rows, whose embedding and head (V D each) outweigh a
# layer: the printed split's largest stage cost must be the smallest over all
# contiguous splits, found here by enumerating them (the equal split 2-2-2
# is not: 1-4-1 is)
STEPS=1
train 3 split-pp3 $DENSE --set model.num_hidden_layers=6 --set model.vocab_size=2048 --set $PP=3
check "pp 3 of 6 layers, vocabulary 2048: the default split minimises the largest stage cost" \
    '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/split-pp3.out" <<PYEOF
import itertools, re, sys
m = re.search(r"stage 0 layers 0-(\\d+), stage 1 layers \\d+-(\\d+), stage 2 layers \\d+-5", open(sys.argv[1]).read())
assert m, "no layout line"
D, I, V, H, KV = 64, 128, 2048, 4, 2
cost = [D * (D // H) * (2 * H + 2 * KV) + 3 * D * I] * 6
def worst(a, b):
    return max(sum(cost[:a]) + V * D, sum(cost[a:b]), sum(cost[b:]) + V * D)
best = min(worst(a, b) for a, b in itertools.combinations(range(1, 6), 2))
got = worst(int(m.group(1)) + 1, int(m.group(2)) + 1)
print("split", m.group(0), "largest cost", got, "best", best, "equal split", worst(2, 4))
sys.exit(0 if got == best else 1)
PYEOF'
check "the start-up line and the bubble line show the pipeline" \
    'grep -q "pp 4" "$SCRATCH/moe-pp4.out" && grep -q "fabula: pipeline: 4 stages x 4 micro-batches" "$SCRATCH/moe-pp4.out"'
finish
