#!/bin/sh
# A damaged checkpoint is always "report it, use the previous one": for a
# few hundred seeded byte flips in the superblock, in object headers, B-tree
# and heap blocks, and where the tensors' link names are stored, `fabula
# ckpt verify` exits 0 or 3 (never a crash, never 4, never a hang) with no
# HDF5 error stack; and for a sample of them a 1-rank resume either falls
# back to the previous checkpoint with the "damaged" warning (and no HDF5
# error stack) or, when the flipped file still verifies, loads it. Then
# the hostile files below (a FIFO, sizes the file does not back).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

CASES=${FB_FUZZ_CASES:-300}
SEED=${FB_FUZZ_SEED:-20261201}
RESUME_EVERY=35   # every 35th case also resumes: 8, of each kind of flip


ctrain 1 orig --steps 4 --set checkpoint.save_interval=2
check "original run: checkpoints at 2 and 4" '[ $RC -eq 0 ] && [ "$(clatest orig)" = 4 ] && [ -f "$(ck orig 2)" ]'
[ $RC -eq 0 ] || finish
GOOD=$(ck orig 4)
SIZE=$(wc -c <"$GOOD")

# Where to flip: the first KiB (superblock, root group), 64 bytes from each
# metadata block signature (object headers, B-tree nodes, fractal heaps),
# and 48 bytes from each stored tensor name.
LC_ALL=C grep -boa -E 'OHDR|OCHK|BTHD|BTIN|BTLF|FRHP|FHDB|FHIB|TREE|HEAP|SNOD' "$GOOD" | cut -d: -f1 >"$SCRATCH/hdr.txt"
LC_ALL=C grep -boa 'model\.[a-z_.0-9]*weight' "$GOOD" | cut -d: -f1 >"$SCRATCH/names.txt"
check "the file has metadata blocks and stored link names to flip" \
    '[ -s "$SCRATCH/hdr.txt" ] && [ "$(wc -l <"$SCRATCH/names.txt")" -ge 22 ]'

# one line per case: offset and a non-zero xor mask, from a seeded LCG
awk -v n="$CASES" -v seed="$SEED" -v size="$SIZE" -v hf="$SCRATCH/hdr.txt" -v nf="$SCRATCH/names.txt" '
    function rnd(m) { seed = (seed * 1103515245 + 12345) % 2147483648; return int(seed / 65536) % m }
    BEGIN {
        while ((getline x <hf) > 0) h[nh++] = x
        while ((getline x <nf) > 0) s[ns++] = x
        for (i = 0; i < n; i++) {
            r = i % 3
            if (r == 0) off = rnd(1024)
            else if (r == 1) off = h[rnd(nh)] + rnd(64)
            else off = s[rnd(ns)] + rnd(48)
            if (off >= size) off = size - 1
            print off, 1 + rnd(255)
        }
    }' >"$SCRATCH/cases.txt"

F="$SCRATCH/f.h5"
bad_verify=0; hangs=0; stacks=0; damaged=0; resumes=0; bad_resume=0; i=0
while read -r off mask; do
    i=$((i + 1))
    cp "$GOOD" "$F"
    old=$(od -An -tu1 -j "$off" -N1 "$F" | tr -d ' ')
    printf "$(printf '\\%03o' $((old ^ mask)))" | dd of="$F" bs=1 seek="$off" count=1 conv=notrunc 2>/dev/null
    OMP_NUM_THREADS=1 timeout 20 "$FABULA" ckpt verify -q "$F" >"$SCRATCH/v.txt" 2>&1
    rc=$?
    case $rc in
    0) ;;
    3) damaged=$((damaged + 1)) ;;
    124) hangs=$((hangs + 1)); echo "case $i (offset $off xor $mask): verify hangs" ;;
    *) bad_verify=$((bad_verify + 1)); echo "case $i (offset $off xor $mask): verify exit $rc"
       tail -n 3 "$SCRATCH/v.txt" | sed 's/^/  | /'
       cp "$F" "$SCRATCH/bad-$i.h5" ;;
    esac
    if grep -q 'HDF5-DIAG' "$SCRATCH/v.txt"; then
        stacks=$((stacks + 1)); echo "case $i (offset $off xor $mask): verify prints an HDF5 error stack"
    fi
    if [ $((i % RESUME_EVERY)) -eq 0 ]; then
        resumes=$((resumes + 1))
        d=resume$i
        rm -rf "$SCRATCH/$d"
        cp -r "$SCRATCH/orig" "$SCRATCH/$d"
        rm -f "$SCRATCH/$d/metrics.jsonl"
        cp "$F" "$(ck $d 4)"
        ctrain 1 $d --steps 4 --set checkpoint.save_interval=2 </dev/null
        if [ $rc -ne 0 ]; then
            ok='[ $RC -eq 0 ] && grep -q "step-00000004.h5 is damaged (.*trying the previous checkpoint" "$SCRATCH/$d.out" &&
                grep -q "resumed from .*step-00000002.h5 at step 2" "$SCRATCH/$d.out"'
        else
            ok='[ $RC -eq 0 ] && grep -q "resumed from .*step-00000004.h5 at step 4" "$SCRATCH/$d.out"'
        fi
        if ! eval "$ok" || grep -q 'HDF5-DIAG' "$SCRATCH/$d.out"; then
            bad_resume=$((bad_resume + 1))
            echo "case $i (offset $off xor $mask, verify exit $rc): resume exit $RC"
            grep -v '^ \|^[{}]' "$SCRATCH/$d.out" | tail -n 4 | sed 's/^/  | /'
        else
            rm -rf "$SCRATCH/$d"
        fi
    fi
done <"$SCRATCH/cases.txt"
echo "$i cases: $damaged verified as damaged, $((i - damaged - bad_verify - hangs)) still ok; $resumes resumes"

check "ckpt verify exits 0 or 3 on every flipped file ($bad_verify did not)" '[ $bad_verify -eq 0 ]'
check "ckpt verify never hangs ($hangs did)" '[ $hangs -eq 0 ]'
check "ckpt verify never prints an HDF5 error stack ($stacks did)" '[ $stacks -eq 0 ]'
check "some flips are caught as damaged" '[ $damaged -gt 0 ]'
check "each sampled resume falls back to step 2 or loads a file that verifies ($bad_resume did not)" \
    '[ $resumes -gt 0 ] && [ $bad_resume -eq 0 ]'

# Hostile files (docs/checkpoint.md, "Hostile files"), each within 20 s and
# 2 GiB: a FIFO in a checkpoint's place blocked every reader in H5Fopen; a
# config attribute saying vocab_size 10^8 made eval and generate
# --checkpoint allocate gigabytes (exit 1 under the bound) before reading a
# tensor; a tensor whose extent of 10^12 the file does not store kept
# verify reading fill values for hours, and one of [10^8, 64] blew export.
. "$FB_SRCDIR/tests/e2e/fuzz_lib.sh"
fifo_in "$SCRATCH/fifo.h5"
for cmd in "ckpt verify -q" "ckpt info" "eval --tokens 1,2 --logits-out x.npy --checkpoint" \
           "generate --prompt ab --max-new-tokens 2 --checkpoint" "export --output ex -q --checkpoint"; do
    refused "a FIFO as the checkpoint: $cmd" 3 "fifo.h5: not a regular file (a FIFO)" "$FABULA" $cmd fifo.h5
done
d=fifo_resume
rm -rf "$SCRATCH/$d"
cp -r "$SCRATCH/orig" "$SCRATCH/$d"
rm -f "$SCRATCH/$d/metrics.jsonl"
fifo_in "$(ck $d 4)"
# bounded, one process: a run blocked in open() takes the launcher's
# SIGTERM as a preemption request and stays blocked
FUZZ_DIR=$FB_SRCDIR bounded "$FABULA" train --run-dir "$SCRATCH/$d" $CKPT_ARGS --steps 4 --set checkpoint.save_interval=2
check "a FIFO as the latest checkpoint: the resume falls back to step 2, saying why (exit $RC)" \
    '[ $RC -eq 0 ] && grep -q "step-00000004.h5.*not a regular file (a FIFO)" "$SCRATCH/run.out" &&
     grep -q "resumed from .*step-00000002.h5 at step 2" "$SCRATCH/run.out"'
"$CKPT_TOOL" get-str "$GOOD" config >"$SCRATCH/config.json"
cp "$GOOD" "$SCRATCH/vocab.h5"
"$CKPT_TOOL" set-str "$SCRATCH/vocab.h5" config \
    "$(sed 's/"vocab_size": [0-9]*/"vocab_size": 100000000/' "$SCRATCH/config.json")" || fail "ckpt_tool set-str"
refused "config vocab_size 10^8: eval --checkpoint" 3 "its config's model [100000000, 64]" \
    "$FABULA" eval --checkpoint vocab.h5 --tokens 1,2 --logits-out x.npy
refused "the same: generate --checkpoint" 3 "its config's model [100000000, 64]" \
    "$FABULA" generate --checkpoint vocab.h5 --prompt ab --max-new-tokens 2
cp "$GOOD" "$SCRATCH/ext.h5"
"$CKPT_TOOL" extent "$SCRATCH/ext.h5" /params/model.norm.weight 1000000000000 || fail "ckpt_tool extent"
bounded "$FABULA" ckpt verify -q ext.h5
check "a tensor extent of 10^12 the file does not store: verify says damaged (exit $RC)" \
    '[ $RC -eq 3 ] && grep -q "DAMAGED /params/model.norm.weight: cannot be read" "$SCRATCH/run.out"'
cp "$SCRATCH/vocab.h5" "$SCRATCH/ext2.h5"
for t in model.embed_tokens.weight lm_head.weight; do
    "$CKPT_TOOL" extent "$SCRATCH/ext2.h5" /params/$t 100000000 64 || fail "ckpt_tool extent"
done
refused "embedding and head of [10^8, 64] the file does not store: export" 3 \
    "tensor lm_head.weight has no valid shape" "$FABULA" export --checkpoint ext2.h5 --output ex2 -q --force \
    --allow-dropless-inference
finish
