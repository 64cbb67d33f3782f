#!/usr/bin/env python3
"""Where ZeRO's model states live, restated independently of fabula's C.

    zero_placement_ref.py TRAIN_OUT RUN_DIR PLAN_JSON WORLD ACT_BYTES

TRAIN_OUT is `fabula train`'s output (its "memory bytes:" line), RUN_DIR
its run directory (config.json: the model, the ZeRO stage, the offloads,
ep), PLAN_JSON `fabula plan memory --json` of the same layout (its device
and host split). Exits 1, saying which figure differs, unless:

1. the line's params, weights16, grads and optimizer equal docs/zero.md's
   placement, computed here from parameter counts taken from the model
   config (not from fabula), for rank 0 of each reduction group (the
   largest shard): the dense parameters over dp = WORLD ranks, the experts
   (E / ep of them on a rank) over dp / ep ranks;
2. in mixed precision (ACT_BYTES 2) at ZeRO 1-3, each state equals the
   count DeepSpeed's engines keep (ZeRO paper; DeepSpeed's stage 1/2/3
   optimizers; restated as bytes per parameter and rank, DeepSpeed's
   padding of a partition to a multiple of the world aside): 16-bit weights
   2 bytes, whole below stage 3 and partitioned at 3; the fp32 master 4 and
   Adam's m and v 8, partitioned; the fp32 gradient partition 4 at stages
   2/3 (DeepSpeed's 16-bit gradient buffer has no fabula counterpart:
   fabula's backward writes fp32, and at stage 1 accumulates the whole fp32
   gradient, as DeepSpeed's bf16 optimizer does); and each lives where
   DeepSpeed puts it: the 16-bit partition on the host with offload_param,
   the master, the moments and the gradient partition with
   offload_optimizer.
"""
import json
import re
import sys


def groups(model, ep):
    """(dense, expert) parameter counts of one rank's table (its E / ep
    experts), from the model section of a config."""
    V, D, I = model["vocab_size"], model["hidden_size"], model["intermediate_size"]
    L, H, KV = model["num_hidden_layers"], model["num_attention_heads"], model["num_key_value_heads"]
    E, freq = model["num_local_experts"], model.get("moe_layer_freq", 1)
    hd = D // H
    attn = D * H * hd * 2 + D * KV * hd * 2
    dense = V * D * (1 if model["tie_word_embeddings"] else 2) + D + L * (attn + 2 * D)
    expert = 0
    for layer in range(L):
        if E > 1 and layer % freq == 0:
            dense += E * D  # the router: replicated, with the dense weights
            expert += (E // ep) * 3 * D * I
        else:
            dense += 3 * D * I
    return dense, expert


def shard(n, ranks):
    """Rank 0's part of n elements split into ceil(n / ranks) pieces."""
    return min(n, -(-n // ranks)) if n else 0


def main():
    out, run_dir, plan_json, world, ab = sys.argv[1:6]
    world, ab = int(world), int(ab)
    line = [l for l in open(out) if "memory bytes:" in l][0]
    got = {k: int(v) for k, v in (kv.split("=") for kv in line.split("memory bytes:")[1].split())}
    plan = json.load(open(plan_json))
    cfg = json.load(open(run_dir + "/config.json"))
    zero = cfg["zero_optimization"]
    stage = zero["stage"]
    oo = zero.get("offload_optimizer", {}).get("device", "none") == "cpu"
    op = zero.get("offload_param", {}).get("device", "none") == "cpu" and stage == 3
    ep = cfg.get("parallel", {}).get("expert_parallel_size", 1)
    dense, expert = groups(cfg["model"], ep)
    sizes = [(dense, world), (expert, world // ep)]
    total = dense + expert
    own = sum(shard(n, r) for n, r in sizes) if stage else total
    mixed = ab == 2 and stage >= 1
    bad = []

    def expect(what, have, want, slack=0):
        ok = abs(have - want) <= slack
        print("  %-44s %12d %s %12d" % (what, have, "==" if ok else "!=", want))
        if not ok:
            bad.append(what)

    # 1. docs/zero.md's placement
    print("  placement (docs/zero.md), rank 0: %d parameters, %d owned" % (total, own))
    expect("params: fp32 master", got["params"], 4 * (own if stage == 3 or mixed else total))
    expect("weights16: 16-bit weights", got.get("weights16", 0),
           0 if ab == 4 else 2 * (own if stage == 3 else total))
    expect("grads: fp32", got["grads"], 4 * (own if stage >= 2 else total))
    expect("optimizer: Adam m, v", got["optimizer"], 8 * own)
    expect("parameters", got["parameters"], total)
    if mixed:
        # 2. DeepSpeed's counts and places; its partition of a flat buffer
        # of P elements pads P to a multiple of the ranks: a few elements
        slack = sum(4 * r for _, r in sizes) * 2
        part = sum(n / r for n, r in sizes)
        ds16 = 2 * (part if stage == 3 else total)
        print("  DeepSpeed ZeRO-%d%s%s, per rank" % (stage, " + offload_optimizer" if oo else "",
                                                     " + offload_param" if op else ""))
        expect("16-bit weights", got["weights16"], ds16, slack)
        expect("  of them on the host (offload_param)", plan["host_weight_copy"], ds16 if op else 0, slack)
        expect("fp32 master partition", got["params"], 4 * part, slack)
        expect("  on the host (offload_optimizer)", plan["host_params"], 4 * part if oo else 0, slack)
        expect("Adam m and v partitions", got["optimizer"], 8 * part, slack)
        expect("  on the host (offload_optimizer)", plan["host_optimizer"], 8 * part if oo else 0, slack)
        if stage >= 2:
            expect("fp32 gradient partition", got["grads"], 4 * part, slack)
            expect("  on the host (offload_optimizer)", plan["host_grads"], 4 * part if oo else 0, slack)
    if bad:
        print("  differ: %s" % ", ".join(bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
