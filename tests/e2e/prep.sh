#!/bin/sh
# fabula prep on the bundled corpus: 1, 2 and 4 ranks (oversubscribed) give
# the same datasets and attributes, byte for byte; the same novels as
# separate files of a directory give the same samples; the validation split
# holds out whole novels; a <|chapter_sep|> stands at every chapter heading
# (count checked against an independent Python count); the statistics are
# printed; a BPE tokenizer's corpus is rank-count invariant too and is
# refused for another tokenizer.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TOOL="$FB_BUILDDIR/tests/e2e/corpus_tool"
IN="$FB_SRCDIR/inputs/sample.jsonl"
PY=${PYTHON:-python3}

for np in 1 2 4; do
    run_fabula $np prep --valid-fraction 0.25 --seed 11 --max-seq-len 512 --overlap 64 -o "$SCRATCH/c$np.h5" "$IN"
    [ $np -eq 1 ] && cat "$SCRATCH/out.txt"
    check "prep on $np rank(s) exits 0" '[ $RC -eq 0 ]'
    "$TOOL" digest "$SCRATCH/c$np.h5" >"$SCRATCH/d$np.txt" 2>&1
    cp "$SCRATCH/out.txt" "$SCRATCH/out$np.txt"
done
for ds in /tokens /samples/offset /samples/genre /samples/segment /samples/split /samples/novel \
          /novels/title /novels/genre /novels/split /files/path; do
    check "dataset $ds written" "grep -q '^dataset $ds ' '$SCRATCH/d1.txt'"
done
check "2 ranks: every dataset and attribute identical to 1 rank" 'cmp -s "$SCRATCH/d1.txt" "$SCRATCH/d2.txt"'
check "4 ranks: every dataset and attribute identical to 1 rank" 'cmp -s "$SCRATCH/d1.txt" "$SCRATCH/d4.txt"'
for word in "genre" "split" "segment" "sample length" "chapter separators" "skipped:" "time:"; do
    check "summary shows '$word'" "grep -q '$word' '$SCRATCH/out1.txt'"
done

# Whole novels held out: the novels of the two splits do not meet.
"$MPIEXEC" -n 1 "$TOOL" novels "$SCRATCH/c1.h5" 0 >"$SCRATCH/train_novels.txt" 2>&1
"$MPIEXEC" -n 1 "$TOOL" novels "$SCRATCH/c1.h5" 1 >"$SCRATCH/valid_novels.txt" 2>&1
echo "train novels: $(tr '\n' ' ' <"$SCRATCH/train_novels.txt"); valid novels: $(tr '\n' ' ' <"$SCRATCH/valid_novels.txt")"
check "validation split is not empty" '[ -s "$SCRATCH/valid_novels.txt" ]'
check "no novel in both splits" \
    '[ -z "$(sort "$SCRATCH/train_novels.txt" "$SCRATCH/valid_novels.txt" | uniq -d)" ]'
check "every novel in one split" \
    '[ "$(cat "$SCRATCH/train_novels.txt" "$SCRATCH/valid_novels.txt" | wc -l)" -eq 4 ]'

# The same novels as four files of a directory (one a .json document): the
# samples do not change.
mkdir -p "$SCRATCH/dir"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    if [ $i -eq 2 ]; then
        printf '%s\n' "$line" >"$SCRATCH/dir/n$i.json"
    else
        printf '%s\n' "$line" >"$SCRATCH/dir/n$i.jsonl"
    fi
done <"$IN"
run_fabula 3 prep --valid-fraction 0.25 --seed 11 --max-seq-len 512 --overlap 64 -o "$SCRATCH/dir.h5" "$SCRATCH/dir"
check "directory of 4 files on 3 ranks exits 0" '[ $RC -eq 0 ]'
"$TOOL" digest "$SCRATCH/dir.h5" >"$SCRATCH/ddir.txt" 2>&1
for ds in /tokens /samples/offset /samples/genre /samples/segment /samples/split /samples/novel; do
    check "directory input: $ds as from the single file" \
        "[ \"\$(grep '^dataset $ds ' '$SCRATCH/ddir.txt')\" = \"\$(grep '^dataset $ds ' '$SCRATCH/d1.txt')\" ]"
done

# Chapter separators: with --overlap 0 every content token is in exactly
# one sample, so /tokens holds one separator per heading.
run_fabula 2 prep --overlap 0 --min-seq-len 0 --max-seq-len 300 -o "$SCRATCH/ov0.h5" "$IN"
check "prep --overlap 0 exits 0" '[ $RC -eq 0 ]'
seps=$("$TOOL" count "$SCRATCH/ov0.h5" 259)
if $PY -c 'import json, re' 2>/dev/null; then
    heads=$($PY "$FB_SRCDIR/tests/e2e/chapter_count.py" "$IN" | awk '{s += $1} END {print s}')
    echo "chapter separators in /tokens: $seps; headings counted by chapter_count.py: $heads"
    check "one <|chapter_sep|> per chapter heading" '[ -n "$heads" ] && [ "$heads" -gt 0 ] && [ "$seps" = "$heads" ]'
else
    echo "skip: no python3 for the independent heading count"
fi
check "summary reports the separators" "grep -q \"chapter separators $seps;\" '$SCRATCH/out.txt'"

# A BPE tokenizer: rank-count invariant as well, and refused by the bytes one.
run_fabula 1 tokenizer train --vocab-size 600 --input "$IN" --output "$SCRATCH/bpe.tok"
if [ $RC -eq 0 ]; then
    run_fabula 1 prep --tokenizer "$SCRATCH/bpe.tok" --valid-fraction 0.25 -o "$SCRATCH/b1.h5" "$IN"
    check "BPE prep on 1 rank exits 0" '[ $RC -eq 0 ]'
    run_fabula 2 prep --tokenizer "$SCRATCH/bpe.tok" --valid-fraction 0.25 -o "$SCRATCH/b2.h5" "$IN"
    check "BPE prep on 2 ranks exits 0" '[ $RC -eq 0 ]'
    "$TOOL" digest "$SCRATCH/b1.h5" >"$SCRATCH/db1.txt" 2>&1
    "$TOOL" digest "$SCRATCH/b2.h5" >"$SCRATCH/db2.txt" 2>&1
    check "BPE: 2 ranks identical to 1 rank" 'cmp -s "$SCRATCH/db1.txt" "$SCRATCH/db2.txt"'
    "$MPIEXEC" -n 1 "$TOOL" check "$SCRATCH/b1.h5" "$SCRATCH/bpe.tok" >"$SCRATCH/chk.txt" 2>&1
    rc=$?
    check "BPE corpus accepted with its tokenizer" '[ $rc -eq 0 ]'
    "$MPIEXEC" -n 1 "$TOOL" check "$SCRATCH/b1.h5" bytes >"$SCRATCH/chk.txt" 2>&1
    rc=$?
    cat "$SCRATCH/chk.txt"
    check "BPE corpus refused with the bytes tokenizer (exit 3, names both)" \
        '[ $rc -eq 3 ] && grep -q "made with another tokenizer" "$SCRATCH/chk.txt"'
else
    echo "skip: fabula tokenizer train failed"; cat "$SCRATCH/out.txt"
fi
finish
