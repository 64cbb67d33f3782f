#!/usr/bin/env python3
"""Derives each reference job's bands (validation/curves/JOB/bands.json,
docs/validation-format.md "Bands") from curves of the same job written on
several layouts and BLAS kernel sets (validation/make_curves.sh writes them).

For every real-valued quantity of the curves (loss, lm_loss, aux_loss,
z_loss, grad_norm, lr, loss_scale, valid_lm_loss) the spread is the largest
|a - b| over every pair of runs and every step; the band is FACTOR times the
spread, rounded up to two significant digits; band_by_step[s] is FACTOR
times the largest spread up to step s, so that the early steps are held as
tightly as they were measured. A step with no finite value
(null) must be null in every run. For an fp32 job the loss band must not exceed
1e-5 (the layout invariance the tests claim).

usage: derive_bands.py OUTDIR RUNDIR... [--factor F] [--machine TEXT]
                       [--checked JOB=TEXT]...
Each RUNDIR holds JOB/NAME.json curves (fabula validate --write-curves).
Two runs are compared on the steps before the first one whose routing
differs (a near-tie of router logits rounded the other way makes two
trainings from there on, as fabula validate treats it); that step must come
after the first MIN_SAME_ROUTING steps.
Writes OUTDIR/JOB/bands.json; exit 1 when a job's runs disagree on routing
or an fp32 job's layouts differ by more than 1e-5.
"""
import argparse
import glob
import json
import math
import os
import sys

MIN_SAME_ROUTING = 10  # VALIDATE_MIN_SAME_ROUTING of src/validate/validate_compare.h
REALS = ("loss", "lm_loss", "aux_loss", "z_loss", "grad_norm", "lr", "loss_scale", "valid_lm_loss")


def round_up(x):
    if x == 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10 ** e) * 10 ** e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("rundirs", nargs="+")
    ap.add_argument("--factor", type=float, default=10.0)
    ap.add_argument("--machine", default="")
    ap.add_argument("--checked", action="append", default=[])
    a = ap.parse_args()
    checked = dict(c.split("=", 1) for c in a.checked)
    jobs = {}
    for d in a.rundirs:
        for f in sorted(glob.glob(os.path.join(d, "*", "*.json"))):
            if os.path.basename(f) == "bands.json":
                continue
            c = json.load(open(f))
            c["_path"] = f
            words = c["blas"].split()
            c["_kernel"] = words[-2] if len(words) > 1 else c["blas"]
            jobs.setdefault(os.path.basename(os.path.dirname(f)), []).append(c)
    ok = True
    for job, runs in sorted(jobs.items()):
        ids = {c["job"] for c in runs}
        assert len(ids) == 1, (job, ids)
        steps = min(c["steps"] for c in runs)
        # per quantity and step: the largest |a - b| over the pairs still
        # routing alike at that step
        per_step = {q: [0.0] * steps for q in REALS}
        worst = {q: (0.0, 0, "") for q in REALS}
        flips = []
        for i, x in enumerate(runs):
            for y in runs[i + 1:]:
                pair = f"{x['name']} ({x['_kernel']}) vs {y['name']} ({y['_kernel']})"
                # the steps before the first whose routing differs: after it
                # the two runs are two trainings (validate compares alike)
                n = steps
                for s in range(steps):
                    rx, ry = x["records"][s], y["records"][s]
                    if rx["dropped"] != ry["dropped"] or rx["tokens_per_expert"] != ry["tokens_per_expert"]:
                        n = s
                        flips.append((s + 1, pair))
                        break
                if n < MIN_SAME_ROUTING:
                    print(f"derive_bands: {job}: routing differs from step {n + 1}, {pair}: the first "
                          f"{MIN_SAME_ROUTING} steps must route alike", file=sys.stderr)
                    ok = False
                for s in range(n):
                    rx, ry = x["records"][s], y["records"][s]
                    for q in REALS:
                        a_, b_ = rx[q], ry[q]
                        if a_ is None and b_ is None:
                            continue
                        if a_ is None or b_ is None:
                            print(f"derive_bands: {job}: {q} is null in one run only at step {s + 1}, {pair}",
                                  file=sys.stderr)
                            ok = False
                            continue
                        d = abs(a_ - b_)
                        per_step[q][s] = max(per_step[q][s], d)
                        if d > worst[q][0]:
                            worst[q] = (d, s + 1, pair)
        prec = runs[0]["precision"]
        bands = {}
        for q in REALS:
            # the band of step s: FACTOR x the largest spread up to s, so that
            # early steps are held as tightly as they were measured
            run_max, by_step = 0.0, []
            for s in range(steps):
                run_max = max(run_max, per_step[q][s])
                by_step.append(round_up(a.factor * run_max))
            bands[q] = {"spread": worst[q][0], "band": round_up(a.factor * worst[q][0]), "worst_step": worst[q][1],
                        "worst_pair": worst[q][2], "band_by_step": by_step}
        if prec == "fp32" and worst["loss"][0] > 1e-5:
            print(f"derive_bands: {job}: the fp32 layouts' losses differ by {worst['loss'][0]:.2g}, more than 1e-5",
                  file=sys.stderr)
            ok = False
        names = ", ".join(sorted(f"{c['name']} ({c['_kernel']} kernels, {c['layout']})" for c in runs))
        flip = (f"; routing first differs at step {min(flips)[0]} ({min(flips)[1]}), the steps before it compared, "
                f"{len(flips)} of {len(runs) * (len(runs) - 1) // 2} pairs differ within the {steps} steps"
                if flips else f"; the same routing in every run over the {steps} steps")
        deriv = (f"{a.factor:g} x the largest difference between {len(runs)} runs of this job: {names}" + flip +
                 (f"; on {a.machine}" if a.machine else ""))
        out = {"format": "fabula-curve-bands", "version": 1, "job": runs[0]["job"], "derivation": deriv,
               "checked": checked.get(job, "not against an independent reference: the float64 PyTorch reference "
                                           "does not model this job (docs/validation-format.md)"),
               "quantities": bands}
        os.makedirs(os.path.join(a.outdir, job), exist_ok=True)
        with open(os.path.join(a.outdir, job, "bands.json"), "w") as fh:
            # one quantity a line, its steps' bands on it
            fh.write("{\n" + "".join(f' "{k}": {json.dumps(v)},\n' for k, v in out.items() if k != "quantities"))
            fh.write(' "quantities": {\n' + ",\n".join(f'  "{q}": {json.dumps(bands[q])}' for q in REALS) + "\n }\n}\n")
        print(f"{job}: " + ", ".join(f"{q} {bands[q]['spread']:.2g}->{bands[q]['band']:.2g}" for q in REALS))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
