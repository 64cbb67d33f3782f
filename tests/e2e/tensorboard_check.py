#!/usr/bin/env python3
"""Reads a fabula run's TensorBoard event files with TensorBoard's own
EventAccumulator and checks them against the run's metrics.jsonl and
checkpoints; and its csv_monitor files against metrics.jsonl.

    tensorboard_check.py RUN_DIR TB_DIR CSV_DIR HIST_STEP:CKPT ...

Scalars: the tags are exactly the numeric leaves of the metrics records
(key paths joined with "/", arrays by index, booleans 0/1, "step" the x
axis; a number at the top of the record under its group of
docs/monitoring.md, so that no tag is without a "/"), each step once, each
value the record's as float32.
Histograms at HIST_STEP: "params/<name>" equals the checkpoint's /params/<name>
(min, max, num, sum, sum_squares, bucket limits and counts, the buckets
recomputed here with numpy on TensorBoard's default edges), and the
"grads/<name>" sums of squares add up to the step's gradient norm squared
(times the clipping factor). Prints "ok: ..." / "FAIL: ..." lines; exit 1
on any failure."""
import csv
import json
import math
import os
import sys

import h5py
import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea

FAILS = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        FAILS.append(what)


# docs/monitoring.md, "Scalars": the section of each top-level scalar
GROUPS = {"loss": ["loss", "lm_loss", "aux_loss", "z_loss"], "valid": ["valid_lm_loss", "valid_ppl"],
          "optimizer": ["lr", "grad_norm", "loss_scale", "skipped"],
          "throughput": ["tokens", "samples", "tokens_per_s", "step_time", "step_cpu_time", "elapsed", "eta_s",
                         "model_flops", "model_flops_per_s", "mfu"],
          "data": ["imbalance", "packing", "max_len"], "moe": ["dropped"],
          "monitor": ["rss_bytes", "monitor_overhead_s"]}
GROUP_OF = {k: g for g, keys in GROUPS.items() for k in keys}


def leaves(obj, prefix=""):
    """(tag, value, is_int) of every numeric or boolean leaf."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not prefix and k == "step":
                continue
            if not prefix and not isinstance(v, (dict, list)):
                k = GROUP_OF.get(k, "other") + "/" + k
            yield from leaves(v, f"{prefix}/{k}" if prefix else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}/{i}")
    elif isinstance(obj, bool):
        yield prefix, 1.0 if obj else 0.0, True
    elif isinstance(obj, (int, float)):
        yield prefix, obj, isinstance(obj, int)


def tf_default_edges():
    """TensorBoard's default histogram bucket limits: 0 and +-1e-12 * 1.1^k
    below 1e20, closed by +-DBL_MAX."""
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    big = sys.float_info.max
    return np.array([-big] + [-x for x in reversed(pos)] + [0.0] + pos + [big])


def hist_reference(x):
    x = x.astype(np.float64).ravel()
    edges = tf_default_edges()
    b = np.minimum(np.searchsorted(edges, x, side="right"), len(edges) - 1)
    counts = np.bincount(b, minlength=len(edges)).astype(np.float64)
    nz = np.nonzero(counts)[0]
    lo, hi = nz[0], nz[-1] + 1
    return dict(min=x.min(), max=x.max(), num=float(x.size), sum=float(np.sum(x)),
                sum_squares=float(np.sum(x * x)), limits=list(edges[lo:hi]), counts=list(counts[lo:hi]))


def main():
    run, tb_dir, csv_dir = sys.argv[1:4]
    hists = [a.split(":", 1) for a in sys.argv[4:]]
    records = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    config = json.load(open(os.path.join(run, "config.json")))
    want = {}  # tag -> {step: (value, is_int)}
    for r in records:
        for tag, v, is_int in leaves(r):
            want.setdefault(tag, {})[r["step"]] = (v, is_int)

    acc = ea.EventAccumulator(tb_dir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    check(acc.file_version == 2.0, f"file version {acc.file_version} (brain.Event:2)")
    check(set(tags["scalars"]) == set(want),
          f"{len(tags['scalars'])} scalar tags = the {len(want)} numeric leaves of metrics.jsonl "
          f"(missing {sorted(set(want) - set(tags['scalars']))[:5]}, extra {sorted(set(tags['scalars']) - set(want))[:5]})")
    bad = []
    nvalues = 0
    for tag in sorted(set(want) & set(tags["scalars"])):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if steps != sorted(want[tag]):
            bad.append(f"{tag}: steps {steps} != {sorted(want[tag])}")
            continue
        for e in events:
            v = want[tag][e.step][0]
            nvalues += 1
            # the writer stores float32; metrics.jsonl has 9 significant digits
            if not (np.float32(v) == np.float32(e.value) or abs(e.value - v) <= 1.2e-7 * abs(v)):
                bad.append(f"{tag} step {e.step}: {e.value} != {v}")
    check(not bad, f"{nvalues} scalar values equal metrics.jsonl as float32, each step once" +
          (": " + "; ".join(bad[:5]) if bad else ""))
    for tag in ("loss/loss", "optimizer/lr", "optimizer/grad_norm", "throughput/tokens_per_s", "expert_tokens/0/0",
                "moe_layers/1/tokens_max"):
        check(tag in tags["scalars"], f"scalar {tag} present")
    # issue 46: 23 of 353 tags had no group; none may
    check(all("/" in t for t in tags["scalars"]),
          f"every scalar tag is in a section (ungrouped: {[t for t in tags['scalars'] if '/' not in t][:5]})")
    check(not any(t.startswith("other/") for t in tags["scalars"]),
          f"no top-level metric falls to other/ ({[t for t in tags['scalars'] if t.startswith('other/')][:5]})")

    for step_s, ckpt in hists:
        step = int(step_s)
        with h5py.File(ckpt, "r") as f:
            names = []
            f["params"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            bad = []
            for name in names:
                tag = "params/" + name
                if tag not in tags["histograms"]:
                    bad.append(f"no histogram {tag}")
                    continue
                hv = [h for h in acc.Histograms(tag) if h.step == step]
                if len(hv) != 1:
                    bad.append(f"{tag}: {len(hv)} histograms at step {step}")
                    continue
                h = hv[0].histogram_value
                ref = hist_reference(f["params"][name][()])
                exact = (h.min == ref["min"] and h.max == ref["max"] and h.num == ref["num"] and
                         list(h.bucket_limit) == ref["limits"] and list(h.bucket) == ref["counts"])
                close = (math.isclose(h.sum, ref["sum"], rel_tol=1e-9, abs_tol=1e-9) and
                         math.isclose(h.sum_squares, ref["sum_squares"], rel_tol=1e-9))
                if not (exact and close):
                    bad.append(f"{tag}: min {h.min}/{ref['min']} max {h.max}/{ref['max']} num {h.num}/{ref['num']} "
                               f"sum {h.sum}/{ref['sum']} sumsq {h.sum_squares}/{ref['sum_squares']} "
                               f"buckets {len(h.bucket)}/{len(ref['counts'])}")
            check(names and not bad, f"step {step}: the {len(names)} parameter histograms equal {os.path.basename(ckpt)}"
                  f" (min, max, num, sum, sum_squares, {sum(1 for _ in names)} x bucket counts)" +
                  (": " + "; ".join(bad[:3]) if bad else ""))
            # gradients: their squares add up to the clipped norm squared
            rec = [r for r in records if r["step"] == step][0]
            norm = rec["grad_norm"]
            clip = config.get("gradient_clipping", 0.0) or 0.0
            coef = min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0
            ss, num = 0.0, 0.0
            for name in names:
                hv = [h for h in acc.Histograms("grads/" + name) if h.step == step]
                if hv:
                    ss += hv[0].histogram_value.sum_squares
                    num += hv[0].histogram_value.num
            numel = sum(f["params"][n].size for n in names)
            check(num == numel and math.isclose(ss, (coef * norm) ** 2, rel_tol=1e-5),
                  f"step {step}: gradient histograms cover {num:.0f} of {numel} elements, sum of squares {ss:.9g} = "
                  f"(clip {coef:.6g} x grad_norm {norm:.9g})^2 = {(coef * norm) ** 2:.9g}")

    if csv_dir != "-":
        bad = []
        files = {n for n in os.listdir(csv_dir) if n.endswith(".csv")}
        expect_files = {t.replace("/", "_").replace(" ", "_") + ".csv": t for t in want}
        check(files == set(expect_files), f"{len(files)} CSV files, one per tag ({len(expect_files)})")
        for name, tag in expect_files.items():
            if name not in files:
                continue
            rows = list(csv.reader(open(os.path.join(csv_dir, name))))
            if rows[0] != ["step", tag]:
                bad.append(f"{name}: header {rows[0]}")
            got = {int(r[0]): r[1] for r in rows[1:]}
            if len(got) != len(rows) - 1 or sorted(got) != sorted(want[tag]):
                bad.append(f"{name}: steps {[r[0] for r in rows[1:]]} != {sorted(want[tag])}")
                continue
            for s, text in got.items():
                v, is_int = want[tag][s]
                if (int(text) != v) if is_int and "." not in text else float(text) != float(v):
                    bad.append(f"{name} step {s}: {text} != {v}")
        check(not bad, "every CSV row equals metrics.jsonl (integers exactly, reals to the 9 digits both keep)" +
              (": " + "; ".join(bad[:5]) if bad else ""))
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
