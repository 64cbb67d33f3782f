#!/bin/sh
# Checkpoint read (resume) against dd on the same file, from the page cache
# (docs/checkpoint.md, "Performance"): one checkpoint of a ~100M-parameter
# dense model (hidden 768, 12 layers, intermediate 3072: 106 M parameters,
# a 1.27 GB file with both Adam moments) is written once; then ROUNDS rounds
# (default 7) of, for each fabula binary given: a resume of it on 1 rank,
# followed each time by `dd if=FILE of=/dev/null bs=4M` of the same file.
# By default nothing is dropped from the page cache (the machine is shared:
# both sides read cached pages, so the figures are the CPU and memory cost
# of a read, the part of a load fabula controls); the first fabula run and
# dd warm it. --cold evicts this one file's pages before every fabula run
# and every dd (`dd iflag=nocache count=0`, no root needed, nothing else
# dropped), so both read from the disk.
#
#   bench/ckpt_read.sh [--rounds N] [--work DIR] [--cold] FABULA [FABULA...]
#
# fabula's figure is its own "resumed from ... MB in S s" line: the whole
# load (open, metadata, every tensor read and checksummed, the checksums
# compared, the state restored), at fabula's thread count as in training
# (OMP_NUM_THREADS if set). dd's is its wall time (date around it: it
# includes dd's start, a millisecond). Each ratio pairs a resume with the
# dd run right after it; the table shows the medians of the ROUNDS rounds
# and their range, and the load average before and after.
set -eu
ROUNDS=7
WORK=
COLD=
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --cold) COLD=1; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: bench/ckpt_read.sh [--rounds N] [--work DIR] [--cold] FABULA [FABULA...]" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
OWN_WORK=
if [ -z "$WORK" ]; then
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fabula-ckpt-read.XXXXXX")
    OWN_WORK=1
fi
trap '[ -n "$OWN_WORK" ] && rm -rf "$WORK"' EXIT
mkdir -p "$WORK"

SETS="--set model.hidden_size=768 --set model.intermediate_size=3072 --set model.num_hidden_layers=12
 --set model.num_attention_heads=12 --set model.num_key_value_heads=4 --set model.num_local_experts=0"
ARGS="--steps 1 --run-dir $WORK/run --set data.seq_len=64 --set checkpoint.save_interval=1 --set checkpoint.keep_last=1"
ck="$WORK/run/checkpoints/step-00000001.h5"
# a WORK given again keeps its checkpoint (reruns skip the training)
[ -f "$ck" ] || (cd "$top" && "$1" train $ARGS $SETS) >"$WORK/train.log" 2>&1 || { tail -n 20 "$WORK/train.log"; exit 1; }
bytes=$(wc -c <"$ck")
evict() { [ -z "$COLD" ] || dd if="$ck" iflag=nocache count=0 2>/dev/null; }

echo "bench/ckpt_read.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $ROUNDS rounds, file $(echo "$bytes" | awk '{ printf "%.1f MB", $1 / 1e6 }'), $([ -n "$COLD" ] && echo "the file evicted from the page cache before every read" || echo "page cache kept")"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
dd if="$ck" of=/dev/null bs=4M 2>/dev/null
: >"$WORK/rounds"
for k in $(seq 1 "$ROUNDS"); do
    b=0
    for f in "$@"; do
        b=$((b + 1))
        evict
        (cd "$top" && "$f" train $ARGS $SETS) >"$WORK/load.log" 2>&1 || { tail -n 20 "$WORK/load.log"; exit 1; }
        s=$(sed -n 's/.*resumed from .* MB in \([0-9.]*\) s,.*/\1/p' "$WORK/load.log")
        [ -n "$s" ] || { echo "bench/ckpt_read.sh: no 'resumed from' line from $f" >&2; tail -n 20 "$WORK/load.log"; exit 1; }
        evict
        t0=$(date +%s.%N)
        dd if="$ck" of=/dev/null bs=4M 2>/dev/null
        t1=$(date +%s.%N)
        echo "$b $s $t0 $t1" >>"$WORK/rounds"
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| fabula | read s | read MB/s | dd s | dd MB/s | fabula / dd (range) |\n|---|---:|---:|---:|---:|---|\n'
b=0
for f in "$@"; do
    b=$((b + 1))
    awk -v b="$b" -v f="$f" -v bytes="$bytes" '
    function med(a, c,   i, j, t) {
        for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
    }
    $1 == b { c++; fs[c] = $2; ds[c] = $4 - $3; r[c] = ds[c] / $2 }
    END {
        mf = med(fs, c); md = med(ds, c); mr = med(r, c)
        printf "| %s | %.3f | %.0f | %.3f | %.0f | %.2f (%.2f-%.2f) |\n", f, mf, bytes / 1e6 / mf, md, bytes / 1e6 / md, mr, r[1], r[c]
    }' "$WORK/rounds"
done
