#!/bin/sh
# Checkpoint bandwidth (docs/checkpoint.md, "Performance"): write and read
# of one checkpoint of a ~27M-parameter MoE (a 340 MB file: parameters and
# two Adam moments in fp32) on 1, 2 and 4 ranks (ZeRO 3), each followed by
# a plain sequential write and read of the same number of bytes on the same
# disk with dd, so that each fabula/dd ratio compares measurements taken
# seconds apart.
#
#   FABULA=/path/to/build/fabula bench/ckpt.sh [OUT_DIR]
#
# Environment: MPIEXEC (default mpiexec.mpich), RANKS (default "1 2 4"),
# COLLECTIVE (checkpoint.collective values, default "shared"; "shared all"
# compares the two), REPEAT (pairs per row, default 3; the table shows
# medians, as the machine may be shared), MODEL (the --set options of the
# model; "" is the built-in default model, a 14 MB checkpoint of many small
# tensors).
#
# fabula's figures are its own "saved ... MB/s" and "resumed ... MB/s"
# lines: the whole save (create, write, checksums, close, fsync, rename,
# `latest`) and the whole load (open, read, checksums, rebuilding the
# replicated copies). fabula picks its thread count as in training (the
# node's cores shared among its ranks, unless OMP_NUM_THREADS is set); the
# checksums use those threads. dd writes with conv=fsync. Before every read
# the page cache is dropped when this user may (root:
# /proc/sys/vm/drop_caches); otherwise both sides read from the cache and
# the table says so.
set -eu
: "${FABULA:?set FABULA to the fabula binary}"
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
RANKS=${RANKS:-"1 2 4"}
COLLECTIVE=${COLLECTIVE:-shared}
REPEAT=${REPEAT:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$PWD/bench-ckpt}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

MODEL=${MODEL-"--set model.hidden_size=512 --set model.intermediate_size=2048 --set model.num_hidden_layers=2 \
 --set model.num_local_experts=4 --set model.num_experts_per_tok=2 --set model.num_attention_heads=8 \
 --set model.num_key_value_heads=4"}
RUN="--steps 1 --set train_batch_size=4 --set data.seq_len=64 --set zero_optimization.stage=3 \
 --set checkpoint.keep_last=1"

drop_caches() {
    sync
    if [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        CACHE="dropped"
    else
        CACHE="cached"
    fi
}
# MB/s figure of fabula's line matching $2 in log $1
rate() { sed -n "s/.*$2.* MB in \([0-9.]*\) s, \([0-9]*\) MB\/s.*/\2/p" "$1" | tail -n 1; }

echo "fabula checkpoint bandwidth, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "disk: $(df -h "$OUT" | awk 'NR == 2 { print $1 " (" $2 ", " $5 " used) mounted on " $6 }')"
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# dd_pair MB: one sequential write (conv=fsync) and one read of MB megabytes
# in 4 MiB blocks; sets DDW and DDR (MB/s)
dd_pair() {
    count=$(((BYTES + 4194303) / 4194304))
    mb=$(echo "$count" | awk '{ print $1 * 4194304 / 1e6 }')
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$OUT/dd.bin" bs=4M count=$count conv=fsync 2>/dev/null
    t1=$(date +%s.%N)
    drop_caches
    t2=$(date +%s.%N)
    dd if="$OUT/dd.bin" of=/dev/null bs=4M 2>/dev/null
    t3=$(date +%s.%N)
    rm -f "$OUT/dd.bin"
    DDW=$(echo "$mb $t0 $t1" | awk '{ printf "%.0f", $1 / ($3 - $2) }')
    DDR=$(echo "$mb $t2 $t3" | awk '{ printf "%.0f", $1 / ($3 - $2) }')
}

# Every fabula save/load is followed by a dd write/read of the same bytes,
# so that each ratio compares measurements taken a few seconds apart (the
# disk of a shared machine drifts); the table shows medians.
printf "%-6s %-10s %8s | %10s %10s %8s | %10s %10s %8s | %s\n" ranks collective MB "write" "dd write" ratio \
    "read" "dd read" ratio "read from"
for coll in $COLLECTIVE; do
    for np in $RANKS; do
        w="" r="" dw="" dr="" rw="" rr=""
        for k in $(seq 1 "$REPEAT"); do
            run="$OUT/run-$coll-$np"
            rm -rf "$run"
            (cd "$top" && $MPIEXEC -n "$np" "$FABULA" train --run-dir "$run" $MODEL $RUN \
                --set checkpoint.collective=$coll) >"$run.save.log" 2>&1 || { tail -n 20 "$run.save.log"; exit 1; }
            drop_caches
            (cd "$top" && $MPIEXEC -n "$np" "$FABULA" train --run-dir "$run" $MODEL $RUN \
                --set checkpoint.collective=$coll) >"$run.load.log" 2>&1 || { tail -n 20 "$run.load.log"; exit 1; }
            BYTES=$(wc -c <"$(ls "$run"/checkpoints/step-*.h5)")
            fw=$(rate "$run.save.log" "saved step")
            fr=$(rate "$run.load.log" "resumed from")
            rm -rf "$run"
            dd_pair
            w="$w $fw" r="$r $fr" dw="$dw $DDW" dr="$dr $DDR"
            rw="$rw $(echo "$fw $DDW" | awk '{ printf "%.2f", $1 / $2 }')"
            rr="$rr $(echo "$fr $DDR" | awk '{ printf "%.2f", $1 / $2 }')"
        done
        printf "%-6s %-10s %8.1f | %10s %10s %8s | %10s %10s %8s | %s\n" "$np" "$coll" \
            "$(echo "$BYTES" | awk '{ print $1 / 1e6 }')" "$(echo "$w" | median)" "$(echo "$dw" | median)" \
            "$(echo "$rw" | median)" "$(echo "$r" | median)" "$(echo "$dr" | median)" "$(echo "$rr" | median)" "$CACHE"
    done
done
echo "(MB/s; ratio: the median of fabula / dd over the $REPEAT pairs)"
