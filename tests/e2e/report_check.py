#!/usr/bin/env python3
"""Independent reference for `fabula report`: recomputes from metrics.jsonl
and config.json (docs/run-dir.md, docs/monitoring.md) what the report
prints, and compares.

  report_check.py scaling TABLE RUN_DIR...   the --scaling tables (stdout): points, time over ranks,
                                              prediction or its note, oversubscription warnings
  report_check.py summary SUMMARY.md RUN_DIR  the summary of `fabula report RUN_DIR`
  report_check.py html REPORT.html RUN_DIR    the page: XML, charts with data, notes for what is missing,
                                              resume marks, histograms, the config table, collapsed verdicts
  report_check.py compare COMPARE.md RUN_DIR...  the table of --compare
"""
import json
import math
import os
import re
import statistics
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


def warm(steps, run=None):
    """each process's first record: the first line, every line not following
    its predecessor's step, every line whose "elapsed" (a process's own
    clock) is below its predecessor's, and the line after each step a job of
    jobs.jsonl started from (a job resumed from the last one's last step)"""
    starts = {j.get("step") for j in load_jobs(run) if j.get("event") == "start"} if run else set()
    return [i == 0 or steps[i]["step"] != steps[i - 1]["step"] + 1
            or steps[i].get("elapsed", 0) < steps[i - 1].get("elapsed", 0)
            or steps[i]["step"] - 1 in starts for i in range(len(steps))]


def elapsed_total(steps, run):
    """each process's last "elapsed", summed; and how many processes"""
    first = warm(steps, run)
    last = [s["elapsed"] for i, s in enumerate(steps) if (i + 1 == len(steps) or first[i + 1]) and "elapsed" in s]
    return sum(last), sum(first)


def load_jobs(run):
    """jobs.jsonl's records (docs/run-dir.md); a torn or foreign line skipped"""
    out = []
    path = os.path.join(run, "jobs.jsonl")
    if not os.path.isfile(path):
        return out
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict):
            out.append(j)
    return out


def resume_steps(run, steps):
    """where the run resumed: the step each later job of jobs.jsonl started
    from; without the file, the step before each process's first record"""
    starts = [j["step"] for j in load_jobs(run) if j.get("event") == "start"][1:]
    if load_jobs(run):
        return starts
    first = warm(steps)
    return [steps[i]["step"] - 1 for i in range(1, len(steps)) if first[i]]


def jobs_items(run):
    """the summary items from jobs.jsonl"""
    jobs = load_jobs(run)
    starts = [j for j in jobs if j.get("event") == "start"]
    if not starts:
        return []
    last_end = None
    for j in jobs:
        if j.get("event") == "start":
            last_end = None
        elif j.get("event") == "end":
            last_end = j
    first, last = starts[0], starts[-1]
    out = [("started", "%s on %s" % (first.get("time") or "?", first.get("host") or "?"))]
    if isinstance(last.get("version"), str):
        out.append(("version", "fabula " + last["version"]))
    if isinstance(last.get("command"), str):
        out.append(("command", last["command"]))
    if len(starts) > 1:
        out.append(("jobs", "%d, resumed from step %s" % (len(starts), ", ".join(str(j["step"]) for j in starts[1:]))))
    else:
        out.append(("jobs", "1"))
    if last_end is None:
        out.append(("final status", "no end line after the job started at %s: killed (SIGKILL, the time limit's hard "
                    "kill, a lost node) or still running" % (last.get("time") or "?")))
        return out
    e = last_end
    detail = " by " + e["signal"] if isinstance(e.get("signal"), str) else \
        ": " + e["message"] if isinstance(e.get("message"), str) else ""
    ck = ", checkpoint of step %d" % e["checkpoint_step"] if isinstance(e.get("checkpoint_step"), int) else ""
    out.append(("final status", "%s at step %d%s (exit %d%s) at %s" % (e.get("state") or "?", e.get("step") or 0, detail,
                                                                      e.get("exit_code") or 0, ck, e.get("time") or "?")))
    return out


def world(cfg, steps):
    for s in steps:
        w = get(s, "ranks.world")
        if w is not None and w >= 1:
            return int(w)
    return int(cfg["train_batch_size"] / (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]) + 0.5)


def measured(steps, run=None):
    w = warm(steps, run)
    keep = [i for i in range(len(steps)) if not w[i]] or list(range(len(steps)))
    return [steps[i] for i in keep]


def scaling_run(run):
    """one run directory's figures, as docs/monitoring.md "Scaling table" defines them"""
    cfg, steps = load(run)
    m = measured(steps, run)
    tok = sum(s["tokens"] for s in m)
    sec = sum(s["step_time"] for s in m)
    with_tokens = [s["tokens"] for s in steps if "tokens" in s]
    x = {"dir": run, "ranks": world(cfg, steps), "tps": tok / sec, "step_s": sec / len(m),
         "tokens_per_step": sum(with_tokens) / len(with_tokens)}
    x["split"] = [0.0, 0.0, 0.0, 0.0, 0]  # wall, compute, comm, imbalance, lines
    for s in m:
        t = s.get("time")
        if not t or "forward" not in t or "backward" not in t:
            continue
        sp = x["split"]
        sp[0] += s["step_time"] + t.get("checkpoint", 0)
        sp[1] += t["forward"] + t["backward"] + t.get("optimizer", 0)
        sp[2] += t.get("comm_wait", 0)
        sp[3] += t.get("imbalance", 0)
        sp[4] += 1
    x["rank"] = {}
    for p in PHASES:
        got = [(get(s, "ranks.time_min." + p), get(s, "ranks.time_median." + p), get(s, "ranks.time_max." + p))
               for s in m]
        x["rank"][p] = [g for g in got if None not in g]
    mem = [get(s, "ranks.rss_max_bytes") for s in steps]
    mem = [v for v in mem if v is not None] or [v for v in (get(s, "rss_bytes") for s in steps) if v is not None]
    x["mem"] = max(mem) if mem else None
    x["node"] = None
    for j in load_jobs(run):
        nr, nc, th = j.get("node_ranks"), j.get("node_cpus"), j.get("threads") or 1
        if j.get("event") != "start" or not nr or not nc:
            continue
        if x["node"] is None or nr * th / nc > x["node"][0] * x["node"][1] / x["node"][2]:
            x["node"] = (nr, th, nc)
    x["pred"] = None
    if os.path.exists(os.path.join(run, "plan_time.json")):
        with open(os.path.join(run, "plan_time.json")) as f:
            x["pred"] = json.load(f)
    return x


def scaling_points(runs):
    """the runs grouped into points (one rank count and batch), each reduced"""
    groups = []
    for x in map(scaling_run, runs):
        for g in groups:
            a, b = g[0]["tokens_per_step"], x["tokens_per_step"]
            if g[0]["ranks"] == x["ranks"] and abs(a - b) <= 0.01 * max(abs(a), abs(b)):
                g.append(x)
                break
        else:
            groups.append([x])
    points = []
    for g in groups:
        tps = [x["tps"] for x in g]
        med = statistics.median(tps)
        sp = [sum(x["split"][i] for x in g) for i in range(5)]
        rank = {}
        for p in PHASES:
            v = [t for x in g for t in x["rank"][p]]
            rank[p] = [sum(t[i] for t in v) / len(v) for i in range(3)] if v else None
        mem = [x["mem"] for x in g if x["mem"] is not None]
        nodes = [x["node"] for x in g if x["node"]]
        node = max(nodes, key=lambda n: n[0] * n[1] / n[2]) if nodes else None
        preds = [x["pred"] for x in g if x["pred"]]
        points.append({
            "ranks": g[0]["ranks"], "n": len(g), "tps": med, "min": min(tps), "max": max(tps),
            "tokens_per_step": g[0]["tokens_per_step"], "tpr": med / g[0]["ranks"],
            "split": (100 * sp[1] / sp[0], 100 * sp[2] / sp[0], 100 * sp[3] / sp[0]) if sp[4] and sp[0] > 0 else None,
            "rank": rank, "mem": max(mem) / (1024.0 * 1024.0) if mem else None, "node": node,
            "over": node is not None and (node[0] > node[2] or node[0] * node[1] > node[2]),
            "step": statistics.median([x["step_s"] for x in g]), "pred": preds[0] if preds else None,
        })
    points.sort(key=lambda p: (p["ranks"], p["tokens_per_step"]))
    return points


def scaling_tables(runs):
    """the three tables of --scaling as lists of cell lists, the prediction's
    machines, the oversubscribed points' rank counts"""
    pts = scaling_points(runs)
    base = pts[0]["tpr"]
    main, rank, pred = [], [], []
    for p in pts:
        cells = [str(p["ranks"]), str(p["n"]), "%.1f" % p["tps"], "%.1f-%.1f" % (p["min"], p["max"]),
                 "%.1f" % (100 * (p["max"] - p["min"]) / p["tps"]), "%.1f" % p["tpr"], "%.3f" % (p["tpr"] / base)]
        cells += ["%.1f" % v for v in p["split"]] if p["split"] else ["-"] * 3
        cells.append("%.1f" % p["mem"] if p["mem"] is not None else "-")
        cells.append("%d x %d / %d%s" % (p["node"] + (" oversubscribed" if p["over"] else "",))
                     if p["node"] else "-")
        main.append(cells)
        rank.append([str(p["ranks"])] + ["%.3g / %.3g / %.3g" % tuple(1e3 * v for v in p["rank"][ph])
                                         if p["rank"][ph] else "-" for ph in PHASES])
        q = p["pred"]
        pred.append([str(p["ranks"]), "%.4g" % p["step"]] +
                    (["%.4g" % q["step_s"], "%+.1f" % (100 * (q["step_s"] - p["step"]) / p["step"])]
                     if q else ["-", "-"]) +
                    ["%.1f" % p["tps"], "%.1f" % q["tokens_per_s"] if q else "-"])
    machines = {p["pred"]["machine"] for p in pts if p["pred"]}
    return main, rank, pred, machines, [p["ranks"] for p in pts if p["over"]]


SCALING_HEADS = [
    ["ranks", "runs", "tokens/s", "min-max", "spread %", "tokens/s per rank", "efficiency", "compute %", "comm %",
     "imbalance %", "memory/rank (MiB)", "node ranks x threads / CPUs"],
    ["ranks", "data", "forward", "backward", "comm_wait", "optimizer", "checkpoint", "imbalance"],
    ["ranks", "measured step (s)", "predicted step (s)", "error %", "tokens/s", "predicted tokens/s"],
]


def md_tables(path):
    """the Markdown tables of a file: [(header, rows)], tables apart by any other line"""
    tables, cur = [], None
    with open(path) as f:
        for line in f:
            if not line.startswith("|"):
                cur = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = (cells, [])
                tables.append(cur)
            elif not all(set(c) <= set("-:") for c in cells):
                cur[1].append(cells)
    return tables


def check_scaling(path, runs):
    """the --scaling output in `path` against the reference from the runs"""
    main, rank, pred, machines, over = scaling_tables(runs)
    want = [main, rank] + ([pred] if machines else [])
    got = md_tables(path)
    ok = [h for h, _ in got] == SCALING_HEADS[:len(want)] and [r for _, r in got] == want
    with open(path) as f:
        text = f.read()
    if machines:
        note = "Predicted by `fabula plan time` on machine %s" % (sorted(machines)[0] if len(machines) == 1 else "files")
    else:
        note = "No prediction: no run directory holds plan_time.json"
    ok = ok and note in text
    warned = sorted(int(w) for w in re.findall(r"^warning: the (\d+)-rank point is oversubscribed", text, re.M))
    ok = ok and warned == over
    for h, rows in zip(SCALING_HEADS, want):
        print("  " + " | ".join(h))
        for r in rows:
            print("  " + " | ".join(r))
    if not ok:
        print("got:      %r\nexpected: %r\nnote %r; warnings for %r, expected %r" % (got, want, note, warned, over))
    return 0 if ok else 1


PHASES = ["data", "forward", "backward", "comm_wait", "optimizer", "checkpoint", "imbalance"]


def measured_sum(steps, path, run):
    """sum of a field and of step_time over the measured lines that have it"""
    n, tot, st = 0, 0.0, 0.0
    for s in measured(steps, run):
        v = get(s, path)
        if v is None or "step_time" not in s:
            continue
        tot += v
        st += s["step_time"] + (s.get("time") or {}).get("checkpoint", 0)
        n += 1
    return n, tot, st


def tokens_per_s(steps, run):
    m = measured(steps, run)
    tok = sec = 0.0
    for s in m:
        tok += s["tokens"]
        sec += s["step_time"]
    return tok / sec, len(m)


def summary_items(run):
    cfg, steps = load(run)
    last = steps[-1]
    out = [("run directory", run)] + jobs_items(run)
    out.append(("steps", "%d records, steps %d to %d" % (len(steps), steps[0]["step"], last["step"])))
    out.append(("ranks", str(world(cfg, steps))))
    out.append(("tokens", "%.0f" % sum(float(s["tokens"]) for s in steps)))
    total, procs = elapsed_total(steps, run)
    if procs > 1:
        out.append(("elapsed (s)", "%.1f over %d processes (the last %.1f)" % (total, procs, last["elapsed"])))
    else:
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
    tps, n = tokens_per_s(steps, run)
    out.append(("tokens/s", "%.1f (mean over %d steps; the first step of each process left out)" % (tps, n)))
    n, tot, _ = measured_sum(steps, "mfu", run)
    if n:
        out.append(("MFU", "%.2f%% (mean over %d steps)" % (100 * tot / n, n)))
    n, tot, _ = measured_sum(steps, "model_flops_per_s", run)
    if n:
        out.append(("model FLOP/s", "%.4g" % (tot / n)))
    parts = []
    for p in PHASES:
        n, tot, st = measured_sum(steps, "time." + p, run)
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
        kinds = []  # in the order they first came, whatever their name
        for _, x in verd:
            if x not in kinds:
                kinds.append(x)
        counts = ", ".join("%s %d" % (v, sum(1 for _, x in verd if x == v)) for v in kinds)
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
    """the table's cells, a '\\|' in one read back as '|'"""
    rows = []
    for l in open(path):
        if l.startswith("|") and not l.startswith("|---"):
            cells = re.split(r"(?<!\\)\|", l.strip()[1:-1])
            rows.append([x.strip().replace("\\|", "|") for x in cells])
    return rows[1:]


SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"


def verdict_rows(verdicts):
    """consecutive verdicts equal once every number (a run of digits and
    dots holding a digit) is one placeholder: [step cell, verdict] a group"""
    mask = lambda t: re.sub(r"[0-9.]*[0-9][0-9.]*", "#", t if isinstance(t, str) else "-")
    groups = []
    for s in verdicts:
        b = s["bottleneck"]
        key = tuple(mask(b.get(k)) for k in ("verdict", "evidence", "advice"))
        if groups and groups[-1][0] == key:
            groups[-1][1].append(s)
        else:
            groups.append((key, [s]))
    out = []
    for _, g in groups:
        cell = "%d" % g[0]["step"] if len(g) == 1 else \
            "steps %d\u2013%d (%d gathers)" % (g[0]["step"], g[-1]["step"], len(g))
        out.append([cell, g[-1]["bottleneck"].get("verdict", "-")])
    return out


def svg_title(svg):
    return svg.find(SVG + "text").text


def histogram_total(svg):
    """the bars' counts, from their titles "COUNT in [LO, HI)" """
    return sum(int(t.text.split(" in ")[0]) for r in svg.iter(SVG + "rect") if r.get("class") == "data"
               for t in r.iter(SVG + "title"))


# the charts of the report's health section and what each needs
HEALTH = [("grad_norm", "Gradient norm (before clipping)"),
          ("aux_loss", "Router load-balancing loss (aux_loss, before its coefficient)"),
          ("z_loss", "Router z-loss (z_loss, before its coefficient)"),
          ("dropped", "Expert assignments dropped by capacity (all layers and ranks)"),
          ("loss_scale", "fp16 loss scale")]
# charts over every step, each of which marks every resume
STEP_CHARTS = ["Training loss", "Learning rate", "Tokens per second", "Time split per step (rank 0)"] + \
    [t for _, t in HEALTH]


def check_new_charts(root, titles, notes, run, steps):
    bad = []
    has = lambda f: any(get(s, f) is not None for s in steps)
    for field, title in HEALTH:
        if has(field) and title not in titles:
            bad.append("no chart '%s' though metrics have %s" % (title, field))
        if not has(field) and (title in titles or '"%s"' % field not in notes):
            bad.append("no note (or a chart) for the missing %s" % field)
    svgs = {svg_title(v): v for v in root.iter(SVG + "svg")}
    # the run's resumes, marked on every step chart at their step
    marks = resume_steps(run, steps)
    for title in STEP_CHARTS:
        if title in svgs:
            got = [float(l.get("data-x")) for l in svgs[title].iter(SVG + "line") if l.get("class") == "mark"]
            if got != [float(m) for m in marks]:
                bad.append("chart '%s' marks resumes at %r, not at %r" % (title, got, marks))
    if marks:
        print("  resumes marked after step %s" % ", ".join(str(m) for m in marks))
    # the step-time histogram counts each measured step once
    m = [s for s in measured(steps, run) if "step_time" in s]
    t = "Step time histogram (each process's first step left out)"
    if m and (t not in svgs or histogram_total(svgs[t]) != len(m)):
        bad.append("the step-time histogram does not count the %d measured steps" % len(m))
    n = sum(len(row) for s in steps for row in s.get("expert_tokens", []))
    t = "Tokens per expert per step (every MoE layer and expert)"
    if n and (t not in svgs or histogram_total(svgs[t]) != n):
        bad.append("the tokens-per-expert histogram does not count the %d numbers of expert_tokens" % n)
    if not n and '"expert_tokens"' not in notes:
        bad.append("no note on the missing expert_tokens")
    return bad


def config_value(cfg, path):
    for k in path.split("."):
        if not isinstance(cfg, dict) or k not in cfg:
            return None
        cfg = cfg[k]
    return cfg


def check_config_table(root, run, steps):
    """every row of the config table equals config.json (derived rows
    recomputed), and the layout, optimizer and precision rows are there"""
    cfg, _ = load(run)
    tables = [t for t in root.iter(XHTML + "table") if t.get("class") == "layout"]
    if not cfg:
        return []
    if not tables:
        return ["no config table"]
    rows = {}
    for tr in tables[0]:
        th, td = tr.find(XHTML + "th"), tr.find(XHTML + "td")
        if th is not None and td is not None:
            rows[th.text] = "".join(td.itertext())
    bad = []
    backend = config_value(cfg, "run.backend")
    fp16, bf16 = config_value(cfg, "fp16.enabled") is True, config_value(cfg, "bf16.enabled") is True
    gpu = backend in ("cuda", "cpu16")
    fixed = config_value(cfg, "fp16.loss_scale") or 0
    w = world(cfg, steps)
    tp, pp = config_value(cfg, "parallel.tensor_parallel_size"), config_value(cfg, "parallel.pipeline_parallel_size")
    derived = {
        "ranks": str(w),
        "dp": "%d" % (w // (tp * pp)),
        "precision": ("fp16, loss scale fixed at %g" % fixed if fp16 and fixed > 0 else
                      "fp16, dynamic loss scale from 2^%d" % config_value(cfg, "fp16.initial_scale_power") if fp16 else
                      "bf16" if bf16 else "bf16 (run.backend's default)" if gpu else
                      "bf16 on CUDA, fp32 on the CPU (run.backend auto)" if backend == "auto" else "fp32"),
        "compute dtype": ("fp16" if fp16 else "bf16") if gpu else
                         ("%s on CUDA, fp32 on the CPU" % ("fp16" if fp16 else "bf16")) if backend == "auto" else "fp32",
    }
    derived["compute dtype"] += "; master weights, gradients and optimizer state fp32"
    for k, v in derived.items():
        if rows.get(k) != v:
            bad.append("config row %s is %r, not %r" % (k, rows.get(k), v))
    for k, text in rows.items():
        if k in derived:
            continue
        want = config_value(cfg, k)
        try:
            got = json.loads(text)
        except ValueError:
            got = text
        if want is None or got != want:
            bad.append("config row %s is %r, config.json has %r" % (k, text, want))
    need = ["parallel.tensor_parallel_size", "parallel.pipeline_parallel_size", "parallel.sequence_parallel",
            "parallel.expert_parallel_size", "zero_optimization.stage", "optimizer.type", "optimizer.params.lr",
            "scheduler.type", "gradient_clipping", "fp16.enabled", "bf16.enabled"]
    bad += ["no config row %s" % k for k in need if k not in rows]
    print("  config table: %d rows equal config.json" % len(rows))
    return bad


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
    notes = " ".join("".join(p.itertext()) for p in root.iter(XHTML + "p") if p.get("class") == "note")
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
    verdicts = [s for s in steps if isinstance(s.get("bottleneck"), dict)]
    tables = [tr for tr in root.iter(XHTML + "table") if tr.get("class") == "verdicts"]
    if verdicts:
        want = verdict_rows(verdicts)[-60:]
        got = [["".join(td.itertext()) for td in tr][0:2] for tr in list(tables[0])[1:]] if tables else []
        if got != [w[0:2] for w in want]:
            bad.append("the verdict table's rows %r are not the %d groups of consecutive like verdicts %r"
                       % (got[:5], len(want), want[:5]))
        print("  %d verdicts in %d rows" % (len(verdicts), len(got)))
    if not verdicts and '"bottleneck"' not in notes:
        bad.append("no note on the missing bottleneck")
    bad += check_new_charts(root, titles, notes, run, steps)
    bad += check_config_table(root, run, steps)
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
        tps, n = tokens_per_s(steps, run)
        nm, tot, _ = measured_sum(steps, "mfu", run)
        out.append([run, str(w), "%d" % steps[-1]["step"], "%.4f" % steps[-1]["loss"],
                    "%.4f" % min(ev) if ev else "-", "%.1f" % tps, "%.1f" % (tps / w),
                    "%.2f" % (100 * tot / nm) if nm else "-"])
    return out


def main():
    mode = sys.argv[1]
    if mode == "scaling":
        return check_scaling(sys.argv[2], sys.argv[3:])
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
