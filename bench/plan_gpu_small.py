#!/usr/bin/env python3
"""Where a small model's GPU training step goes beyond `fabula plan
calibrate`'s passes (docs/plan.md, "Validation on a GPU").

On one GPU, for one config (default bench/configs/plan_validate.json, a
model so small that its kernels are shorter than their launches), runs:

  calibrate   fabula plan calibrate --write-machine: the forward + backward
              of one micro-batch's tokens, timed back to back
  bench       fabula-model-bench at the config's shape (no trainer: forward,
              backward and AdamW in a loop)
  train mbN   fabula train with N samples a micro-batch (the config's, all
              of the step's in one, and one), 20 steps each
  train quiet the config's micro-batches with the monitor's print, NVML
              read and metrics line every 1000 steps instead of every step

and samples the GPU's SM clock and utilisation (nvidia-smi, every 50 ms)
through each. Prints one table: per micro-batch, calibrate's pass against
training's forward + backward (the device events' time) and the clocks.

usage: bench/plan_gpu_small.py [--config FILE] [--steps N] [--out DIR]
env:   FABULA (default ./fabula), FABULA_MODEL_BENCH (default
       bench/fabula-model-bench), MPIEXEC (default mpiexec.mpich),
       FABULA_BACKEND (default cuda; cpu tries the script without a GPU)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def sampler(path):
    """nvidia-smi writing SM MHz and utilisation % every 50 ms, or None."""
    if not shutil.which("nvidia-smi"):
        return None
    f = open(path, "w")
    return subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,utilization.gpu",
                             "--format=csv,noheader,nounits", "-lms", "50"], stdout=f, stderr=subprocess.DEVNULL)


def clocks(path):
    """Median SM MHz and mean utilisation over the samples with any load."""
    mhz, util = [], []
    try:
        for line in open(path):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                mhz.append(int(parts[0]))
                util.append(int(parts[1]))
    except OSError:
        pass
    busy = [(m, u) for m, u in zip(mhz, util) if u > 0]
    if not busy:
        return "-", "-"
    return "%d" % statistics.median(m for m, _ in busy), "%.0f" % statistics.mean(u for _, u in busy)


def run(name, cmd, out):
    log = os.path.join(out, name + ".log")
    clk = os.path.join(out, name + ".clk")
    s = sampler(clk)
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if s:
        s.terminate()
        s.wait()
    if rc != 0:
        sys.stdout.write("%s: exit %d (see %s)\n" % (name, rc, log))
    return rc, log, clocks(clk)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="bench/configs/plan_validate.json")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    fabula = os.environ.get("FABULA", "./fabula")
    mbench = os.environ.get("FABULA_MODEL_BENCH", "bench/fabula-model-bench")
    mpiexec = os.environ.get("MPIEXEC", "mpiexec.mpich")
    out = a.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(a.config))
    m, seq = cfg["model"], cfg["data"]["seq_len"]
    batch, micro = cfg["train_batch_size"], cfg["train_micro_batch_size_per_gpu"]
    backend = os.environ.get("FABULA_BACKEND", "cuda")
    base = ["--set", "run.backend=" + backend, "--set", "checkpoint.save_interval=-1"]
    rows = []

    rc, log, clk = run("calibrate", [mpiexec, "-n", "1", fabula, "plan", "calibrate", a.config, *base,
                                     "--repeats", "9", "--write-machine", os.path.join(out, "m.json")], out)
    if rc == 0:
        for line in open(log):
            if line.startswith("calibrate: the model as configured:"):
                t = float(line.split()[-2])  # the long samples' pass: "... X s and Y s"
                rows.append(("calibrate pass", micro * seq, t, "-", clk))

    experts = m.get("num_local_experts", 1)
    shape = ["--layers", str(m["num_hidden_layers"]), "--hidden", str(m["hidden_size"]),
             "--heads", str(m["num_attention_heads"]), "--kv-heads", str(m.get("num_key_value_heads", m["num_attention_heads"])),
             "--vocab", str(m["vocab_size"]), "--ffn-hidden", str(m["intermediate_size"]),
             "--batch", str(micro), "--seq", str(seq), "--steps", "50", "--warmup", "5"]
    if experts > 1:
        shape += ["--model", "moe", "--experts", str(experts), "--topk", str(m["num_experts_per_tok"]),
                  "--expert-hidden", str(m["intermediate_size"])]
    rc, log, clk = run("bench", [mbench, "--backend", backend, *shape], out)
    if rc == 0:
        rec = [json.loads(l) for l in open(log) if l.startswith("{")]
        if rec and "step_ms" in rec[-1]:
            rows.append(("model-bench step (with AdamW)", micro * seq, rec[-1]["step_ms"] / 1e3, "-", clk))

    variants = [("train mb%d" % micro, micro, []), ("train mb%d" % batch, batch, []), ("train mb1", 1, []),
                ("train mb%d quiet" % micro, micro, ["--set", "steps_per_print=1000"])]
    for name, mb, extra in variants:
        d = os.path.join(out, name.replace(" ", "_"))
        rc, log, clk = run(name.replace(" ", "_"), [mpiexec, "-n", "1", fabula, "train", a.config, *base, *extra,
                                                    "--set", "train_micro_batch_size_per_gpu=%d" % mb,
                                                    "--steps", str(a.steps), "--run-dir", d], out)
        if rc != 0:
            continue
        recs = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))][3:]
        nmb = batch // mb
        step = statistics.median(r["step_time"] for r in recs)
        fb = statistics.median(r["time"]["forward"] + r["time"]["backward"] for r in recs) / nmb
        rows.append(("%s (%d a step)" % (name, nmb), mb * seq, fb, step, clk))

    print("plan on one GPU, %s: seconds per micro-batch (train: forward + backward of one, device events; "
          "median of steps 4-%d)" % (a.config, a.steps))
    print("| run | tokens a micro-batch | s a micro-batch | s a step | SM MHz (median) | GPU util % (mean) |")
    print("|---|---|---|---|---|---|")
    for name, tokens, t, step, (mhz, util) in rows:
        print("| %s | %d | %.5f | %s | %s | %s |" % (name, tokens, t, step if step == "-" else "%.5f" % step, mhz, util))
    print("files: %s" % out)


if __name__ == "__main__":
    main()
