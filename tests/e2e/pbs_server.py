"""An emulated PBS Pro server for one machine, enough to run fabula's pbs/
scripts in the tests (Debian ships no PBS server).

usage: pbs_server.py --spool DIR [-N NAME] [-l select=...] [-v VAR=VAL,...]
                      [-r y|n] [-o PATH] SCRIPT

It reads the script's #PBS directives (up to the first line that is neither
blank nor a comment; the command line wins, as with qsub): -N, -l select=
N:ncpus=C:mpiprocs=M[:ngpus=G][+...], -l walltime (shown by qstat, not enforced), -r, -j,
-o, -v. Then it runs the script as PBS Pro would on this host: bash in
PBS_O_WORKDIR's parent environment plus the -v variables, PBS_JOBID
(SEQ.emulated), PBS_JOBNAME, PBS_O_WORKDIR (the directory the emulator runs
in), PBS_NODEFILE (this host's name once per MPI process of each chunk),
PBS_ENVIRONMENT=PBS_BATCH, PBS_QUEUE, NCPUS (the first chunk's ncpus),
OMP_NUM_THREADS (ncpus, as PBS Pro sets it), PBS_NP (total MPI processes,
as Torque sets it), TMPDIR, with DIR/bin first on PATH. DIR/bin holds
stand-ins that record requests instead of talking to a server:
  qrerun JOBID     asks for a rerun; refused (exit 1) when the job is not
                   rerunnable (-r n), or always when PBS_EMU_QRERUN=refuse
                   (a site where qrerun needs operator rights)
  qsub [opts] SCRIPT  queues a new job (the same options as above), prints its id
  qstat -f JOBID   prints Job_Name, run_count, Resource_List.walltime (when
                   -l walltime was given) and resources_used.walltime (the
                   time since the run started)
  qsig -s SIG JOBID  sends SIG to the job script's shell (DIR/JOBID.pid holds
                   the pid)
  qdel JOBID       as a MoM does: SIGTERM to every process of the job's
                   session (the script runs in a session of its own: the
                   shell, mpiexec, its proxies and the ranks), SIGKILL to
                   those left PBS_EMU_KILL_DELAY seconds later (default 10)
After a run ends the emulator reruns the job if it asked to be rerun, then
runs the jobs submitted meanwhile, at most 10 runs in all. Output (stdout and
stderr together) is appended to -o PATH or NAME.oSEQ in PBS_O_WORKDIR (a
real server overwrites it at each run). Every run is one line of
DIR/jobs.log: "JOBID NAME RUN_COUNT EXIT_STATUS". The emulator's own status
is the exit status of the last run."""
import json
import os
import shlex
import socket
import subprocess
import sys
import time

MAX_RUNS = 10

FAKES = {
    "qrerun": """#!/bin/sh
id=$1
if [ "${PBS_EMU_QRERUN:-}" = refuse ]; then echo "qrerun: Unauthorized Request  $id" >&2; exit 1; fi
if [ "$(cat "$PBS_EMU_SPOOL/$id.rerunnable" 2>/dev/null)" != y ]; then
    echo "qrerun: Request invalid for state of job $id (not rerunnable)" >&2; exit 1
fi
echo "$id" >>"$PBS_EMU_SPOOL/reruns"
""",
    "qsub": """#!/bin/sh
exec "$PBS_EMU_PYTHON" "$PBS_EMU_SELF" --spool "$PBS_EMU_SPOOL" --submit-only "$@"
""",
    "qstat": """#!/bin/sh
[ "$1" = -f ] && shift
id=$1
[ -f "$PBS_EMU_SPOOL/$id.json" ] || { echo "qstat: Unknown Job Id $id" >&2; exit 1; }
echo "Job Id: $id"
echo "    Job_Name = $(cat "$PBS_EMU_SPOOL/$id.name")"
echo "    run_count = $(cat "$PBS_EMU_SPOOL/$id.run_count")"
[ -s "$PBS_EMU_SPOOL/$id.walltime" ] && echo "    Resource_List.walltime = $(cat "$PBS_EMU_SPOOL/$id.walltime")"
if [ -s "$PBS_EMU_SPOOL/$id.start" ]; then
    e=$(( $(date +%s) - $(cat "$PBS_EMU_SPOOL/$id.start") ))
    printf '    resources_used.walltime = %02d:%02d:%02d\\n' $((e / 3600)) $((e / 60 % 60)) $((e % 60))
fi
""",
    "qsig": """#!/bin/sh
sig=TERM
[ "$1" = -s ] && { sig=$2; shift 2; }
kill -s "$sig" "$(cat "$PBS_EMU_SPOOL/$1.pid")"
""",
    "qdel": """#!/bin/sh
sid=$(cat "$PBS_EMU_SPOOL/$1.pid")
procs() { ps -e -o pid=,sid= | awk -v s="$sid" '$2 == s { print $1 }'; }
kill -s TERM $(procs) 2>/dev/null
( sleep "${PBS_EMU_KILL_DELAY:-10}"; kill -s KILL $(procs) 2>/dev/null ) >/dev/null 2>&1 &
""",
}


def parse_args(argv, job):
    """qsub options into job (a dict); returns the rest (the script)."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-N", "-l", "-v", "-r", "-o", "-j", "-q", "-W", "-e") and i + 1 < len(argv):
            val = argv[i + 1]
            i += 2
            if a == "-N":
                job["name"] = val
            elif a == "-r":
                job["rerunnable"] = val
            elif a == "-o":
                job["output"] = val
            elif a == "-v":
                for kv in val.split(","):
                    k, _, v = kv.partition("=")
                    job["vars"][k] = v
            elif a == "-l":
                for res in val.split(","):
                    k, _, v = res.partition("=")
                    if k == "select":
                        job["select"] = parse_select(v)
                    else:
                        job["resources"][k] = v
            elif a == "-W" and val != "block=true":
                sys.exit(f"pbs_server: -W {val} is not emulated")
        elif a == "--":
            sys.exit("pbs_server: qsub -- EXECUTABLE is not emulated")
        elif a.startswith("-"):
            sys.exit(f"pbs_server: qsub option {a} is not emulated")
        else:
            return argv[i:]
    return []


def parse_select(spec):
    chunks = []
    for part in spec.split("+"):
        fields = part.split(":")
        n = int(fields[0]) if fields[0].isdigit() else 1
        res = {"ncpus": 1, "mpiprocs": 1}
        for f in fields[1 if fields[0].isdigit() else 0:]:
            k, _, v = f.partition("=")
            res[k] = int(v) if v.isdigit() else v
        for _ in range(n):
            chunks.append(res)
    return chunks


def directives(script):
    args = []
    with open(script) as f:
        for line in f:
            s = line.strip()
            if s.startswith("#PBS"):
                args += shlex.split(s[4:])
            elif s and not s.startswith("#"):
                break
    return args


def new_job(spool, argv, workdir):
    job = {"name": None, "rerunnable": "y", "output": None, "vars": {}, "select": [{"ncpus": 1, "mpiprocs": 1}],
           "resources": {}, "workdir": workdir}
    rest = parse_args(argv, dict(job, vars={}, resources={}))  # find the script first
    if len(rest) != 1:
        sys.exit("pbs_server: expected one job script after the options")
    script = os.path.abspath(rest[0])
    parse_args(directives(script), job)
    parse_args(argv, job)
    job["script"] = script
    job["name"] = job["name"] or os.path.basename(script)
    seq_path = os.path.join(spool, "seq")
    seq = int(open(seq_path).read()) + 1 if os.path.exists(seq_path) else 1
    with open(seq_path, "w") as f:
        f.write(str(seq))
    job["id"] = f"{seq}.emulated"
    job["seq"] = seq
    put(spool, job["id"] + ".json", json.dumps(job))
    put(spool, job["id"] + ".name", job["name"])
    put(spool, job["id"] + ".rerunnable", job["rerunnable"])
    if "walltime" in job["resources"]:
        put(spool, job["id"] + ".walltime", job["resources"]["walltime"])
    put(spool, job["id"] + ".run_count", "0")
    with open(os.path.join(spool, "queue"), "a") as f:
        f.write(job["id"] + "\n")
    return job


def put(spool, name, text):
    with open(os.path.join(spool, name), "w") as f:
        f.write(text + "\n")


def run_job(spool, job, run_count):
    host = socket.gethostname()
    nodefile = os.path.join(spool, job["id"] + ".nodes")
    with open(nodefile, "w") as f:
        for chunk in job["select"]:
            f.write((host + "\n") * int(chunk.get("mpiprocs", 1)))
    env = dict(os.environ)
    env.update(job["vars"])
    first = job["select"][0]
    env.update({
        "PBS_JOBID": job["id"], "PBS_JOBNAME": job["name"], "PBS_O_WORKDIR": job["workdir"],
        "PBS_NODEFILE": nodefile, "PBS_ENVIRONMENT": "PBS_BATCH", "PBS_QUEUE": "workq",
        "PBS_O_HOST": host, "NCPUS": str(first.get("ncpus", 1)),
        "OMP_NUM_THREADS": str(first.get("ompthreads", first.get("ncpus", 1))),
        "PBS_NP": str(sum(int(c.get("mpiprocs", 1)) for c in job["select"])),
        "TMPDIR": spool, "PATH": os.path.join(spool, "bin") + os.pathsep + os.environ.get("PATH", ""),
        "PBS_EMU_SPOOL": spool, "PBS_EMU_SELF": os.path.abspath(__file__), "PBS_EMU_PYTHON": sys.executable,
    })
    out = job["output"] or os.path.join(job["workdir"], f"{job['name']}.o{job['seq']}")
    put(spool, job["id"] + ".run_count", str(run_count))
    with open(out, "a") as log:
        log.write(f"=== pbs_server: job {job['id']} ({job['name']}) run {run_count}\n")
        log.flush()
        put(spool, job["id"] + ".start", str(int(time.time())))
        # a session of its own, as a MoM gives a job: qdel signals all of it
        p = subprocess.Popen(["bash", job["script"]], cwd=os.environ.get("HOME", "/"), env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        put(spool, job["id"] + ".pid", str(p.pid))
        rc = p.wait()
    rc = rc if rc >= 0 else 256 - rc  # killed by a signal: PBS reports 256 + signal
    with open(os.path.join(spool, "jobs.log"), "a") as f:
        f.write(f"{job['id']} {job['name']} {run_count} {rc}\n")
    return rc


def main():
    argv = sys.argv[1:]
    if len(argv) < 2 or argv[0] != "--spool":
        sys.exit(__doc__)
    spool = os.path.abspath(argv[1])
    argv = argv[2:]
    submit_only = argv[:1] == ["--submit-only"]
    if submit_only:
        job = new_job(spool, argv[1:], os.getcwd())
        print(job["id"])
        return 0
    os.makedirs(os.path.join(spool, "bin"), exist_ok=True)
    for name, text in FAKES.items():
        path = os.path.join(spool, "bin", name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    new_job(spool, argv, os.getcwd())
    status = None
    runs = 0
    done = 0
    while runs < MAX_RUNS:
        queue = open(os.path.join(spool, "queue")).read().split()
        if done >= len(queue):
            break
        jid = queue[done]
        done += 1
        job = json.load(open(os.path.join(spool, jid + ".json")))
        count = 0
        while runs < MAX_RUNS:
            count += 1
            runs += 1
            reruns = os.path.join(spool, "reruns")
            if os.path.exists(reruns):
                os.remove(reruns)
            rc = run_job(spool, job, count)
            print(f"pbs_server: job {jid} ({job['name']}) run {count}: exit {rc}", flush=True)
            status = rc
            if not (os.path.exists(reruns) and jid in open(reruns).read().split()):
                break
            print(f"pbs_server: job {jid} asked to be rerun", flush=True)
    return status if status is not None and status < 256 else 1


if __name__ == "__main__":
    sys.exit(main())
