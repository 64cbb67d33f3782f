#!/bin/sh
# A damaged checkpoint is always "report it, use the previous one": for a
# few hundred seeded byte flips in the superblock, in object headers, B-tree
# and heap blocks, and where the tensors' link names are stored, `fabula
# ckpt verify` exits 0 or 3 (never a crash, never 4, never a hang) with no
# HDF5 error stack; and for a sample of them a 1-rank resume either falls
# back to the previous checkpoint with the "damaged" warning (and no HDF5
# error stack) or, when the flipped file still verifies, loads it.
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
finish
