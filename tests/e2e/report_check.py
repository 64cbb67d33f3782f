#!/usr/bin/env python3
"""Independent reference for `fabula report`: recomputes from metrics.jsonl
and config.json (docs/run-dir.md, docs/monitoring.md) what the report
prints, and compares.

  report_check.py scaling TABLE RUN_DIR...   the --scaling table (stdout)
  report_check.py summary SUMMARY.md RUN_DIR  the summary of `fabula report RUN_DIR`
  report_check.py html REPORT.html RUN_DIR    the page: XML, charts with data, notes for what is missing
  report_check.py compare COMPARE.md RUN_DIR...  the table of --compare
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
            tot += s["step_time"] + t.get("checkpoint", 0)
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


PHASES = ["data", "forward", "backward", "comm_wait", "optimizer", "checkpoint", "imbalance"]
VERDICTS = ["compute", "communication", "imbalance", "input", "memory", "io"]


def measured_sum(steps, path):
    """sum of a field and of step_time over the measured lines that have it"""
    n, tot, st = 0, 0.0, 0.0
    for s in measured(steps):
        v = get(s, path)
        if v is None or "step_time" not in s:
            continue
        tot += v
        st += s["step_time"] + (s.get("time") or {}).get("checkpoint", 0)
        n += 1
    return n, tot, st


def tokens_per_s(steps):
    m = measured(steps)
    tok = sec = 0.0
    for s in m:
        tok += s["tokens"]
        sec += s["step_time"]
    return tok / sec, len(m)


def summary_items(run):
    cfg, steps = load(run)
    last = steps[-1]
    out = [("run directory", run), ("steps", "%d records, steps %d to %d" % (len(steps), steps[0]["step"], last["step"]))]
    out.append(("ranks", str(world(cfg, steps))))
    out.append(("tokens", "%.0f" % sum(float(s["tokens"]) for s in steps)))
    out.append(("elapsed (s)", "%.1f" % last["elapsed"]))
    out.append(("final loss", "%.4f (lm %.4f) at step %d" % (last["loss"], last["lm_loss"], last["step"])))
    best = min(steps, key=lambda s: s["loss"])  # the first of equal minima, as fabula's strict <
    out.append(("lowest loss", "%.4f at step %d" % (best["loss"], best["step"])))
    ev = [s for s in steps if "valid_lm_loss" in s]
    if ev:
        e = ev[-1]
        out.append(("validation lm loss", "%.4f (ppl %.2f) at step %d" % (e["valid_lm_loss"], e.get("valid_ppl", math.exp(e["valid_lm_loss"])), e["step"])))
        for g, v in e.get("valid_genre_lm_loss", {}).items():
            out.append(("validation lm loss, " + g, "%.4f" % v))
    tps, n = tokens_per_s(steps)
    out.append(("tokens/s", "%.1f (mean over %d steps; the first step of each process left out)" % (tps, n)))
    n, tot, _ = measured_sum(steps, "mfu")
    if n:
        out.append(("MFU", "%.2f%% (mean over %d steps)" % (100 * tot / n, n)))
    n, tot, _ = measured_sum(steps, "model_flops_per_s")
    if n:
        out.append(("model FLOP/s", "%.4g" % (tot / n)))
    parts = []
    for p in PHASES:
        n, tot, st = measured_sum(steps, "time." + p)
        if n and st > 0:
            parts.append("%s %.1f%%" % (p, 100 * tot / st))
    if parts:
        out.append(("time split", ", ".join(parts)))
    mem = [v for v in (get(s, "ranks.rss_max_bytes") for s in steps) if v is not None] or \
        [v for v in (get(s, "rss_bytes") for s in steps) if v is not None]
    if mem:
        out.append(("memory (MiB, largest rank)", "%.1f" % (max(mem) / 1048576.0)))
    verd = [(s["step"], s["bottleneck"]["verdict"]) for s in steps if isinstance(s.get("bottleneck"), dict) and "verdict" in s["bottleneck"]]
    if verd:
        counts = ", ".join("%s %d" % (v, sum(1 for _, x in verd if x == v)) for v in VERDICTS if any(x == v for _, x in verd))
        out.append(("bottleneck", "%s at step %d (of %d verdicts: %s)" % (verd[-1][1], verd[-1][0], len(verd), counts)))
    ck = os.path.join(run, "checkpoints")
    names = sorted(f for f in os.listdir(ck) if f.startswith("step-") and (f.endswith(".h5") or f.endswith(".damaged"))) if os.path.isdir(ck) else []
    if names:
        latest = open(os.path.join(ck, "latest")).read().strip() if os.path.exists(os.path.join(ck, "latest")) else "-"
        out.append(("checkpoints", "%d in %s, latest %s" % (len(names), ck, latest)))
    else:
        out.append(("checkpoints", "none in " + ck))
    return out


def md_rows(path, ncols):
    rows = []
    for l in open(path):
        if l.startswith("|") and not l.startswith("|---"):
            c = [x.strip() for x in l.strip().strip("|").split("|")]
            rows.append(c)
    return rows[1:]


SVG = "{http://www.w3.org/2000/svg}"


def check_html(page, run):
    import xml.etree.ElementTree as E
    text = open(page, encoding="utf-8").read()
    root = E.fromstring(text)  # well-formed XML (XHTML)
    try:
        import html5lib  # optional: the HTML5 parser browsers use
        html5lib.HTMLParser(strict=True).parse(text)
        print("  html5lib: parses strictly")
    except ImportError:
        print("  html5lib not installed: XML parse only")
    bad = []
    if "<script" in text or "src=" in text or "href=\"http" in text:
        bad.append("a script or an external resource")
    titles = []
    for svg in root.iter(SVG + "svg"):
        t = svg.find(SVG + "text").text
        data = [e for e in svg.iter() if e.get("class") == "data"]
        ok = [e for e in data if (e.tag == SVG + "path" and e.get("d", "").startswith("M"))
              or e.tag in (SVG + "rect", SVG + "circle")]
        if not ok:
            bad.append("chart '%s' has no data" % t)
        titles.append(t)
    notes = " ".join("".join(p.itertext()) for p in root.iter("{http://www.w3.org/1999/xhtml}p") if p.get("class") == "note")
    _, steps = load(run)
    has = lambda f: any(get(s, f) is not None or f in s for s in steps)
    expect = [("loss", "Training loss"), ("valid_lm_loss", "Validation LM loss (held-out novels)"),
              ("valid_genre_lm_loss", "Validation LM loss per genre"), ("lr", "Learning rate"),
              ("tokens_per_s", "Tokens per second"), ("mfu", "Model FLOPs utilisation"),
              ("time", "Time split per step (rank 0)"), ("ranks", "Step time across ranks (gather steps)")]
    for field, title in expect:
        if has(field) and title not in titles:
            bad.append("no chart '%s' though metrics have %s" % (title, field))
        if not has(field) and title in titles:
            bad.append("chart '%s' without %s" % (title, field))
        if not has(field) and '"%s"' % field not in notes:
            bad.append("no note on the missing %s" % field)
    if has("expert_tokens"):
        L = len(next(s["expert_tokens"] for s in steps if "expert_tokens" in s))
        for l in range(L):
            for t in ("MoE layer %d: share of tokens per expert over steps" % l,
                      "MoE layer %d: share of each genre's choices per expert" % l):
                if t not in titles:
                    bad.append("no chart '%s'" % t)
    verdicts = [s for s in steps if "bottleneck" in s]
    rows = [tr for tr in root.iter("{http://www.w3.org/1999/xhtml}table") if tr.get("class") == "verdicts"]
    if verdicts and (not rows or len(list(rows[0])) - 1 != min(len(verdicts), 60)):
        bad.append("the verdict table does not have one row per verdict")
    if not verdicts and '"bottleneck"' not in notes:
        bad.append("no note on the missing bottleneck")
    ck = [t for t in root.iter("{http://www.w3.org/1999/xhtml}table") if t.get("class") == "checkpoints"]
    ckdir = os.path.join(run, "checkpoints")
    n = len([f for f in os.listdir(ckdir) if f.endswith(".h5")]) if os.path.isdir(ckdir) else 0
    if n and (not ck or len(list(ck[0])) - 1 != n):
        bad.append("the checkpoint table does not list the %d checkpoints" % n)
    if "config.json" not in text or "train_micro_batch_size_per_gpu" not in text:
        bad.append("no config")
    for b in bad:
        print("  BAD: " + b)
    print("  %d charts: %s" % (len(titles), "; ".join(titles)))
    return 1 if bad else 0


def compare_rows(runs):
    out = []
    for run in runs:
        cfg, steps = load(run)
        w = world(cfg, steps)
        ev = [s["valid_lm_loss"] for s in steps if "valid_lm_loss" in s]
        tps, n = tokens_per_s(steps)
        nm, tot, _ = measured_sum(steps, "mfu")
        out.append([run, str(w), "%d" % steps[-1]["step"], "%.4f" % steps[-1]["loss"],
                    "%.4f" % min(ev) if ev else "-", "%.1f" % tps, "%.1f" % (tps / w),
                    "%.2f" % (100 * tot / nm) if nm else "-"])
    return out


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
    if mode == "summary":
        got = [tuple(r) for r in md_rows(sys.argv[2], 2)]
        want = summary_items(sys.argv[3])
        for a, b in zip(got, want):
            print("  %s | %s%s" % (a[0], a[1], "" if a == b else "   EXPECTED %s | %s" % b))
        return 0 if got == want else 1
    if mode == "html":
        return check_html(sys.argv[2], sys.argv[3])
    if mode == "compare":
        got = md_rows(sys.argv[2], 8)
        want = compare_rows(sys.argv[3:])
        if got != want:
            print("table:    %r\nexpected: %r" % (got, want))
            return 1
        return 0
    sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    sys.exit(main())
