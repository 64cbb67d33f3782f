#!/usr/bin/env python3
"""Independent reference for tests/e2e/plan_time.sh: the step time
docs/plan.md ("Time") gives for a layout, computed here from the config's
shapes (the Mixtral/Llama parameter layout of docs/model.md), the batch
rules of docs/config.md and the alpha-beta formulas, then compared with
`fabula plan time --json`.

usage: plan_time_ref.py CONFIG.json MACHINE.json WORLD ZERO EP OVERLAP RB AB MEAN_LEN [OFFLOAD [DROPPED [METRICS]]] < plan.json
(OFFLOAD: none, optimizer or both; DROPPED: the share of top-k expert
assignments capacity drops, whose FLOPs no expert runs, default 0;
METRICS: the metrics.jsonl given to --routing-from, whose "expert_tokens"
give the routing imbalance of ep > 1 and whose "moe_layers" kept shares the
routing spread of dp > 1 at ep 1)
exit 0 when every figure agrees to 1e-9 relative (the synchronisation waits,
whose normal order statistic both sides integrate numerically, and the step
with them to 1e-6), else 1 with the differences."""
import json
import math
import sys

cfg = json.load(open(sys.argv[1]))
mach = json.load(open(sys.argv[2]))
world, zero, ep, overlap = (int(x) for x in sys.argv[3:7])
rb, ab, mean_len = float(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9])
offload = sys.argv[10] if len(sys.argv) > 10 else "none"
dropped = float(sys.argv[11]) if len(sys.argv) > 11 else 0.0
metrics = [json.loads(x) for x in open(sys.argv[12])] if len(sys.argv) > 12 else []
got = json.load(sys.stdin)

m = cfg["model"]
V, D, I, L = m["vocab_size"], m["hidden_size"], m["intermediate_size"], m["num_hidden_layers"]
H, KV, E, K = m["num_attention_heads"], m["num_key_value_heads"], m["num_local_experts"], m["num_experts_per_tok"]
hd = D // H
freq = m.get("moe_layer_freq", 1)
moe = [E > 1 and l % freq == 0 for l in range(L)]

# parameter blocks: embedding, each layer, final norm + head
dense_blocks = [V * D]
expert_blocks = [0]
for l in range(L):
    attn = 2 * D + D * H * hd + 2 * D * KV * hd + H * hd * D  # two norms, q, k, v, o
    if moe[l]:
        dense_blocks.append(attn + E * D)  # router
        expert_blocks.append(E // ep * 3 * D * I)
    else:
        dense_blocks.append(attn + 3 * D * I)
        expert_blocks.append(0)
dense_blocks.append(D + V * D)
expert_blocks.append(0)
psi_d, psi_e = sum(dense_blocks), sum(expert_blocks)

# batch: train_batch_size = micro x accumulation x world (docs/config.md)
tb, mb = cfg["train_batch_size"], cfg["train_micro_batch_size_per_gpu"]
ga = tb // (mb * world)
T = tb * mean_len / (world * ga)
S2 = tb * mean_len ** 2 / (world * ga)

fig = lambda k: mach[k]["value"]
intra = mach["intra"]["latency_s"]["value"], mach["intra"]["bandwidth"]["value"]
inter = mach["inter"]["latency_s"]["value"], mach["inter"]["bandwidth"]["value"]
per_node = fig("devices_per_node")

def link(stride, n):
    return intra if stride * n <= per_node else inter

def ring_ar(n, B, l): return 2 * (n - 1) * l[0] + 2 * (n - 1) / n * B / l[1]
def tree_ar(n, B, l): return 2 * math.ceil(math.log2(n)) * l[0] + 2 * B / l[1]
def allreduce(n, B, l): return min(ring_ar(n, B, l), tree_ar(n, B, l))
def rs_ag(n, B, l): return (n - 1) * l[0] + (n - 1) / n * B / l[1]

dp, edp = world, world // ep
# compute
active = 0
for l in range(L):
    active += D * hd * (2 * H + 2 * KV) + (E * D + K * 3 * D * I if moe[l] else 3 * D * I)
active += V * D
norms = (2 * L + 1) * D
# a dropped assignment skips its expert's three D x I matmuls, forward and backward
f_lin = 6 * (active + norms) * T - dropped * T * 6 * sum(K * 3 * D * I for l in range(L) if moe[l])
f_att = 12 * L * D * S2
att_rate = fig("attention_flops") if "attention_flops" in mach else fig("flops")
# the kept assignments' expert matmuls at expert_flops, the rest at flops
exp_rate = fig("expert_flops") if "expert_flops" in mach else fig("flops")
f_kept = (1 - dropped) * T * 6 * sum(K * 3 * D * I for l in range(L) if moe[l])
t_mb = (f_lin - f_kept) / fig("flops") + f_kept / exp_rate + f_att / att_rate
fwd, bwd = t_mb / 3, 2 * t_mb / 3
owned = (psi_d / dp + psi_e / edp) if zero >= 1 else (psi_d + psi_e)
opt = owned * 28 / fig("memory_bandwidth")
host = mach["host_link_bandwidth"]["value"] if "host_link_bandwidth" in mach else 0
off = 0.0
if host > 0 and offload in ("optimizer", "both"):
    off += 2 * owned * 4 / host  # gradient down, parameters up
if host > 0 and offload == "both" and zero == 3:
    off += 2 * ga * owned * 4 / host  # the shard up for every gather

want = {}
def role(name, calls, bytes_each, secs_each):
    r = want.setdefault(name, [0.0, 0.0, 0.0])
    r[0] += calls; r[1] += calls * bytes_each; r[2] += calls * secs_each

for name, n, psi, blocks, stride in (("dp_grad", dp, psi_d, dense_blocks, 1), ("edp_grad", edp, psi_e, expert_blocks, ep)):
    if n <= 1 or psi == 0:
        continue
    l = link(stride, n)
    if zero <= 1 and overlap:
        # blocks finish last to first; the pending range goes out, in
        # bucket pieces, once it reaches the bucket (docs/zero.md)
        c, pend = 0, 0
        for b in reversed(blocks):
            pend += b
            if pend >= rb:
                c += math.ceil(pend / rb)
                pend = 0
        if pend:
            c += math.ceil(pend / rb)
        B = psi * 4 / c
        role(name, c, B, allreduce(n, B, l) if zero == 0 else rs_ag(n, B, l))
    elif zero <= 1:
        c = max(1, math.ceil(psi / rb))
        B = psi * 4 / c
        role(name, c, B, allreduce(n, B, l) if zero == 0 else rs_ag(n, B, l))
    else:
        c = sum(math.ceil(b / rb) for b in blocks if b > 0)
        B = psi * 4 / c
        role(name, ga * c, B, rs_ag(n, B, l))
    if zero in (1, 2):
        c = max(1, math.ceil(psi / ab))
        B = psi * 4 / c
        role("dp_param_gather", c, B, rs_ag(n, B, l))
    elif zero == 3:
        c = sum(1 for b in blocks if b > 0)  # an empty block is not gathered
        B = psi * 4 / c
        role("zero3_gather", 2 * ga * c, B, rs_ag(n, B, l))
if world > 1:
    role("grad_norm", 1, 8, allreduce(world, 8, link(1, world)))
if ep > 1:
    nm = sum(moe)
    l = link(1, ep)
    role("ep_alltoall", ga * nm, 8 * ep, rs_ag(ep, 8 * ep, l))
    B = T * K * (1 - dropped) * D * 4  # the kept rows: a rank drops before it dispatches
    role("ep_alltoall", ga * nm * 4, B, rs_ag(ep, B, l))

exposed = {}
for name, (c, B, s) in want.items():
    e = s
    if overlap and name in ("dp_grad", "edp_grad"):
        window = bwd if zero <= 1 else ga * bwd
        last = s / c * (1 if zero <= 1 else ga)
        e = max(s - window, min(last, s))
    if overlap and name == "zero3_gather":
        e = max(s - ga * (fwd + bwd), min(s / c * 2 * ga, s))
    # the library hides only what it progresses while the rank computes
    exposed[name] = s - mach.get("overlap", {"value": 1.0})["value"] * (s - e)

# synchronisation waits (docs/plan.md): the machine's lag share, per block
# with ZeRO 2/3 on dp > 1 or ep > 1 (no tp here), per pass with dp > 1,
# scaled by the expected maximum of `world` normal draws over that of the
# calibrating ranks' (here by Simpson's rule on the order-statistic density)
def expected_max(n):
    if n <= 1:
        return 0.0
    h, total = 1e-3, 0.0
    npts = int(20 / h)
    for i in range(npts + 1):
        x = -10 + i * h
        w = 1 if i in (0, npts) else (4 if i % 2 else 2)
        cdf = 0.5 * math.erfc(-x / math.sqrt(2))
        if cdf > 0:
            total += w * x * n * math.exp(-0.5 * x * x + (n - 1) * math.log(cdf)) / math.sqrt(2 * math.pi)
    return total * h / 3

sync = 0.0
if "sync_wait" in mach and world > 1:
    sw = mach["sync_wait"]
    share = sw["per_block"]["value"] if (zero >= 2 and dp > 1) or ep > 1 else sw["per_pass"]["value"]
    sync = share * expected_max(world) / expected_max(sw["ranks"]["value"]) * ga * t_mb

# routing imbalance (docs/plan.md): per MoE layer, forward and backward,
# the ep rank holding the most loaded E/ep experts over the ranks' mean
routing = excess = 0.0
if ep > 1 and metrics:
    ratios = []
    for rec in metrics:
        for layer in rec.get("expert_tokens", []):
            per = len(layer) // ep
            ranks = [sum(layer[j * per:(j + 1) * per]) for j in range(ep)]
            if sum(ranks) > 0:
                ratios.append(max(ranks) / (sum(ranks) / ep) - 1)
    excess = sum(ratios) / len(ratios) if ratios else 0.0
    rows = T * K * (1 - dropped)  # a rank's mean expert rows a layer and micro-batch
    routing = excess * ga * sum(moe) * 6 * 3 * D * I * rows / exp_rate

# routing spread (docs/plan.md): the kept share's standard deviation over
# its mean, pooled over the lines' MoE layers by their n - 1 degrees of
# freedom, scaled from the lines' tokens per micro-batch to T by
# 1/sqrt(tokens); the slowest of dp ranks by it, once a step over all
# layer passes (ZeRO 0/1), at every backward block and once for the forward
# (ZeRO 2), at every block (ZeRO 3)
spread = spread_s = 0.0
if metrics and dp > 1 and ep == 1:
    num = dof = toks = mbs = 0.0
    for rec in metrics:
        ns = [x["microbatches"] for x in rec.get("moe_layers", []) if "microbatches" in x]
        for x in rec.get("moe_layers", []):
            if x.get("microbatches", 0) >= 2:
                num += (x["microbatches"] - 1) * (x["kept_share_sd"] / x["kept_share_mean"]) ** 2
                dof += x["microbatches"] - 1
        if ns and ns[0] >= 2 and "tokens" in rec and "dropped" in rec:
            toks += rec["tokens"]
            mbs += ns[0]
    if dof > 0 and mbs > 0:
        spread = math.sqrt(num / dof) * math.sqrt(toks / mbs / T)
        t_layer = 6 * 3 * D * I * T * K * (1 - dropped) / exp_rate  # a layer's experts, forward and backward
        f, b, n = t_layer / 3, 2 * t_layer / 3, sum(moe)
        g = expected_max(dp) * spread
        if zero == 3:
            spread_s = g * ga * n * (f + b)
        elif zero == 2:
            spread_s = g * ga * (math.sqrt(n) * f + n * b)
        else:
            spread_s = g * math.sqrt(ga * n) * (f + b)

compute = ga * t_mb + opt + off
step = compute + sum(exposed.values()) + sync + routing + spread_s
bad = []
def cmp(what, a, b, rel=1e-9):
    if not (abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)):
        bad.append(f"{what}: fabula {a!r}, reference {b!r}")

cmp("tokens_per_microbatch", got["tokens_per_microbatch"], T)
cmp("dropped", got["dropped"], dropped)
cmp("microbatches_per_rank", got["microbatches_per_rank"], ga)
cmp("forward_s", got["forward_s"], ga * fwd)
cmp("backward_s", got["backward_s"], ga * bwd)
cmp("optimizer_s", got["optimizer_s"], opt)
cmp("offload_s", got["offload_s"], off)
for name, r in got["comm"].items():
    c, B, s = want.get(name, [0.0, 0.0, 0.0])
    cmp(name + ".calls", r["calls"], c)
    cmp(name + ".bytes", r["bytes"], B)
    cmp(name + ".seconds", r["seconds"], s)
    cmp(name + ".exposed_s", r["exposed_s"], exposed.get(name, 0.0))
for name in want:
    if name not in got["comm"]:
        bad.append(f"{name}: missing from fabula's output")
cmp("sync_s", got["sync_s"], sync, 1e-6)
cmp("routing_excess", got["routing_excess"], excess)
cmp("routing_s", got["routing_s"], routing)
cmp("spread", got["spread"], spread)
cmp("spread_s", got["spread_s"], spread_s, 1e-6)
cmp("step_s", got["step_s"], step, 1e-6 if sync or spread_s else 1e-9)
cmp("tokens_per_s", got["tokens_per_s"], T * ga * world / step)
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"world {world} zero {zero} ep {ep} overlap {overlap}: {len(got['comm'])} collectives and the step "
      f"({step:.6g} s) agree")
