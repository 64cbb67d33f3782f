#!/bin/sh
# Start-up cost of the CUDA backend on the CPU path: `fabula --help` and a
# 1-step CPU training run, wall time and peak RSS, for a default build
# (configure found CUDA and NCCL; the backend is a dlopen'ed module) against
# a build configured --without-cuda, side by side.
#
#   bench/startup.sh DEFAULT_BUILD CPU_BUILD [RUNS]
#
# Run from the repository top (the default config's paths are relative to
# it). Builds nothing: each BUILD is a build directory with its `fabula`.
# RUNS (default 20) runs of each, interleaved so that load from other jobs
# falls on both alike; the median wall time and the median peak RSS are
# printed. Peak RSS is the largest of the waited-for processes
# (getrusage(RUSAGE_CHILDREN)), one fresh measuring process per run. The
# training run is one rank without mpiexec (MPICH's singleton init), so the
# launcher's own memory is not counted. See bench/README.md.
set -eu

usage() { echo "usage: bench/startup.sh DEFAULT_BUILD CPU_BUILD [RUNS]"; }
[ $# -ge 2 ] && [ $# -le 3 ] || { usage >&2; exit 2; }
A=$1 B=$2 RUNS=${3:-20}
for d in "$A" "$B"; do
    [ -x "$d/fabula" ] || { echo "bench/startup.sh: no $d/fabula" >&2; exit 2; }
done
case $RUNS in '' | *[!0-9]*) echo "bench/startup.sh: RUNS must be a number" >&2; exit 2 ;; esac
PY=${PYTHON:-/usr/bin/python3}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# One run: prints "wall_seconds max_rss_kib" for the command.
measure() {
    "$PY" -c '
import os, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.perf_counter() - t0
if rc != 0:
    sys.exit("exit %d: %s" % (rc, " ".join(sys.argv[1:])))
print("%.4f %d" % (wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
' "$@"
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for what in help train; do
    : >"$SCRATCH/A.$what"; : >"$SCRATCH/B.$what"
    i=0
    while [ $i -lt "$RUNS" ]; do
        for side in A B; do
            eval dir=\$$side
            if [ $what = help ]; then
                measure "$dir/fabula" --help >>"$SCRATCH/$side.$what"
            else
                measure "$dir/fabula" train --steps 1 --run-dir "$SCRATCH/run" --set run.resume=none \
                    --set run.backend=cpu >>"$SCRATCH/$side.$what"
            fi
        done
        i=$((i + 1))
    done
done

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $RUNS runs each, medians"
printf '%-22s %14s %14s %14s %14s %8s %8s\n' "" "default ms" "no-CUDA ms" "default MiB" "no-CUDA MiB" "time" "RSS"
for what in help train; do
    ta=$(cut -d' ' -f1 "$SCRATCH/A.$what" | median); tb=$(cut -d' ' -f1 "$SCRATCH/B.$what" | median)
    ra=$(cut -d' ' -f2 "$SCRATCH/A.$what" | median); rb=$(cut -d' ' -f2 "$SCRATCH/B.$what" | median)
    label="fabula --help"; [ $what = train ] && label="1-step CPU train"
    awk -v l="$label" -v ta="$ta" -v tb="$tb" -v ra="$ra" -v rb="$rb" 'BEGIN {
        printf "%-22s %14.1f %14.1f %14.1f %14.1f %+7.0f%% %+7.0f%%\n", l, ta * 1000, tb * 1000, ra / 1024, rb / 1024,
            (ta / tb - 1) * 100, (ra / rb - 1) * 100 }'
done
