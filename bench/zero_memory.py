#!/usr/bin/env python3
"""Per-GPU model-state memory of fabula (`fabula plan memory --json`) beside
DeepSpeed's estimators and the ZeRO paper (docs/zero.md, "fabula beside
DeepSpeed"; run by bench/zero_memory.sh).

    bench/zero_memory.py [--fabula PATH] [--python-only]

For Llama 7B, GPT-3 175B and a 355B MoE (inputs/examples/), bf16, pure data
parallelism over 8, 64 and 1024 GPUs (8 a node), ZeRO-1/2/3 with offload
none, optimizer, and (ZeRO-3) optimizer and parameters. DeepSpeed's
figures come from its own functions when `import deepspeed` works
(estimate_zero2_model_states_mem_needs for stages 1 and 2, as DeepSpeed's
docs use it, estimate_zero3_model_states_mem_needs for 3; see
bench/zero_memory.sh for the venv, over Debian's /usr/bin/python3 and its torch) and are checked against their
restatement in tests/e2e/plan_deepspeed_ref.py; otherwise the restatement
alone is used and the table says so. The ZeRO paper's column (Rajbhandari
et al. 2020, section 5 and Table 1: 4Ψ + 12Ψ/N for P_os, 2Ψ + 14Ψ/N for
P_os+g, 16Ψ/N for P_os+g+p) has no offload.

Columns, bytes per GPU in GiB:
  DS GPU      DeepSpeed's GPU figure (ZeRO-3: includes its gathered largest layer, 4 bytes a parameter)
  DS states   the same less that layer (ZeRO-3), i.e. its model states alone
  fabula      fabula's device model states: fp32 master, fp32 gradient, Adam m and v, 16-bit weights
  ratio       fabula / DS states (ZeRO-1: fabula / paper)
  workspace   fabula's ZeRO workspaces and buckets in flight (docs/zero.md, "Workspaces")
  DS CPU/GPU  DeepSpeed's CPU figure per node over 8 GPUs (it includes its 1.5 buffer factor)
  host        fabula's host model states per GPU (plus offload staging)
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import plan_deepspeed_ref as ref  # noqa: E402

GIB = 2.0 ** 30
GPN = 8
MODELS = [
    ("Llama 7B", "inputs/examples/llama-7b.json"),
    ("GPT-3 175B", "inputs/examples/gpt3-175b.json"),
    ("MoE 355B", "inputs/examples/moe-355b.json"),
]
WORLDS = [8, 64, 1024]
# (label, ZeRO stage, offload_optimizer, offload_param)
SETTINGS = [
    ("ZeRO-1", 1, False, False),
    ("ZeRO-1 + offload opt", 1, True, False),
    ("ZeRO-2", 2, False, False),
    ("ZeRO-2 + offload opt", 2, True, False),
    ("ZeRO-3", 3, False, False),
    ("ZeRO-3 + offload opt", 3, True, False),
    ("ZeRO-3 + offload both", 3, True, True),
]


def deepspeed_functions():
    try:
        # its accelerator notice goes to stdout: keep the table clean
        with contextlib.redirect_stdout(sys.stderr):
            import deepspeed
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as z2
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as z3
    except Exception as e:  # any import failure: no DeepSpeed here
        print(f"(DeepSpeed does not import: {e}; the restated formulas only)", file=sys.stderr)
        return None
    return deepspeed.__version__, z2, z3


def fabula_memory(fabula, cfg, world, stage, off_opt, off_par):
    cmd = [fabula, "plan", "memory", "--world", str(world), "--json", cfg,
           "--set", "bf16.enabled=true", "--set", "run.backend=cuda",
           "--set", f"zero_optimization.stage={stage}",
           "--set", f"zero_optimization.offload_optimizer.device={'cpu' if off_opt else 'none'}",
           "--set", f"zero_optimization.offload_param.device={'cpu' if off_par else 'none'}"]
    out = subprocess.run(cmd, cwd=TOP, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def paper(stage, total, n):
    return {1: 4 * total + 12 * total / n, 2: 2 * total + 14 * total / n, 3: 16 * total / n}[stage]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabula", default=os.environ.get("FABULA", os.path.join(TOP, "fabula")))
    ap.add_argument("--python-only", action="store_true")
    a = ap.parse_args()
    ds = None if a.python_only else deepspeed_functions()
    src = (f"DeepSpeed {ds[0]}'s functions" if ds
           else "DeepSpeed's formulas as restated in tests/e2e/plan_deepspeed_ref.py")
    print(f"DeepSpeed columns: {src} (zero_init=True, additional_buffer_factor=1.5, {GPN} GPUs a node); "
          "bf16; GiB per GPU\n")
    print("| model | GPUs | setting | DS GPU | DS states | paper | fabula | ratio | workspace | DS CPU/GPU | host |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    worst = [0.0, 0.0]  # ZeRO-2/3, ZeRO-1
    for name, cfg in MODELS:
        model = json.load(open(os.path.join(TOP, cfg)))["model"]
        total, largest = ref.model_shapes(model)
        for world in WORLDS:
            nodes = max(world // GPN, 1)
            gpn = min(world, GPN)
            for label, stage, oo, op in SETTINGS:
                if stage < 3:
                    cpu, gpu = ref.zero2(total, gpn, nodes, oo)
                    if ds:
                        got = ds[1](total, gpn, nodes, oo)
                        assert tuple(got) == (cpu, gpu), (got, cpu, gpu)
                    ds_states = gpu
                else:
                    cpu, gpu = ref.zero3(total, largest, gpn, nodes, oo, op)
                    if ds:
                        got = ds[2](total, largest, gpn, nodes, oo, op, True)[:2]
                        assert tuple(got) == (cpu, gpu), (got, cpu, gpu)
                    ds_states = gpu - 4 * largest
                m = fabula_memory(a.fabula, cfg, world, stage, oo, op)
                states = m["params"] + m["grads"] + m["optimizer"] + m["weight_copy"]
                host = m["host_params"] + m.get("host_grads", 0) + m["host_optimizer"] + m.get("host_weight_copy", 0)
                staging = m["host_staging"]
                pap = paper(stage, total, world) if not oo else None
                # ZeRO-1 without offload against the paper, everything else against DeepSpeed's estimator
                against = pap if stage == 1 and not oo else ds_states
                ratio = states / against if against else (1.0 if states == 0 else float("inf"))
                worst[stage == 1] = max(worst[stage == 1], ratio)
                work = m["workspace"] + m["comm_buckets"]
                print(f"| {name} | {world} | {label} | {gpu / GIB:.2f} | {ds_states / GIB:.2f} | "
                      f"{f'{pap / GIB:.2f}' if pap is not None else '-'} | {states / GIB:.2f} | "
                      f"{ratio:.2f} | {work / GIB:.2f} | "
                      f"{cpu / gpn / GIB:.1f} | {host / GIB:.2f} (+{staging / GIB:.2f}) |")
        print(f"| {name} | | Ψ = {total:,}, largest module {largest:,} | | | | | | | | |")
    print(f"\nworst ratio of model states, fabula / DeepSpeed: ZeRO-2/3 {worst[0]:.3f}, ZeRO-1 {worst[1]:.3f}")


if __name__ == "__main__":
    main()
