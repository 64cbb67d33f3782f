#!/usr/bin/env python3
"""The README's feature matrix against the program and the test suite.

Usage: feature_matrix_check.py README.md FABULA SRCDIR

Every cell of the table under "## Feature matrix" is one claim:
- "refused": `fabula train --dry-run` of the row's layout with the column's
  precision and backend exits 2 with an error naming a config key;
- anything else ("yes (...)", "not yet run on a device"): the same dry run
  is accepted (exit 0);
- each test a cell names (`name.sh`) exists under tests/, is listed in a
  tests/*/Makemodule.am TESTS line, and its text sets the row's layout key
  and the column's precision or backend (a "1 GPU" claim needs no layout).
A row or column this script does not know fails, so the table cannot grow a
claim nobody checks. Prints one line a check and exits 1 on any failure.
"""
import os
import re
import subprocess
import sys

README, FABULA, SRC = sys.argv[1:4]

# row label -> (dry-run settings of each variant, words a named test must hold: any of)
ROWS = {
    "data parallel, ZeRO 0-3": ([["zero_optimization.stage=%d" % z] for z in range(4)],
                                ["zero_optimization.stage"]),
    "ZeRO offload (optimizer, parameters)": ([["zero_optimization.stage=3",
                                               "zero_optimization.offload_optimizer.device=cpu",
                                               "zero_optimization.offload_param.device=cpu"]],
                                             ["offload"]),
    "expert parallel": ([["parallel.expert_parallel_size=2"]], ["expert_parallel_size"]),
    "tensor parallel": ([["parallel.tensor_parallel_size=2"]], ["tensor_parallel_size"]),
    "sequence parallel": ([["parallel.tensor_parallel_size=2", "parallel.sequence_parallel=true"]],
                          ["sequence_parallel"]),
    "pipeline parallel": ([["parallel.pipeline_parallel_size=2"]], ["pipeline_parallel_size"]),
}
# column header -> (settings of each variant, words a named test must hold: all of)
COLS = {
    "CPU fp32": ([["run.backend=cpu"]], []),
    "CPU bf16, fp16 (`cpu16`)": ([["run.backend=cpu16", "bf16.enabled=true"],
                                  ["run.backend=cpu16", "fp16.enabled=true"]], ["cpu16"]),
    "CUDA bf16, fp16": ([["run.backend=cuda", "bf16.enabled=true"],
                         ["run.backend=cuda", "fp16.enabled=true"]], ["cuda"]),
    "checkpoint, resume, reshard": ([["run.backend=cpu", "checkpoint.save_interval=5", "run.resume=auto"]],
                                    ["resume"]),
}
WORLD = 2


def matrix(text):
    """The header and rows of the first table after '## Feature matrix'."""
    sec = text.split("\n## Feature matrix", 1)
    if len(sec) < 2:
        sys.exit("no '## Feature matrix' section in " + README)
    lines = [l for l in sec[1].split("\n## ", 1)[0].splitlines() if l.startswith("|")]
    cells = [[c.strip() for c in l.strip().strip("|").split("|")] for l in lines]
    return cells[0], [r for r in cells[2:]]


def listed_tests():
    names = set()
    for d in ("e2e", "unit", "cuda"):
        p = os.path.join(SRC, "tests", d, "Makemodule.am")
        if not os.path.exists(p):
            continue
        text = open(p, encoding="utf-8").read().replace("\\\n", " ")
        for m in re.finditer(r"^\s*(?:TESTS|E2E_TESTS|[A-Z_]*TESTS)\s*\+?=(.*)$", text, re.M):
            names.update(os.path.basename(w) for w in m.group(1).split())
    return names


def dry_run(sets):
    cmd = [FABULA, "train", "--dry-run", "--world", str(WORLD)]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, cwd=SRC, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def main():
    header, rows = matrix(open(README, encoding="utf-8").read())
    tests = listed_tests()
    fails = checks = 0

    def check(ok, what):
        nonlocal fails, checks
        checks += 1
        print(("ok: " if ok else "FAIL: ") + what)
        fails += not ok

    check(header[0] == "layout" and len(header) > 1, "the matrix has a 'layout' column and claims")
    for h in header[1:]:
        check(h in COLS, "column '%s' is one the checker knows" % h)
    for r in rows:
        check(r[0] in ROWS, "row '%s' is one the checker knows" % r[0])
        if r[0] not in ROWS or len(r) != len(header):
            check(False, "row '%s' has %d cells for %d columns" % (r[0], len(r), len(header)))
            continue
        row_sets, row_words = ROWS[r[0]]
        for h, cell in zip(header[1:], r[1:]):
            if h not in COLS:
                continue
            col_sets, col_words = COLS[h]
            where = "%s x %s" % (r[0], h)
            refused = cell.startswith("refused")
            for rs in row_sets:
                for cs in col_sets:
                    rc, err = dry_run(rs + cs)
                    sets = " ".join(rs + cs)
                    if refused:
                        check(rc == 2 and re.search(r"error: config key '[a-z_0-9.]+'", err) is not None,
                              "%s: refused (exit %d) [%s]" % (where, rc, sets))
                    else:
                        check(rc == 0, "%s: accepted (exit %d) [%s]" % (where, rc, sets))
                        if rc != 0:
                            print("  | " + "\n  | ".join(err.strip().splitlines()[-3:]))
            for name in re.findall(r"`([A-Za-z0-9_]+\.sh)`", cell):
                path = next((os.path.join(SRC, "tests", d, name) for d in ("e2e", "cuda", "unit")
                             if os.path.exists(os.path.join(SRC, "tests", d, name))), None)
                check(path is not None, "%s: %s exists" % (where, name))
                check(name in tests, "%s: %s runs in make check" % (where, name))
                if path is None:
                    continue
                text = open(path, encoding="utf-8").read()
                words = list(col_words) + ([] if "1 GPU" in cell else [row_words])
                for w in words:
                    alts = w if isinstance(w, list) else [w]
                    check(any(a in text for a in alts), "%s: %s sets %s" % (where, name, " or ".join(alts)))
            check(refused or "yes" in cell or "not yet run on a device" in cell,
                  "%s: the cell says yes, refused or not yet run on a device" % where)
    print("%d checks, %d failed" % (checks, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
