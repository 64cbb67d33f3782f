#!/usr/bin/env python3
"""Checks the monitor's fields of RUN_DIR/metrics.jsonl (docs/monitoring.md).

usage: monitor_check.py RUN_DIR MODE [PEAK]
  (metrics.jsonl keeps 9 significant digits: equalities are to 2e-8)
  flops: every sample of the corpus is SEQ tokens long; model_flops must be
         the bench/README.md convention computed here from config.json
         (6 N_active with norms per token + 12 L D sum(len^2)), and with PEAK
         given mfu = model_flops_per_s / (world x PEAK)
  ranks: every step gathered, on the world size of config.json
Prints one line per check, "ok" or "FAIL", and exits 1 on any failure.
"""
import json
import os
import sys

PHASES = ["data", "forward", "backward", "comm_wait", "optimizer", "checkpoint", "imbalance"]
fails = 0


def check(cond, what):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails += 1


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def active_params(m):
    """Matmul weights a token passes through, with the norms (bench/README.md)."""
    D, I, L, V = m["hidden_size"], m["intermediate_size"], m["num_hidden_layers"], m["vocab_size"]
    H, KV = m["num_attention_heads"], m["num_key_value_heads"]
    E, k, freq = m["num_local_experts"], m["num_experts_per_tok"], m.get("moe_layer_freq", 1)
    hd = D // H
    n = 0
    for layer in range(L):
        n += D * hd * (2 * H + 2 * KV)
        moe = E > 1 and freq > 0 and (layer + 1) % freq == 0
        n += E * D + k * 3 * D * I if moe else 3 * D * I
    return n + V * D + (2 * L + 1) * D


def main():
    run, mode = sys.argv[1], sys.argv[2]
    cfg = json.load(open(run + "/config.json"))
    recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
    steps = cfg["run"]["steps"]
    every = cfg.get("steps_per_print", 10)
    check(len(recs) == steps, f"{len(recs)} records for {steps} steps")
    for r in recs:
        t = r.get("time", {})
        s = r["step"]
        check(sorted(t) == sorted(PHASES) and all(v >= 0 for v in t.values()),
              f"step {s}: time has the 7 phases, none negative")
        inside = sum(v for k, v in t.items() if k != "checkpoint")
        # CPU time of the step: some, and at most what the threads could use
        cores = max(os.cpu_count() or 1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
        cpu = r.get("step_cpu_time")
        check(cpu is not None and 0 < cpu <= r["step_time"] * cores * 1.1 + 0.02,
              f"step {s}: step_cpu_time {cpu} in (0, step_time x {cores} threads]")
        check(0.5 * r["step_time"] <= inside <= r["step_time"] * 1.001 + 1e-4,
              f"step {s}: phases {inside:.4f} s cover at least half of, and at most, the step {r['step_time']:.4f} s")
        check(rel(r["model_flops_per_s"], r["model_flops"] / r["step_time"]) < 1e-6,
              f"step {s}: model_flops_per_s = model_flops / step_time")
        check(r.get("rss_bytes", 0) > 10 << 20, f"step {s}: rss_bytes {r.get('rss_bytes')} above 10 MiB")
        gathered = mode == "ranks" or s == 1 or s % every == 0 or s == steps
        check(("ranks" in r) == gathered and ("bottleneck" in r) == gathered,
              f"step {s}: ranks and bottleneck {'present' if gathered else 'absent'}")
        if "bottleneck" in r:
            b = r["bottleneck"]
            check(b["verdict"] in ("compute", "communication", "imbalance", "input", "memory", "io")
                  and b["evidence"] and b["advice"], f"step {s}: verdict {b['verdict']} with evidence and advice")
        if mode == "flops":
            seq = int(sys.argv[4])
            m = cfg["model"]
            check(r["tokens"] == seq * r["samples"], f"step {s}: {r['samples']} samples of {seq} tokens")
            want = 6.0 * active_params(m) * r["tokens"] + \
                12.0 * m["num_hidden_layers"] * m["hidden_size"] * r["samples"] * seq * seq
            check(rel(r["model_flops"], want) < 2e-8, f"step {s}: model_flops {r['model_flops']:.6g} = {want:.6g}")
            peak = float(sys.argv[3])
            check(rel(r["mfu"], r["model_flops_per_s"] / peak) < 1e-6, f"step {s}: mfu = FLOP/s / peak")
        if mode == "ranks":
            g = r["ranks"]
            world = int(sys.argv[3])
            check(g["world"] == world and 0 <= g["slowest_rank"] < world, f"step {s}: world {g['world']}, "
                  f"slowest rank {g['slowest_rank']}")
            check(g["step_time_min"] <= g["step_time_mean"] <= g["step_time_max"], f"step {s}: min <= mean <= max")
            check(any(abs(g["step_time_min"] - r["step_time"]) < 1e-12 or abs(g["step_time_max"] - r["step_time"])
                      < 1e-12 or g["step_time_min"] <= r["step_time"] <= g["step_time_max"] for _ in [0]),
                  f"step {s}: rank 0's step time within the ranks' range")
            check(all(g["time_max"][p] >= g["time_mean"][p] - 1e-12 and 0 <= g["time_max_rank"][p] < world
                      for p in PHASES), f"step {s}: time_max >= time_mean, time_max_rank a rank")
            check(g["rss_max_bytes"] >= r["rss_bytes"], f"step {s}: rss_max_bytes >= rank 0's")
    print(f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
