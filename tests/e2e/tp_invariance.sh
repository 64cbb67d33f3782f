#!/bin/sh
# Tensor parallelism (docs/parallel.md): STEPS steps of tiny models under
# tp = 2 and 4 give the per-step losses and gradient norms of the
# single-rank run within 1e-5 relative, and, for the MoE, the same tokens per
# expert and dropped assignments per layer. The embedding and the head are
# vocabulary-parallel (each rank 272 / tp rows) with the cross-entropy
# reduced over tp, tied or not. Gradient clipping is set low
# enough to act at every step, so a norm that counted a tensor twice (or a
# shard once) would change the losses too. Layouts: dense tp 2 (GQA: 4
# heads, 2 kv heads, one per rank), tied embeddings tp 2, dense tp 4 (4 kv heads), MoE tp 2 with
# capacity and the aux and z losses, dp 2 x tp 2 with ZeRO 1 (dense and MoE),
# ep 2 x tp 2 (MoE, ZeRO 0 and 1), dp 2 x tp 2 with gradient accumulation,
# MoE dp 2 x tp 2 with ZeRO 2 and with the global-batch load-balancing loss,
# ep 2 x tp 2 with ZeRO 3 and both offloads.
# Validation passes (run.eval_interval) give the losses of 1 rank too.
# Every launch runs under a timeout, so a hang fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
STEPS=12
. "$FB_SRCDIR/tests/e2e/parallel_lib.sh"
DENSE="--set model.num_local_experts=0"
TP=parallel.tensor_parallel_size

# a corpus with a validation split for the runs with validation passes
(cd "$FB_SRCDIR" && timeout 120 "$FABULA" prep -q --max-seq-len 64 --overlap 8 --min-seq-len 16 --valid-fraction 0.25 \
    --seed 7 --output "$SCRATCH/split.h5" inputs/sample.jsonl) >"$SCRATCH/prep.out" 2>&1
check "prep with a validation split" '[ $? -eq 0 ]'
EVAL="--set data.corpus=\"$SCRATCH/split.h5\" --set data.tokenizer=bytes --set run.eval_interval=6 --set run.eval_samples=12"
train 1 dense-ref $DENSE --set zero_optimization.stage=0 $EVAL
check "reference run (1 rank, dense, GQA 4/2)" '[ $RC -eq 0 ]'
train 2 dense-tp2 $DENSE --set zero_optimization.stage=0 --set $TP=2 $EVAL
check "dense, tp 2 (one kv head a rank), ZeRO 0: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-tp2 && [ "$(grep -c valid_lm_loss "$SCRATCH/dense-tp2/metrics.jsonl")" -eq 2 ]'
train 4 dense-dp2-tp2 $DENSE --set zero_optimization.stage=1 --set $TP=2 $EVAL
check "dense, dp 2 x tp 2, ZeRO 1: losses, norms and validation losses of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-dp2-tp2'
train 4 dense-dp2-tp2-ga $DENSE --set zero_optimization.stage=1 --set $TP=2 --set train_micro_batch_size_per_gpu=1 $EVAL
check "dense, dp 2 x tp 2, ZeRO 1, 2 micro-batches a step: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-dp2-tp2-ga'

train 1 tied-ref $DENSE --set model.tie_word_embeddings=true --set zero_optimization.stage=1
check "reference run (1 rank, dense, tied embeddings)" '[ $RC -eq 0 ]'
train 2 tied-tp2 $DENSE --set model.tie_word_embeddings=true --set zero_optimization.stage=1 --set $TP=2
check "dense, tied embeddings, tp 2, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare tied-ref tied-tp2'

train 1 kv4-ref $DENSE --set model.num_key_value_heads=4 --set zero_optimization.stage=1
check "reference run (1 rank, dense, 4 kv heads)" '[ $RC -eq 0 ]'
train 4 kv4-tp4 $DENSE --set model.num_key_value_heads=4 --set zero_optimization.stage=1 --set $TP=4
check "dense, tp 4, ZeRO 1: losses and norms of 1 rank" '[ $RC -eq 0 ] && compare kv4-ref kv4-tp4'

# the default MoE: 4 experts, top 2, capacity 1.25, aux and z losses
train 1 moe-ref --set zero_optimization.stage=0 --set model.router_z_loss_coef=0.001
check "reference run (1 rank, MoE) drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/moe-ref/metrics.jsonl")" -gt 0 ]'
SAME="expert_tokens dropped layer_dropped"
train 2 moe-tp2 --set zero_optimization.stage=0 --set model.router_z_loss_coef=0.001 --set $TP=2
check "MoE, tp 2 (expert tensor parallelism), ZeRO 0: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-tp2 $SAME"
train 4 moe-dp2-tp2 --set zero_optimization.stage=1 --set model.router_z_loss_coef=0.001 --set $TP=2
check "MoE, dp 2 x tp 2, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-dp2-tp2 $SAME"
train 4 moe-ep2-tp2 --set zero_optimization.stage=0 --set model.router_z_loss_coef=0.001 --set $TP=2 \
    --set parallel.expert_parallel_size=2
check "MoE, ep 2 x tp 2, ZeRO 0: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-tp2 $SAME"
train 4 moe-ep2-tp2-z1 --set zero_optimization.stage=1 --set model.router_z_loss_coef=0.001 --set $TP=2 \
    --set parallel.expert_parallel_size=2
check "MoE, ep 2 x tp 2, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-tp2-z1 $SAME"
GLOBAL="--set model.router_aux_loss_scope=\"global_batch\""
train 1 moe-global-ref --set zero_optimization.stage=0 $GLOBAL
check "reference run (1 rank, MoE, global-batch load balancing)" '[ $RC -eq 0 ]'
train 4 moe-global-dp2-tp2 --set zero_optimization.stage=1 --set $TP=2 $GLOBAL
check "MoE, global-batch load balancing, dp 2 x tp 2: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-global-ref moe-global-dp2-tp2 $SAME"
OVERLAP="--set zero_optimization.overlap_comm=true --set zero_optimization.reduce_bucket_size=20000"
train 4 moe-dp2-tp2-z2 --set zero_optimization.stage=2 --set model.router_z_loss_coef=0.001 --set $TP=2 $OVERLAP
check "MoE, dp 2 x tp 2, ZeRO 2, overlapped buckets: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-dp2-tp2-z2 $SAME"
train 4 moe-ep2-tp2-z3 --set zero_optimization.stage=3 --set model.router_z_loss_coef=0.001 --set $TP=2 $OVERLAP \
    --set parallel.expert_parallel_size=2 --set 'zero_optimization.offload_optimizer.device="cpu"' \
    --set 'zero_optimization.offload_param.device="cpu"'
check "MoE, ep 2 x tp 2, ZeRO 3, optimizer and parameters offloaded: losses, norms, tokens per expert, drops" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-tp2-z3 $SAME"
check "the start-up line shows the tensor-parallel layout" \
    'grep -q "tp 2" "$SCRATCH/moe-ep2-tp2.out"'
finish
