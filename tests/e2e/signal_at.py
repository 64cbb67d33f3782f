#!/usr/bin/env python3
"""Runs a launcher command and signals the fabula ranks it starts at a chosen
moment, for tests/e2e/preempt_signals.sh.

usage: signal_at.py --binary FABULA --ranks N --signal SIG
                    [--after SECONDS [--after-file PATH] | --while-open SUBSTRING]
                    [--launcher-too] [--again SECONDS] [--timeout S] -- CMD...

A rank is a process whose argv[0] is FABULA among CMD's descendants. Each rank is signalled on its
own clock: SECONDS after the moment its handler for SIG is in place (the
signal's bit in /proc/PID/status SigCgt: the dynamic loader is done and the
process can act on it; before that the signal has the action the launcher
left it), or, with --after-file, SECONDS after PATH exists and is not
empty (RUN_DIR/jobs.jsonl: the run is about to train its first step), or
as soon as one of its open files' paths contains SUBSTRING
(--while-open: during the read of a checkpoint, say). --launcher-too also
signals CMD's own process (mpiexec) at the same moment, as a terminal's
Ctrl-C reaches its whole foreground process group; --again repeats the
signal to the ranks only SECONDS later (a second SIGINT to MPICH's mpiexec
is its own "Ctrl-C again": it aborts the job at once).

Prints one line per rank (when it appeared, when it caught SIG, when it was
signalled, and whether its file was open then), then "exit N" with CMD's
status (128 + signal when a signal ended it) and exits 0; exits 2 when the
ranks did not all show up or the moment never came before CMD ended.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def status_bits(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1], 16)
    except OSError:
        return None
    return 0


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the fields after the command name, which may hold blanks
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descends_from(pid, root):
    for _ in range(16):
        if pid == root:
            return True
        if pid <= 1:
            return False
        pid = parent_of(pid)
    return False


def ranks_of(binary, root):
    """The processes running `binary` that CMD started (its descendants):
    other tests may run fabula beside this one."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if argv0 == binary and descends_from(int(pid), root):
            found.append(int(pid))
    return found


def has_open(pid, needle):
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if needle in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--signal", required=True)
    ap.add_argument("--after", type=float)
    ap.add_argument("--after-file")
    ap.add_argument("--while-open")
    ap.add_argument("--launcher-too", action="store_true")
    ap.add_argument("--again", type=float)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    sig = getattr(signal, "SIG" + a.signal)
    bit = 1 << (sig - 1)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd)
    ranks = {}  # pid -> {"seen", "caught", "sent", "open"}
    sent_all = None
    file_seen = None
    again_done = a.again is None
    ok = True
    while p.poll() is None and time.monotonic() - t0 < a.timeout:
        now = time.monotonic()
        if len(ranks) < a.ranks:
            for pid in ranks_of(a.binary, p.pid):
                ranks.setdefault(pid, {"seen": now, "caught": None, "sent": None, "open": None})
        if a.after_file and file_seen is None and os.path.exists(a.after_file) and os.path.getsize(a.after_file) > 0:
            file_seen = now
        for pid, r in ranks.items():
            if r["caught"] is None and (status_bits(pid, "SigCgt") or 0) & bit:
                r["caught"] = now
            if r["sent"] is not None:
                continue
            if a.while_open is not None:
                due = has_open(pid, a.while_open)
            elif a.after_file:
                due = file_seen is not None and now - file_seen >= a.after
            else:
                due = r["caught"] is not None and now - r["caught"] >= a.after
            if due:
                r["open"] = has_open(pid, a.while_open) if a.while_open else None
                try:
                    os.kill(pid, sig)
                    r["sent"] = time.monotonic()
                except ProcessLookupError:
                    pass
        if len(ranks) == a.ranks and all(r["sent"] is not None for r in ranks.values()) and sent_all is None:
            sent_all = time.monotonic()
            if a.launcher_too:
                os.kill(p.pid, sig)
        if sent_all is not None and not again_done and time.monotonic() - sent_all >= a.again:
            for pid in ranks:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            again_done = True
            print(f"signal_at: SIG{a.signal} again {a.again} s later", flush=True)
        time.sleep(0.001)
    if p.poll() is None:
        p.kill()
        ok = False
    rc = p.wait()
    rc = 128 - rc if rc < 0 else rc
    for pid, r in sorted(ranks.items()):
        fmt = lambda t: "never" if t is None else f"{t - t0:.3f} s"
        opened = "" if r["open"] is None else f", {a.while_open} open: {'yes' if r['open'] else 'no'}"
        print(f"signal_at: rank pid {pid}: appeared {fmt(r['seen'])}, caught SIG{a.signal} {fmt(r['caught'])}, "
              f"signalled {fmt(r['sent'])}{opened}", flush=True)
    if len(ranks) < a.ranks or any(r["sent"] is None for r in ranks.values()) or not again_done:
        ok = False
    print(f"exit {rc}", flush=True)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
