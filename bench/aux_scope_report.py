#!/usr/bin/env python3
"""Compares runs of bench/aux_scope.sh: for each metrics.jsonl, the training
LM loss (mean of the last 10% of steps), the last validation LM loss (when the
run evaluated), the aux loss, the median step time,
and per MoE layer the mutual information I(genre; expert) in bits of the
top-K choices summed over the second half of the run (0: the expert tells
nothing about the genre; log2(#genres) at most).

usage: aux_scope_report.py METRICS.jsonl [METRICS.jsonl ...]
"""
import json
import math
import statistics
import sys


def mutual_information(table):
    """table[g][e] counts -> I(G; E) in bits."""
    total = sum(sum(row) for row in table)
    if total == 0:
        return 0.0
    pg = [sum(row) / total for row in table]
    pe = [sum(row[e] for row in table) / total for e in range(len(table[0]))]
    mi = 0.0
    for g, row in enumerate(table):
        for e, n in enumerate(row):
            if n:
                p = n / total
                mi += p * math.log2(p / (pg[g] * pe[e]))
    return mi


def summarize(path):
    recs = [json.loads(line) for line in open(path) if line.strip()]
    recs = [r for r in recs if "lm_loss" in r]
    if not recs:
        sys.exit(f"{path}: no step records")
    tail = recs[-max(1, len(recs) // 10):]
    half = recs[len(recs) // 2:]
    genres = sorted({g for r in half for g in r.get("genre_expert_tokens", {})})
    layers = len(half[0]["expert_tokens"])
    mi = []
    for l in range(layers):
        table = []
        for g in genres:
            row = None
            for r in half:
                counts = r.get("genre_expert_tokens", {}).get(g)
                if counts:
                    row = [a + b for a, b in zip(row, counts[l])] if row else list(counts[l])
            if row and sum(row):
                table.append(row)
        mi.append(mutual_information(table) if table else 0.0)
    valid = [r["valid_lm_loss"] for r in recs if "valid_lm_loss" in r]
    return {"steps": len(recs), "lm": statistics.mean(r["lm_loss"] for r in tail),
            "valid": valid[-1] if valid else float("nan"),
            "aux": statistics.mean(r["aux_loss"] for r in tail),
            "step_time": statistics.median(r["step_time"] for r in recs[3:] or recs),
            "mi": mi, "genres": len(genres)}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(f"{'run':<48} {'steps':>5} {'LM loss':>8} {'valid LM':>8} {'aux':>7} {'step s':>7}  "
          "I(genre; expert) per layer, bits")
    for path in sys.argv[1:]:
        s = summarize(path)
        mi = " ".join(f"{x:.3f}" for x in s["mi"])
        print(f"{path:<48} {s['steps']:>5} {s['lm']:>8.4f} {s['valid']:>8.4f} {s['aux']:>7.4f} {s['step_time']:>7.3f}  {mi}"
              f"  (of {s['genres']} genres)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
