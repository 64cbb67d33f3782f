#!/usr/bin/env python3
"""Checks of `fabula plan layout` by means other than its own code
(tests/e2e/plan_layout.sh).

  plan_layout_check.py search OUT.json MACHINE.json CONFIG.json WORLD GBT HEADROOM
      The search's answer against a brute force: every layout of the grid
      docs/plan.md "Layout search" describes is enumerated here, given to
      `fabula plan memory --layout` (a refusal there: not a layout), and
      kept when its bytes fit the machine by the rule stated there. The set
      kept must be the set the search printed (OUT has --top large enough
      for all), each printed memory figure must be plan memory's, the list
      must be sorted by tokens/s, and tokens/s must be the global batch over
      the step time.
  plan_layout_check.py deepspeed CONFIG.json WORLD
      fabula's per-rank model states at ZeRO-1/2/3, with and without offload,
      against DeepSpeed's byte counts where the definitions agree
      (plan_deepspeed_ref.py): at ZeRO-1/2/3, with and without the
      offloads, each state's bytes and place (device or host) and the
      device and host totals.
"""
import itertools
import json
import os
import subprocess
import sys

import plan_deepspeed_ref as ref

FABULA = os.environ["FABULA"]
# --set overrides the search was given, comma-separated
SETS = [x for x in os.environ.get("FB_CHECK_SETS", "").split(",") if x]
FAILS = []


def check(what, ok):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        FAILS.append(what)


def memory(config, spec=None, world=None, sets=()):
    cmd = [FABULA, "plan", "memory", "--json", config]
    cmd += ["--layout", spec] if spec else ["--world", str(world)]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 else None


def value(fig):
    return fig["value"] if isinstance(fig, dict) else fig


def search(out, machine, config, world, gbt, headroom):
    res = json.load(open(out))
    mach = json.load(open(machine))
    cfg = json.load(open(config))
    dev_mem = value(mach["device_memory"])
    host_mem = value(mach["host_memory"])
    dpn = int(value(mach["devices_per_node"]))
    link = value(mach.get("host_link_bandwidth", 0))
    m = cfg["model"]
    layers, L = m["num_hidden_layers"], cfg["data"]["seq_len"]
    zero = cfg.get("zero_optimization", {}).get("stage", 0)
    offload = any(x.startswith("zero_optimization.offload_optimizer.device=cpu") for x in SETS)
    # FB_CHECK_STATES=all: the search was not given --keep-zero, so every
    # ZeRO stage with the offloads DeepSpeed allows at it
    if os.environ.get("FB_CHECK_STATES") == "all":
        states = [(0, "none"), (1, "none"), (1, "optimizer"), (2, "none"), (2, "optimizer"), (3, "none"),
                  (3, "optimizer"), (3, "param"), (3, "both")]
    else:
        states = [(zero, "optimizer" if offload else "none")]

    def fits(mm):
        # every pipeline stage must fit, each on its own (stage_lines); one
        # memory: device and host bytes of a stage together
        stages = mm.get("stage_lines") or [mm]
        for s in stages:
            dev = s["device_total"] + (0 if link > 0 else s["host_total"])
            if dev > dev_mem * (1 - headroom) or (link > 0 and s["host_total"] > host_mem / dpn):
                return False
        return True

    want = {}
    for tp in [t for t in range(1, dpn + 1) if dpn % t == 0 and world % t == 0]:
        for pp in [p for p in range(1, layers + 1) if layers % p == 0 and (world // tp) % p == 0]:
            dp = world // (tp * pp)
            for vpp, sp, rec, k, (z, off) in itertools.product(range(1, 9), (0, 1), ("none", "selective", "full"),
                                                             (1, 2, 4, 8), states):
                T = k * L
                if (vpp > 1 and (pp == 1 or (layers // pp) % vpp)) or (sp and tp == 1) or gbt % (dp * T):
                    continue
                accum = gbt // (dp * T)
                if vpp > 1 and accum % pp:
                    continue
                spec = f"dp={dp},tp={tp},pp={pp},ep=1,zero={z}" + (f",offload={off}" if off != "none" else "") + \
                    (",sp" if sp else "") + \
                    f",recompute={rec},vpp={vpp},tokens={T},accum={accum}"
                mm = memory(config, spec, sets=SETS)
                if mm is not None and fits(mm):
                    want[spec] = mm
    got = {l["layout"]: l for l in res["layouts"]}
    check(f"the search prints every layout the brute force keeps ({len(want)}) and no other ({len(got)})",
          set(got) == set(want) and len(got) < 100)
    for spec in sorted(set(got) - set(want))[:5]:
        print("  printed, not kept by the brute force:", spec)
    for spec in sorted(set(want) - set(got))[:5]:
        print("  kept by the brute force, not printed:", spec)
    same = all(got[s]["memory"]["device_total"] == want[s]["device_total"] and
               got[s]["memory"]["host_total"] == want[s]["host_total"] for s in set(got) & set(want))
    check("each printed layout's device and host bytes are plan memory's", same)
    tps = [l["time"]["tokens_per_s"] for l in res["layouts"]]
    check("ranked by tokens/s, best first", all(a >= b for a, b in zip(tps, tps[1:])))
    check("tokens/s = global batch / step time",
          all(abs(l["time"]["tokens_per_s"] * l["time"]["step_s"] - gbt) <= 1e-9 * gbt for l in res["layouts"]))
    check("stats: feasible = layouts printed", res["stats"]["feasible"] == len(res["layouts"]))


def deepspeed(config, world):
    cfg = json.load(open(config))
    total, largest = ref.model_shapes(cfg["model"])
    terms = ref.sharded_terms(total, world)
    # a shard is rounded up to whole elements per parameter group: a few elements per rank at most
    tol = 64 * 4 + 1e-6 * terms["fp32_params"]

    def near(a, b):
        return abs(a - b) <= tol

    for stage, oo, op in ((1, 0, 0), (1, 1, 0), (2, 0, 0), (2, 1, 0), (3, 0, 0), (3, 1, 0), (3, 1, 1)):
        sets = [f"zero_optimization.stage={stage}",
                f"zero_optimization.offload_optimizer.device={'cpu' if oo else 'none'}",
                f"zero_optimization.offload_param.device={'cpu' if op else 'none'}"]
        mm = memory(config, world=world, sets=sets)
        name = f"ZeRO-{stage}{' offload optimizer' if oo else ''}{' and params' if op else ''}, {world} ranks"
        if mm is None:
            check(f"{name}: plan memory runs", False)
            continue
        # DeepSpeed's placement (its stage 1/2 and 3 engines): the fp32 master, Adam's moments and (stage 2/3)
        # the fp32 gradient partitioned; the optimizer's state on the host with offload_optimizer; the 16-bit
        # weights whole at stages 1-2, partitioned at 3, on the host with offload_param
        # plan memory's JSON gives each state's device bytes and its host_ bytes apart
        def placed(key, want, host):
            dev, hst = mm[key], mm["host_" + key]
            return near(hst if host else dev, want) and (dev if host else hst) == 0

        where = lambda host: "host" if host else "device"
        check(f"{name}: Adam's moments are DeepSpeed's 8 bytes/param over the world, {where(oo)}",
              placed("optimizer", terms["moments"], oo))
        check(f"{name}: fp32 master weights are DeepSpeed's 4 bytes/param over the world, {where(oo)}",
              placed("params", terms["fp32_params"], oo))
        w16 = 2 * total / world if stage == 3 else 2 * total
        check(f"{name}: 16-bit weights are DeepSpeed's 2 bytes/param{' over the world' if stage == 3 else ', whole'}"
              f", {where(op)}", placed("weight_copy", w16, op))
        if stage == 1:
            # the documented difference: fabula's ZeRO-1 sums the fp32 gradient whole before the update
            check(f"{name}: fp32 gradients whole on the device (docs/zero.md: ZeRO-1's gradient)",
                  placed("grads", 4 * total, 0))
            continue
        check(f"{name}: fp32 gradients are DeepSpeed's 4 bytes/param over the world, {where(oo)}",
              placed("grads", terms["fp32_grads"], oo))
        device = mm["params"] + mm["grads"] + mm["optimizer"] + mm["weight_copy"]
        host = mm["host_params"] + mm["host_grads"] + mm["host_optimizer"] + mm["host_weight_copy"]
        if stage == 3:
            cpu, gpu = ref.zero3(total, largest, 1, world, oo, op)
            # DeepSpeed's GPU figure less its gathered largest layer (fabula's are its workspaces); its
            # host figure over its 1.5 pinned-buffer factor
            check(f"{name}: device model states = DeepSpeed's GPU bytes less its gathered layer",
                  near(device, gpu - 4 * largest))
            if oo:
                check(f"{name}: host model states = DeepSpeed's CPU bytes over its buffer factor",
                      near(host, cpu / 1.5))
        else:
            cpu, gpu = ref.zero2(total, 1, world, oo)
            if oo:
                check(f"{name}: device model states = DeepSpeed's GPU bytes (the 16-bit weights)",
                      near(device, gpu))
            else:
                # DeepSpeed also keeps a 16-bit gradient partition (2 bytes/param over the world); fabula
                # reduces into the fp32 one
                check(f"{name}: DeepSpeed's GPU bytes = fabula's + its 16-bit gradient partition",
                      near(gpu, device + 2 * total / world))


def main():
    if sys.argv[1] == "search":
        search(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
    elif sys.argv[1] == "deepspeed":
        deepspeed(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"unknown check {sys.argv[1]}")
    print(f"{len(FAILS)} failed")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
