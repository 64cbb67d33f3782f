#!/usr/bin/env python3
"""Compares two runs' metrics.jsonl step by step, for the layout-invariance
tests (tests/e2e/parallel_lib.sh, docs/parallel.md).

usage: compare_parallel.py A B STEPS [--tol T] [--clip C] [--seq L] [KEY...]

Both runs have STEPS records. For loss, lm_loss, grad_norm and
valid_lm_loss: a value present (not null) in one run is present in the
other (an fp16 step that overflowed has a null grad_norm in both), and
where both have it B's is within T relative of A's (default 1e-5). Every
KEY is equal in both (layer_dropped: the per-layer drops of moe_layers;
layer_kept: their micro-batch counts equal and the kept share's mean and
standard deviation over the step's micro-batches within 1e-9, the sums'
order being the layout's).
Gradient clipping at C (default 0.05) acted on every step of A that has a
norm, so a norm that counted a tensor twice, or a shard once, would change
the losses too. With --seq L every micro-batch sample of A is L tokens
(tokens = L x samples, max_len = L). Prints each difference and, last, the
worst relative difference; exits 1 on any failure.
"""
import json
import sys

VALUES = ("loss", "lm_loss", "grad_norm", "valid_lm_loss")


def kept_close(a, b):
    """Per-layer (micro-batches, kept share mean, sd) of two runs: counts
    equal, shares within 1e-9, every layer measured in both."""
    if a is None or b is None or len(a) != len(b):
        return False
    for (na, ma, sa), (nb, mb, sb) in zip(a, b):
        if na is None or na != nb or ma is None or mb is None or abs(ma - mb) > 1e-9:
            return False
        if (sa is None) != (sb is None) or (sa is not None and abs(sa - sb) > 1e-9):
            return False
    return True


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    a = [json.loads(l) for l in open(args[0]) if l.strip()]
    b = [json.loads(l) for l in open(args[1]) if l.strip()]
    steps, rest = int(args[2]), args[3:]
    tol, clip, seq, keys = 1e-5, 0.05, None, []
    while rest:
        opt = rest.pop(0)
        if opt in ("--tol", "--clip", "--seq"):
            val = float(rest.pop(0))
            if opt == "--tol":
                tol = val
            elif opt == "--clip":
                clip = val
            else:
                seq = int(val)
        else:
            keys.append(opt)
    for r in a + b:
        if "moe_layers" in r:
            r["layer_dropped"] = [x["dropped"] for x in r["moe_layers"]]
            r["layer_kept"] = [(x.get("microbatches"), x.get("kept_share_mean"), x.get("kept_share_sd"))
                               for x in r["moe_layers"]]
    ok = len(a) == steps and len(b) == steps
    if not ok:
        print("steps: %d and %d, expected %d" % (len(a), len(b), steps))
    worst = 0.0
    for x, y in zip(a, b):
        if seq is not None and (x["tokens"] != seq * x["samples"] or x["max_len"] != seq):
            print("step %d: %d tokens in %d samples, not %d each" % (x["step"], x["tokens"], x["samples"], seq))
            ok = False
        for k in VALUES:
            if (x.get(k) is None) != (y.get(k) is None):
                print("step %d: %s %s vs %s" % (x["step"], k, x.get(k), y.get(k)))
                ok = False
            elif x.get(k) is not None:
                rel = abs(x[k] - y[k]) / max(abs(x[k]), 1e-300)
                worst = max(worst, rel)
                if not rel <= tol:
                    print("step %d: %s %.9g vs %.9g (%.2e)" % (x["step"], k, x[k], y[k], rel))
                    ok = False
        for k in keys:
            if k == "layer_kept" and kept_close(x.get(k), y.get(k)):
                continue
            if x.get(k) != y.get(k):
                print("step %d: %s %s vs %s" % (x["step"], k, x.get(k), y.get(k)))
                ok = False
    norms = [x["grad_norm"] for x in a if x.get("grad_norm") is not None]
    clipped = sum(n > clip for n in norms)
    if clipped < len(norms) or not norms:
        print("clipping acted on %d of %d steps only" % (clipped, len(norms)))
        ok = False
    print("worst relative difference %.3e (tolerance %g)" % (worst, tol))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
