#!/usr/bin/env python3
"""hang_watchdog_check.py RUN_DIR STEP NOT_ARRIVED WAITING ELSEWHERE

The hang watchdog's report of RUN_DIR against what the test's layout makes
of one rank that never arrives (tests/e2e/hang_watchdog.sh):
  NOT_ARRIVED  comma-separated ranks outside any collective (the suspects)
  WAITING      "RANKS:CALL:GROUP": the collective most ranks wait in
  ELSEWHERE    comma-separated "RANK:CALL:GROUP" of ranks waiting in another
               one ("" for none)
hang.json must say exactly that for STEP, with a bound no less than
monitor.hang_min_s (3 s here); hang.txt must name each rank; the job log's
last record must be the failure with exit code 76.
"""
import json
import sys

run, step = sys.argv[1], int(sys.argv[2])
outside = [int(r) for r in sys.argv[3].split(",") if r]
w_ranks, w_call, w_group = sys.argv[4].split(":")
waiting = [int(r) for r in w_ranks.split(",")]
elsewhere = {}
for item in filter(None, sys.argv[5].split(",")):
    r, call, group = item.split(":")
    elsewhere[int(r)] = (call, group)

h = json.load(open(run + "/hang.json"))
fails = []


def want(what, ok):
    if not ok:
        fails.append(what)


want(f"step {h['step']} == {step}", h["step"] == step)
want(f"bound {h['bound_s']} >= 3 and elapsed {h['elapsed_s']} past it", h["bound_s"] >= 3 and h["elapsed_s"] > h["bound_s"])
want(f"waiting {h.get('waiting')} == {w_call} on {w_group}",
     h.get("waiting") == {"group": w_group, "call": w_call, "seq": h["waiting"]["seq"]})
want(f"not arrived {[x['rank'] for x in h['not_arrived']]} == {outside}",
     sorted(x["rank"] for x in h["not_arrived"]) == outside and not any(x["waiting"] for x in h["not_arrived"]))
got_else = {x["rank"]: (x["call"], x["group"]) for x in h["waiting_elsewhere"]}
want(f"waiting elsewhere {got_else} == {elsewhere}", got_else == elsewhere)
want(f"suspect ranks {h['suspect_ranks']} == {outside}", sorted(h["suspect_ranks"]) == outside)
want(f"no heartbeat {h['no_heartbeat']} == []", h["no_heartbeat"] == [])
want("suspect hosts named", len(h["suspect_hosts"]) >= 1)
# every rank of the world is in exactly one of the lists
world = len(outside) + len(waiting) + len(elsewhere)
txt = open(run + "/hang.txt").read()
def ranges(ranks):
    """0,1,3 as hang.txt writes it: runs of consecutive ranks as a-b, "0-1,3"."""
    out, rs = [], sorted(ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


want(f"hang.txt lists the waiting ranks {w_ranks}", f"ranks {ranges(waiting)}" in txt)
for r in outside:
    want(f"hang.txt: rank {r} not arrived", f"not arrived: rank {r} " in txt)
for r, (call, group) in elsewhere.items():
    want(f"hang.txt: rank {r} waiting elsewhere", f"waiting elsewhere: rank {r} " in txt and group in txt)
end = [json.loads(l) for l in open(run + "/jobs.jsonl")][-1]
want(f"job log end record {end}", end.get("event") == "end" and end.get("state") == "failed"
     and end.get("exit_code") == 76 and "hang" in (end.get("message") or ""))
for f in fails:
    print("  FAIL:", f)
print(f"  world {world}: {len(fails)} failed")
sys.exit(1 if fails else 0)
