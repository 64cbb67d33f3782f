#!/bin/sh
# Expert parallelism: 20 steps of the tiny MoE with the load-balancing and
# z losses on give the losses of the single-rank run within 1e-5 relative,
# the same tokens per expert and the same dropped assignments per layer,
# step by step: dropless on 4 ranks with ep = 1, 2, 4 (dp = all 4 ranks) x
# each ZeRO stage; with capacity (the default model: factor 1.25, aux 0.01)
# on 4 ranks with ep 1, 2, 4 and on 2 ranks with ep 2. The step's
# micro-batches do not depend on the layout (docs/loader.md) and each rank
# routes and drops its own micro-batch's tokens before the all-to-all
# (docs/expert-parallel.md). The step's statistics agree with each other
# (genre counts sum to tokens x top-k, per-layer figures to the totals), and
# the spread of the kept share over the step's micro-batches is the same
# whether one rank or several hold them. With expert dropout (0.1) the
# same: each expert row's mask is keyed by where the row came from (the
# micro-batch's seed, the token, the choice), not by where it is computed,
# so ep 2 and ep 4 (3 chunks) route, drop and lose as one rank does.
# Every launch runs under a timeout, so a hang fails the test.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh"
# what must be equal besides the losses
SAME="expert_tokens dropped layer_dropped"

# kept A B: the per-layer spread of the kept share over the step's
# micro-batches (moe_layers "microbatches", "kept_share_mean",
# "kept_share_sd"; docs/run-dir.md) of run B is run A's: the same
# micro-batches route and drop alike on every layout, only the sums' order
# differs. kept NAME: a layer that dropped nothing kept every share whole.
kept() {
    "$PY" - "$SCRATCH/$1/metrics.jsonl" "${2:+$SCRATCH/$2/metrics.jsonl}" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])] if sys.argv[2] else None
ok = True
for i, r in enumerate(a):
    for l, x in enumerate(r["moe_layers"]):
        if x["microbatches"] != 4 or not (0 < x["kept_share_mean"] <= 1) or x["kept_share_sd"] < 0:
            print("step %d layer %d: %s" % (r["step"], l, x)); ok = False
        if x["dropped"] == 0 and (x["kept_share_mean"] != 1.0 or x["kept_share_sd"] != 0.0):
            print("step %d layer %d: nothing dropped, yet %s" % (r["step"], l, x)); ok = False
        if x["dropped"] > 0 and not x["kept_share_mean"] < 1.0:
            print("step %d layer %d: %d dropped, yet %s" % (r["step"], l, x["dropped"], x)); ok = False
        if b:
            y = b[i]["moe_layers"][l]
            for k in ("kept_share_mean", "kept_share_sd"):
                if abs(x[k] - y[k]) > 1e-9:
                    print("step %d layer %d: %s %.12g vs %.12g" % (r["step"], l, k, x[k], y[k])); ok = False
sys.exit(0 if ok else 1)
EOF
}

# the statistics of one run agree with each other and with the config
stats_ok() { # NAME TOPK
    "$PY" - "$SCRATCH/$1/metrics.jsonl" "$2" <<'EOF'
import json, sys
K = int(sys.argv[2]); ok = True
for line in open(sys.argv[1]):
    r = json.loads(line)
    for l, (lay, et) in enumerate(zip(r["moe_layers"], r["expert_tokens"])):
        routed = sum(sum(g[l]) for g in r["genre_expert_tokens"].values())
        if routed != r["tokens"] * K:
            print("step %d layer %d: genres route %d tokens, expected %d" % (r["step"], l, routed, r["tokens"] * K)); ok = False
        if (lay["tokens_min"], lay["tokens_max"]) != (min(et), max(et)) or abs(lay["tokens_mean"] * len(et) - sum(et)) > 1e-6:
            print("step %d layer %d: min/mean/max %s do not fit %s" % (r["step"], l, lay, et)); ok = False
        if sum(et) + lay["dropped"] != r["tokens"] * K:
            print("step %d layer %d: kept %d + dropped %d != %d" % (r["step"], l, sum(et), lay["dropped"], r["tokens"] * K)); ok = False
    if sum(x["dropped"] for x in r["moe_layers"]) != r["dropped"]:
        print("step %d: per-layer dropped do not sum to %d" % (r["step"], r["dropped"])); ok = False
    if abs(sum(x["aux"] for x in r["moe_layers"]) / len(r["moe_layers"]) - r["aux_loss"]) > 1e-6 * abs(r["aux_loss"]):
        print("step %d: mean of per-layer aux != aux_loss" % r["step"]); ok = False
    if "ep_alltoall" in r and not (r["ep_alltoall"]["calls"] > 0 and r["ep_alltoall"]["bytes"] > 0):
        print("step %d: no all-to-all traffic recorded" % r["step"]); ok = False
sys.exit(0 if ok else 1)
EOF
}

OVERLAP="--set zero_optimization.overlap_comm=true --set zero_optimization.reduce_bucket_size=20000 \
    --set zero_optimization.allgather_bucket_size=30000"
train 1 ref $DROPLESS
check "reference run (1 rank, dropless, aux and z losses on)" '[ $RC -eq 0 ]'
check "dropless: every micro-batch keeps all its assignments (kept share 1, spread 0)" "kept ref"
for ep in 1 2 4; do
    for stage in 0 1 2 3; do
        name="ep$ep-z$stage"
        train 4 $name $DROPLESS --set parallel.expert_parallel_size=$ep --set zero_optimization.stage=$stage $OVERLAP
        check "4 ranks, ep $ep, ZeRO $stage: losses within 1e-5 of 1 rank, same tokens per expert" \
            "[ $RC -eq 0 ] && compare ref $name 1e-5 $SAME"
    done
done

# capacity 1.25 and aux 0.01 (the default model) against one rank
train 1 cap-ref --set zero_optimization.stage=0
check "capacity: 1 rank drops assignments" \
    '[ $RC -eq 0 ] && [ "$(grep -c "\"dropped\":[1-9]" "$SCRATCH/cap-ref/metrics.jsonl")" -gt 0 ]'
check "capacity: statistics consistent (genres, per-layer figures)" "stats_ok cap-ref 2"
check "capacity: the kept share of 4 micro-batches a step, under 1 where a layer dropped" "kept cap-ref"
train 4 cap-ep1 --set zero_optimization.stage=0
check "capacity: 4 ranks, ep 1, ZeRO 0: losses, tokens per expert and drops of 1 rank" \
    "[ $RC -eq 0 ] && compare cap-ref cap-ep1 1e-5 $SAME"
check "capacity: 4 ranks of one micro-batch each: the kept share's spread over the step of 1 rank's 4" \
    "kept cap-ref cap-ep1"
train 2 cap-np2-ep2 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=2 $OVERLAP
check "capacity: 2 ranks, ep 2, ZeRO 2: losses, tokens per expert and drops of 1 rank" \
    "[ $RC -eq 0 ] && compare cap-ref cap-np2-ep2 1e-5 $SAME"
check "capacity: 2 ranks of two micro-batches, ep 2: the kept share's spread of 1 rank" "kept cap-ref cap-np2-ep2"
train 4 cap-ep2 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=1 $OVERLAP
check "capacity: 4 ranks, ep 2, ZeRO 1: losses, tokens per expert and drops of 1 rank" \
    "[ $RC -eq 0 ] && compare cap-ref cap-ep2 1e-5 $SAME"
train 4 cap-ep4 --set parallel.expert_parallel_size=4 --set zero_optimization.stage=3 $OVERLAP
check "capacity: 4 ranks, ep 4, ZeRO 3: losses, tokens per expert and drops of 1 rank" \
    "[ $RC -eq 0 ] && compare cap-ref cap-ep4 1e-5 $SAME"
check "capacity: ep 4 statistics consistent, all-to-all recorded" "stats_ok cap-ep4 2"

# expert dropout 0.1 with capacity: the masks, the routing and the losses of
# ep 2 and ep 4 (in 3 chunks) are the single rank's
DROP="--set model.expert_dropout=0.1"
train 1 drop-ref $DROP
check "expert dropout: reference run (1 rank)" '[ $RC -eq 0 ]'
train 2 drop-ep2 $DROP --set parallel.expert_parallel_size=2
check "expert dropout: 2 ranks, ep 2: losses within 1e-5 of 1 rank, same tokens per expert and drops every step" \
    "[ $RC -eq 0 ] && compare drop-ref drop-ep2 1e-5 $SAME"
train 4 drop-ep4 $DROP --set parallel.expert_parallel_size=4 --set parallel.moe_a2a_chunks=3 \
    --set zero_optimization.stage=1
check "expert dropout: 4 ranks, ep 4, 3 chunks: losses within 1e-5 of 1 rank, same tokens per expert and drops" \
    "[ $RC -eq 0 ] && compare drop-ref drop-ep4 1e-5 $SAME"
finish
