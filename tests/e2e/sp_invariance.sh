#!/bin/sh
# Sequence parallelism (docs/parallel.md, "Sequence parallelism"): STEPS
# steps of tiny models with parallel.sequence_parallel under tp 2 and 4 give
# the per-step losses and gradient norms of the single-rank run within 1e-5
# relative and, for the MoE, the same tokens per expert and dropped
# assignments per layer. Micro-batches are one 63-token sample, so the token
# shards are uneven (32/31 at tp 2, 16/16/16/15 at tp 4). The models have 8
# heads and 4 kv heads (GQA: two kv heads a rank at tp 2, one at tp 4).
# Gradient clipping acts at every step, so a norm weight whose gradient
# missed another rank's shard would change the losses. Layouts: dense tp 2
# and tp 4, MoE (capacity, aux and z losses) tp 2 and tp 4, MoE ep 2 x tp 2
# with ZeRO 1 and with ZeRO 3 (overlapped buckets: the norm weights'
# gradient parts must be summed before each block's gradients leave), dense
# dp 2 x tp 2 with ZeRO 1, MoE tp 2 with full
# recomputation, dense tp 2 x pp 2 (the stages pass their token shards).
# Every launch runs under a timeout, so a hang fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
STEPS=20
PAR_SHAPE="--set train_batch_size=4 --set train_micro_batch_size_per_gpu=1 --set data.seq_len=63 \
    --set model.num_attention_heads=8 --set model.num_key_value_heads=4"
PAR_TIMEOUT=300
PAR_SEQ=63
. "$FB_SRCDIR/tests/e2e/parallel_lib.sh"
DENSE="--set model.num_local_experts=0"
TP=parallel.tensor_parallel_size
SP="--set parallel.sequence_parallel=true"

train 1 dense-ref $DENSE --set zero_optimization.stage=0
check "reference run (1 rank, dense, GQA 8/4, 63-token micro-batches)" '[ $RC -eq 0 ]'
train 2 dense-tp2-sp $DENSE --set zero_optimization.stage=0 --set $TP=2 $SP
check "dense, tp 2 + sp (shards 32/31): losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-tp2-sp'
check "the start-up line says sequence parallel" 'grep -q "tp 2 .*sequence parallel" "$SCRATCH/dense-tp2-sp.out"'
train 4 dense-tp4-sp $DENSE --set zero_optimization.stage=0 --set $TP=4 $SP
check "dense, tp 4 + sp (shards 16/16/16/15): losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-tp4-sp'
train 4 dense-dp2-tp2-sp-z1 $DENSE --set zero_optimization.stage=1 --set $TP=2 $SP
check "dense, dp 2 x tp 2 + sp, ZeRO 1: losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-dp2-tp2-sp-z1'
train 4 dense-tp2-pp2-sp $DENSE --set zero_optimization.stage=0 --set $TP=2 $SP \
    --set parallel.pipeline_parallel_size=2
check "dense, tp 2 x pp 2 + sp (1F1B over token shards): losses and norms of 1 rank" \
    '[ $RC -eq 0 ] && compare dense-ref dense-tp2-pp2-sp'

# the default MoE: 4 experts, top 2, capacity 1.25, aux and z losses
SAME="expert_tokens dropped layer_dropped"
MOE="--set model.router_z_loss_coef=0.001"
train 1 moe-ref --set zero_optimization.stage=0 $MOE
check "reference run (1 rank, MoE) drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/moe-ref/metrics.jsonl")" -gt 0 ]'
train 2 moe-tp2-sp --set zero_optimization.stage=0 $MOE --set $TP=2 $SP
check "MoE, tp 2 + sp: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-tp2-sp $SAME"
train 4 moe-tp4-sp --set zero_optimization.stage=0 $MOE --set $TP=4 $SP
check "MoE, tp 4 + sp: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-tp4-sp $SAME"
train 4 moe-ep2-tp2-sp-z1 --set zero_optimization.stage=1 $MOE --set $TP=2 $SP \
    --set parallel.expert_parallel_size=2
check "MoE, ep 2 x tp 2 + sp, ZeRO 1: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-tp2-sp-z1 $SAME"
train 4 moe-ep2-tp2-sp-z3 --set zero_optimization.stage=3 $MOE --set $TP=2 $SP \
    --set parallel.expert_parallel_size=2 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=20000
check "MoE, ep 2 x tp 2 + sp, ZeRO 3, overlapped buckets: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-ep2-tp2-sp-z3 $SAME"
train 2 moe-tp2-sp-full --set zero_optimization.stage=0 $MOE --set $TP=2 $SP --set model.recompute=full
check "MoE, tp 2 + sp, full recomputation: losses, norms, tokens per expert, drops of 1 rank" \
    "[ \$RC -eq 0 ] && compare moe-ref moe-tp2-sp-full $SAME"
finish
