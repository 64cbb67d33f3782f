#!/bin/sh
# `fabula prep` throughput on 1 and 2 ranks, and the HDF5 write bandwidth
# against a plain sequential write of the same number of bytes, side by side,
# in one run on one machine.
#
#   bench/prep.sh [CORPUS]      (default ../shared/corpus/novels.jsonl)
#
# For each tokenizer (bytes; and an 8192-token BPE trained first with
# `fabula tokenizer train`, when that works) and each rank count, prep runs
# REPS times (default 3) and the fastest run is kept. Reported: input MB/s
# and tokens/s of read+tokenize+window (the slowest rank), the wall time of
# the whole command, and the write phase (create, collective writes, close,
# fsync, rename, check) in MB/s of the file; next to it, `dd` writing the
# same number of bytes to the same directory with conv=fsync.
#
# Run from the repository top. Builds nothing: FABULA names the binary
# (default ./fabula), MPIEXEC the launcher (default mpiexec.mpich), OUT a
# scratch directory on the file system to measure (default ./bench-prep.d;
# removed at the end).
set -eu

CORPUS=${1:-../shared/corpus/novels.jsonl}
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
OUT=${OUT:-./bench-prep.d}
REPS=${REPS:-3}

[ -r "$CORPUS" ] || { echo "bench/prep.sh: cannot read $CORPUS" >&2; exit 2; }
[ -x "$FABULA" ] || { echo "bench/prep.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

now() { date +%s.%N; }
field() { sed -n "s/.*$1.*/\\1/p" "$OUT/log.txt" | head -n 1; }

in_bytes=$(wc -c <"$CORPUS")
echo "fabula prep benchmark: $CORPUS ($(awk -v b="$in_bytes" 'BEGIN{printf "%.2f", b/1e6}') MB), $(nproc) cores, $(uname -n)"
echo "fabula: $("$FABULA" --version | head -n 1); launcher: $MPIEXEC; best of $REPS runs"
echo

TOKENIZERS=bytes
if "$MPIEXEC" -n 2 "$FABULA" tokenizer train --vocab-size 8192 --input "$CORPUS" --output "$OUT/bpe8k.tok" \
    >"$OUT/log.txt" 2>&1; then
    TOKENIZERS="bytes $OUT/bpe8k.tok"
else
    echo "(no BPE: fabula tokenizer train failed; see below)"
    tail -n 3 "$OUT/log.txt"
fi

printf '%-10s %5s | %8s %10s %12s | %9s %8s %10s | %10s %10s\n' tokenizer ranks "wall s" "input MB/s" "M tokens/s" \
    "file MB" "write s" "write MB/s" "dd s" "dd MB/s"
for tok in $TOKENIZERS; do
    name=$tok
    [ "$tok" = bytes ] || name=bpe-8192
    for np in 1 2; do
        best=""
        r=0
        while [ $r -lt "$REPS" ]; do
            r=$((r + 1))
            t0=$(now)
            "$MPIEXEC" -n $np "$FABULA" prep -q --force --tokenizer "$tok" -o "$OUT/corpus.h5" "$CORPUS" >"$OUT/log.txt" 2>&1
            t1=$(now)
            wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}')
            if [ -z "$best" ] || awk -v w="$wall" -v b="$best" 'BEGIN{exit !(w < b)}'; then
                best=$wall
                cp "$OUT/log.txt" "$OUT/best.txt"
            fi
        done
        cp "$OUT/best.txt" "$OUT/log.txt"
        read_s=$(field 'read+tokenize \([0-9.]*\) s')
        write_s=$(field 'write \([0-9.]*\) s (')
        file_mb=$(field '-> .* (\([0-9.]*\) MB)')
        mtps=$(sed -n 's/.*MB\/s, \([0-9.]*\) M tokens\/s.*/\1/p' "$OUT/log.txt" | head -n 1)
        # The same bytes, written sequentially and fsynced, where prep wrote.
        file_bytes=$(awk -v m="$file_mb" 'BEGIN{printf "%d", m * 1e6}')
        dd if=/dev/zero of="$OUT/dd.bin" bs=4M count="$file_bytes" iflag=count_bytes conv=fsync 2>"$OUT/dd.txt"
        dd_s=$(sed -n 's/.* copied, \([0-9.e-]*\) s,.*/\1/p' "$OUT/dd.txt")
        rm -f "$OUT/dd.bin"
        printf '%-10s %5d | %8.2f %10.1f %12.2f | %9.1f %8.3f %10.1f | %10.3f %10.1f\n' "$name" $np "$best" \
            "$(awk -v b="$in_bytes" -v s="$read_s" 'BEGIN{print b / 1e6 / s}')" "$mtps" "$file_mb" "$write_s" \
            "$(awk -v m="$file_mb" -v s="$write_s" 'BEGIN{print m / s}')" "$dd_s" \
            "$(awk -v m="$file_mb" -v s="$dd_s" 'BEGIN{print m / s}')"
    done
done
echo
echo "input MB/s and tokens/s: read + parse + tokenize + window + segment tags, slowest rank;"
echo "write: HDF5 file creation to verified rename (collective MPI-IO writes, fsync); dd: conv=fsync."
