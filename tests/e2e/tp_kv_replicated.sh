#!/bin/sh
# Tensor parallelism with fewer kv heads than tp ranks (docs/parallel.md,
# "Replicated kv heads"): each kv head is replicated on the tp / kv ranks
# whose query heads use it, its d(k), d(v) summed over them. STEPS steps
# give the per-step losses and gradient norms of the single-rank run
# within 1e-5 relative (and, for the MoE, the same tokens per expert and
# dropped assignments per layer). Gradient clipping acts at every step, so
# a norm that counted a replica twice (or a kv gradient summed over too few
# or too many ranks) changes the losses too. Layouts: 8 heads and 2 kv
# heads at tp 4 (two ranks a kv head), dense with ZeRO 0, 2 and 3 with both
# offloads, and with sequence parallelism; the MoE at tp 4 with ZeRO 1;
# 4 heads and 1 kv head at tp 2 and at dp 2 x tp 2 (ZeRO 3), and tp 2 x
# pp 2 (2 layers); tp 4 on cpu16 in bf16 within 2e-3 of the 1-rank bf16 run.
# Every launch runs under a timeout, so a hang fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
STEPS=20
PAR_SHAPE="--set train_batch_size=4 --set train_micro_batch_size_per_gpu=2 --set data.seq_len=64"
PAR_TIMEOUT=240
. "$FB_SRCDIR/tests/e2e/parallel_lib.sh"
DENSE="--set model.num_local_experts=0"
TP=parallel.tensor_parallel_size
H8="--set model.num_attention_heads=8 --set model.num_key_value_heads=2"
KV1="--set model.num_attention_heads=4 --set model.num_key_value_heads=1"

train 1 h8-ref $DENSE $H8 --set zero_optimization.stage=0
check "reference run (1 rank, dense, 8 heads, 2 kv heads)" '[ $RC -eq 0 ]'
train 4 h8-tp4 $DENSE $H8 --set zero_optimization.stage=0 --set $TP=4
check "dense, 8 heads / 2 kv heads, tp 4 (a kv head on 2 ranks), ZeRO 0: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare h8-ref h8-tp4'
check "... the start-up line names the tp layout" 'grep -q "tp 4" "$SCRATCH/h8-tp4.out"'
train 4 h8-tp4-z2 $DENSE $H8 --set zero_optimization.stage=2 --set $TP=4
check "dense, 8 heads / 2 kv heads, tp 4, ZeRO 2: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare h8-ref h8-tp4-z2'
train 4 h8-tp4-z3 $DENSE $H8 --set zero_optimization.stage=3 --set $TP=4 \
    --set 'zero_optimization.offload_optimizer.device="cpu"' --set 'zero_optimization.offload_param.device="cpu"'
check "dense, 8 heads / 2 kv heads, tp 4, ZeRO 3, optimizer and parameters offloaded: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare h8-ref h8-tp4-z3'
train 4 h8-tp4-sp $DENSE $H8 --set zero_optimization.stage=1 --set $TP=4 --set parallel.sequence_parallel=true
check "dense, 8 heads / 2 kv heads, tp 4 with sequence parallelism, ZeRO 1: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare h8-ref h8-tp4-sp'

# the default MoE: 4 experts, top 2, capacity 1.25, aux loss
SAME="expert_tokens dropped layer_dropped"
train 1 moe-ref $H8 --set zero_optimization.stage=0 --set model.router_z_loss_coef=0.001
check "reference run (1 rank, MoE, 8 heads, 2 kv heads) drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/moe-ref/metrics.jsonl")" -gt 0 ]'
train 4 moe-tp4 $H8 --set zero_optimization.stage=1 --set model.router_z_loss_coef=0.001 --set $TP=4
check "MoE, 8 heads / 2 kv heads, tp 4, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-tp4 $SAME"

train 1 kv1-ref $DENSE $KV1 --set zero_optimization.stage=0
check "reference run (1 rank, dense, 4 heads, 1 kv head)" '[ $RC -eq 0 ]'
train 2 kv1-tp2 $DENSE $KV1 --set zero_optimization.stage=0 --set $TP=2
check "dense, 4 heads / 1 kv head, tp 2 (the kv head on both ranks), ZeRO 0: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare kv1-ref kv1-tp2'
train 4 kv1-dp2-tp2-z3 $DENSE $KV1 --set zero_optimization.stage=3 --set $TP=2
check "dense, 4 heads / 1 kv head, dp 2 x tp 2, ZeRO 3: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare kv1-ref kv1-dp2-tp2-z3'

train 1 kv1-l2-ref $DENSE $KV1 --set model.num_hidden_layers=2 --set zero_optimization.stage=1
check "reference run (1 rank, dense, 2 layers, 4 heads, 1 kv head)" '[ $RC -eq 0 ]'
train 4 kv1-tp2-pp2 $DENSE $KV1 --set model.num_hidden_layers=2 --set zero_optimization.stage=1 --set $TP=2 \
    --set parallel.pipeline_parallel_size=2
check "dense, 4 heads / 1 kv head, tp 2 x pp 2, ZeRO 1: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare kv1-l2-ref kv1-tp2-pp2'

# 16-bit activations on the host (run.backend cpu16, bf16): the kv sums are
# widened to fp32 and rounded once, as the tp sums are; tp reorders the
# sums, so within mixed_parallel.sh's bf16 tolerance of the 1-rank bf16 run
B16="--set run.backend=\"cpu16\" --set bf16.enabled=true"
train 1 h8-bf16-ref $DENSE $H8 $B16 --set zero_optimization.stage=1
check "reference run (1 rank, dense, 8 heads, 2 kv heads, cpu16 bf16)" '[ $RC -eq 0 ]'
train 4 h8-bf16-tp4 $DENSE $H8 $B16 --set zero_optimization.stage=1 --set $TP=4
check "dense, 8 heads / 2 kv heads, tp 4, cpu16 bf16: losses and norms within 2e-3 of 1 rank" \
    '[ $RC -eq 0 ] && compare h8-bf16-ref h8-bf16-tp4 --tol 2e-3'
finish
