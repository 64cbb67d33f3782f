#!/usr/bin/env python3
"""fabula's model-state memory (`fabula plan memory --json`) beside
DeepSpeed's estimators for the same model and world size (docs/plan.md,
"fabula and DeepSpeed's memory estimators").

    bench/plan_deepspeed.py [--fabula PATH] [--python-only]

DeepSpeed's own functions are called when `import deepspeed` works (make a
virtual environment: python3 -m venv --system-site-packages V &&
DS_BUILD_OPS=0 V/bin/pip install --no-build-isolation --no-deps deepspeed
plus its pure-Python requirements; it imports on Debian's torch 1.13 with
the CPU accelerator), and checked against the restatement of their
formulas in tests/e2e/plan_deepspeed_ref.py; with --python-only, or when
DeepSpeed does not import, the restatement alone is used and the table says
so. Runs from the top of a checkout; prints a Markdown table.
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
CASES = [
    ("GPT-3 175B", "inputs/examples/gpt3-175b.json", 128, 8),
    ("MoE 355B", "inputs/examples/moe-355b.json", 64, 8),
]
# (label, ZeRO stage, offload_optimizer, offload_param)
SETTINGS = [
    ("ZeRO-2", 2, False, False),
    ("ZeRO-2 + offload optimizer", 2, True, False),
    ("ZeRO-3", 3, False, False),
    ("ZeRO-3 + offload optimizer", 3, True, False),
    ("ZeRO-3 + offload optimizer and params", 3, True, True),
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
           "--set", f"zero_optimization.stage={stage}",
           "--set", f"zero_optimization.offload_optimizer.device={'cpu' if off_opt else 'none'}",
           "--set", f"zero_optimization.offload_param.device={'cpu' if off_par else 'none'}"]
    out = subprocess.run(cmd, cwd=TOP, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabula", default=os.environ.get("FABULA", os.path.join(TOP, "fabula")))
    ap.add_argument("--python-only", action="store_true")
    a = ap.parse_args()
    ds = None if a.python_only else deepspeed_functions()
    src = (f"DeepSpeed {ds[0]}'s functions" if ds
           else "DeepSpeed's formulas as restated in tests/e2e/plan_deepspeed_ref.py")
    print(f"DeepSpeed columns: {src} (zero_init=True, additional_buffer_factor=1.5)\n")
    print("| model, GPUs | setting | DeepSpeed GPU | fabula device states | fabula + 16-bit copy + ZeRO workspace "
          "| DeepSpeed CPU/node | fabula host/node |")
    print("|---|---|---|---|---|---|---|")
    for name, cfg, nodes, gpn in CASES:
        model = json.load(open(os.path.join(TOP, cfg)))["model"]
        total, largest = ref.model_shapes(model)
        world = nodes * gpn
        for label, stage, oo, op in SETTINGS:
            if stage == 2:
                cpu, gpu = ref.zero2(total, gpn, nodes, oo)
                if ds:
                    got = ds[1](total, gpn, nodes, oo)
                    assert tuple(got) == (cpu, gpu), (got, cpu, gpu)
            else:
                cpu, gpu = ref.zero3(total, largest, gpn, nodes, oo, op)
                if ds:
                    got = ds[2](total, largest, gpn, nodes, oo, op, True)[:2]
                    assert tuple(got) == (cpu, gpu), (got, cpu, gpu)
            m = fabula_memory(a.fabula, cfg, world, stage, oo, op)
            states = m["params"] + m["grads"] + m["optimizer"]
            dev = states + m["weight_copy"] + m["workspace"]
            host = m["host_total"] * gpn
            print(f"| {name}, {world} | {label} | {gpu / GIB:.2f} | {states / GIB:.2f} | {dev / GIB:.2f} "
                  f"| {cpu / GIB:.1f} | {host / GIB:.1f} |")
        print(f"| {name} | Ψ = {total:,} parameters, largest module {largest:,} | | | | | |")


if __name__ == "__main__":
    main()
