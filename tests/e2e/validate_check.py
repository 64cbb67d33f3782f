#!/usr/bin/env python3
"""Independent recomputation of a `fabula validate` report (validate.json)
from the curves themselves: for each job and curve, which rule applies
(bit-exact when world size and BLAS line match the run's), where the routing
first differs, and for every quantity the largest difference, its worst step
and the verdict under the job's per-step bands (docs/validation-format.md
"The rule"). Used by tests/e2e/validate.sh.

usage: validate_check.py REPORT.json RUN_CURVES_DIR REF_CURVES_DIR
RUN_CURVES_DIR holds the run's own records (--write-curves), REF_CURVES_DIR
the curves it was compared with and their bands.json. Exit 0 when every
figure of the report is the recomputed one.
"""
import glob
import json
import math
import os
import sys

REALS = ("loss", "lm_loss", "aux_loss", "z_loss", "grad_norm", "lr", "loss_scale", "valid_lm_loss")
MIN_SAME_ROUTING = 10


def main():
    rep = json.load(open(sys.argv[1]))
    run_dir, ref_dir = sys.argv[2], sys.argv[3]
    errors = 0

    def expect(cond, what):
        nonlocal errors
        if not cond:
            print("validate_check: " + what)
            errors += 1

    for job in rep["jobs"]:
        name, steps = job["name"], job["steps"]
        run = json.load(open(glob.glob(os.path.join(run_dir, name, "*.json"))[0]))
        bands = json.load(open(os.path.join(ref_dir, name, "bands.json")))["quantities"]
        job_pass = True
        for cj in job["curves"]:
            ref = json.load(open(os.path.join(ref_dir, name, cj["curve"] + ".json")))
            exact = ref["world_size"] == run["world_size"] and ref["blas"] == run["blas"]
            expect(cj["rule"].startswith("same backend") == exact, f"{name} {cj['curve']}: rule {cj['rule']}")
            flip = 0
            if not exact:
                for s in range(steps):
                    a, b = run["records"][s], ref["records"][s]
                    if a["dropped"] != b["dropped"] or a["tokens_per_expert"] != b["tokens_per_expert"]:
                        flip = s + 1
                        break
            expect(cj["routing_differs_from_step"] == flip, f"{name} {cj['curve']}: routing flip "
                   f"{cj['routing_differs_from_step']} vs {flip}")
            n = flip - 1 if flip else steps
            expect(cj["steps_compared"] == n, f"{name} {cj['curve']}: steps compared")
            curve_pass = True
            for q in REALS:
                got = cj["quantities"][q]
                worst, worst_ratio, ok = 0.0, -1.0, True
                for s in range(n):
                    a, b = run["records"][s][q], ref["records"][s][q]
                    if a is None and b is None:
                        continue
                    d = math.inf if (a is None or b is None) else abs(a - b)
                    band = 0.0 if exact else bands[q]["band_by_step"][s]
                    ratio = d if exact else (0.0 if d == 0 else (d / band if band > 0 else math.inf))
                    if ratio > worst_ratio and d > 0:
                        worst_ratio, worst = ratio, d
                    ok &= d == 0 if exact else d <= band
                md = got["max_diff"] if got["max_diff"] is not None else math.inf
                expect(abs(md - worst) <= 1e-12 * max(1.0, worst) or md == worst,
                       f"{name} {cj['curve']} {q}: max_diff {got['max_diff']} vs {worst}")
                expect((got["verdict"] == "PASS") == ok, f"{name} {cj['curve']} {q}: verdict {got['verdict']}")
                curve_pass &= ok
            for k in ("dropped", "tokens_per_expert"):
                first = 0
                for s in range(steps):
                    if run["records"][s][k] != ref["records"][s][k]:
                        first = s + 1
                        break
                got = cj["quantities"][k]
                expect(got["worst_step"] == first, f"{name} {cj['curve']} {k}: first difference {got['worst_step']} "
                       f"vs {first}")
                ok = first == 0 or (not exact and flip > MIN_SAME_ROUTING)
                expect((got["verdict"] == "PASS") == ok, f"{name} {cj['curve']} {k}: verdict")
                curve_pass &= ok
            expect((cj["verdict"] == "PASS") == curve_pass, f"{name} {cj['curve']}: verdict")
            job_pass &= curve_pass
        expect((job["verdict"] == "PASS") == job_pass, f"{name}: verdict")
    print(f"validate_check: {len(rep['jobs'])} jobs, {errors} disagreement(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
