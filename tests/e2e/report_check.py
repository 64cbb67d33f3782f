#!/usr/bin/env python3
"""Independent reference for `fabula report`: recomputes from metrics.jsonl
and config.json (docs/run-dir.md, docs/monitoring.md) what the report
prints, and compares.

  report_check.py scaling TABLE RUN_DIR...   the --scaling table (stdout)
"""
import json
import math
import os
import sys


def load(run):
    steps = []
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            if line.strip():
                steps.append(json.loads(line))
    cfg = {}
    if os.path.exists(os.path.join(run, "config.json")):
        with open(os.path.join(run, "config.json")) as f:
            cfg = json.load(f)
    return cfg, steps


def get(obj, path):
    for k in path.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None


def warm(steps):
    """the first line and every line not following its predecessor's step"""
    return [i == 0 or steps[i]["step"] != steps[i - 1]["step"] + 1 for i in range(len(steps))]


def world(cfg, steps):
    for s in steps:
        w = get(s, "ranks.world")
        if w is not None and w >= 1:
            return int(w)
    return int(cfg["train_batch_size"] / (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]) + 0.5)


def measured(steps):
    w = warm(steps)
    keep = [i for i in range(len(steps)) if not w[i]] or list(range(len(steps)))
    return [steps[i] for i in keep]


def scaling_rows(runs):
    rows = []
    for run in runs:
        cfg, steps = load(run)
        m = measured(steps)
        tok = 0.0
        sec = 0.0
        for s in m:
            tok += s["tokens"]
            sec += s["step_time"]
        r = world(cfg, steps)
        tps = tok / sec
        split = None
        tot = comp = comm = imb = 0.0
        for s in m:
            t = s.get("time")
            if not t or "forward" not in t or "backward" not in t:
                continue
            tot += s["step_time"]
            comp += t["forward"] + t["backward"] + t.get("optimizer", 0)
            comm += t.get("comm_wait", 0)
            imb += t.get("imbalance", 0)
            split = True
        mem = [get(s, "ranks.rss_max_bytes") for s in steps]
        mem = [v for v in mem if v is not None] or [v for v in (get(s, "rss_bytes") for s in steps) if v is not None]
        rows.append({
            "ranks": r, "tps": tps, "tpr": tps / r,
            "split": (100 * comp / tot, 100 * comm / tot, 100 * imb / tot) if split and tot > 0 else None,
            "mem": max(mem) / (1024.0 * 1024.0) if mem else None,
        })
    rows.sort(key=lambda x: x["ranks"])  # stable, as qsort need not be: the tests use distinct rank counts
    base = rows[0]["tpr"]
    out = []
    for x in rows:
        cells = [str(x["ranks"]), "%.1f" % x["tps"], "%.1f" % x["tpr"], "%.3f" % (x["tpr"] / base)]
        cells += ["%.1f" % v for v in x["split"]] if x["split"] else ["-"] * 3
        cells.append("%.1f" % x["mem"] if x["mem"] is not None else "-")
        out.append(cells)
    return out


def table_rows(path):
    rows = []
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    want = ["ranks", "tokens/s", "tokens/s per rank", "efficiency", "compute %", "comm %", "imbalance %",
            "memory/rank (MiB)"]
    if head != want:
        sys.exit("header %r, expected %r" % (head, want))
    for l in lines[2:]:
        rows.append([c.strip() for c in l.strip("|").split("|")])
    return rows


def main():
    mode = sys.argv[1]
    if mode == "scaling":
        got = table_rows(sys.argv[2])
        want = scaling_rows(sys.argv[3:])
        if got != want:
            print("table:    %r\nexpected: %r" % (got, want))
            return 1
        for r in want:
            print("  " + " | ".join(r))
        return 0
    sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    sys.exit(main())
