"""Compares the per-step losses of two metrics.jsonl files.

usage: compare_losses.py REFERENCE OTHER TOLERANCE
Exit 0 when both have the same steps and every |other - ref| / |ref| is
within TOLERANCE (NaN fails), else 1. Prints one line per step."""
import json
import math
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "step" in rec and "loss" in rec:
                out[rec["step"]] = rec["loss"]
    return out


def main():
    ref, other, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if sorted(ref) != sorted(other) or not ref:
        print(f"steps differ: {sorted(ref)} vs {sorted(other)}")
        return 1
    worst = 0.0
    for s in sorted(ref):
        a, b = ref[s], other[s]
        rel = abs(b - a) / abs(a) if a else abs(b)
        worst = rel if not (rel <= worst) else worst
        print(f"step {s:3d} ref {a:.6f} other {b:.6f} rel {rel:.2e}")
    ok = worst <= tol and not math.isnan(worst)
    print(f"worst relative difference {worst:.2e} (tolerance {tol:g}): {'ok' if ok else 'too large'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
