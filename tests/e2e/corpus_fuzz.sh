#!/bin/sh
# Hostile corpus files (docs/corpus-format.md, "Hostile files"): one step of
# `fabula train` on seeded byte flips of a corpus made here by `fabula prep`
# (in the superblock, the object headers, B-tree and heap blocks) exits 0,
# 2 or 3 (never 1, 4, a signal or a hang) within 20 s and 2 GiB. And the
# cases that used to hang, blow that bound or pass: a FIFO or a directory
# as the corpus, a FIFO as prep's .json input (blocked; as .jsonl, and
# /dev/zero, taken for empty files), per-sample datasets and /tokens whose
# extents of 10^8 the file does not store (2.3 GB allocated), sizes past 32
# bits in the root attributes, samples longer than max_seq_len.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/fuzz_lib.sh"
SEED=${FB_FUZZ_SEED:-3803}
N=${FB_FUZZ_CASES:-100}
S=$SCRATCH
TOOL="${FB_BUILDDIR:-.}/tests/e2e/corpus_tool"
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
run_fabula 1 prep -q --tokenizer bytes --max-seq-len 64 --overlap 8 --min-seq-len 16 --output "$S/c.h5" "$SAMPLE"
[ $RC -eq 0 ] || { tail -n 5 "$S/out.txt"; exit 99; }
# train_on FILE: one step of a tiny model on corpus FILE (in $SCRATCH)
train_on() {
    echo "$FABULA train --steps 1 --run-dir run --set data.corpus=$1 --set data.tokenizer=bytes
        --set model.hidden_size=16 --set model.intermediate_size=32 --set model.num_hidden_layers=1
        --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.num_local_experts=0
        --set data.seq_len=64 --set train_batch_size=2 --set train_micro_batch_size_per_gpu=1
        --set checkpoint.save_interval=-1 --set run.resume=none"
}
bounded $(train_on c.h5)
check "the corpus trains (exit $RC)" '[ $RC -eq 0 ]'

fifo_in "$S/fifo.h5"
refused "a FIFO as the corpus" 3 "fifo.h5: not a regular file (a FIFO)" $(train_on fifo.h5)
mkdir -p "$S/dir.h5"
refused "a directory as the corpus" 3 "dir.h5: not a regular file (a directory)" $(train_on dir.h5)
for f in fifo.json fifo.jsonl; do
    fifo_in "$S/$f"
    refused "a FIFO as prep's input $f" 3 "$f: not a regular file (a FIFO)" \
        "$FABULA" prep -q --tokenizer bytes --output "$S/p.h5" $f
done
refused "/dev/zero as prep's input" 3 "/dev/zero: not a regular file (a character device)" \
    "$FABULA" prep -q --tokenizer bytes --output "$S/p.h5" /dev/zero

# extents the file does not store: the sample count and /tokens agree,
# so only the stored bytes tell
cp "$S/c.h5" "$S/ext.h5"
"$TOOL" extent "$S/ext.h5" /samples/offset 100000001 && for d in genre segment split novel; do
    "$TOOL" extent "$S/ext.h5" /samples/$d 100000000; done && "$TOOL" extent "$S/ext.h5" /tokens 100000000 ||
    fail "corpus_tool extent"
refused "10^8 samples that the file does not store" 3 \
    "dataset /samples/offset declares 100000001 elements of 8 bytes but the file stores 0 bytes" $(train_on ext.h5)
for a in vocab_size max_seq_len; do
    cp "$S/c.h5" "$S/attr.h5"
    "$TOOL" set-int "$S/attr.h5" $a 1099511627776 || fail "corpus_tool set-int"
    refused "$a 2^40" 3 "corpus attribute \"$a\" is 1099511627776" $(train_on attr.h5)
done
cp "$S/c.h5" "$S/attr.h5"
"$TOOL" set-int "$S/attr.h5" max_seq_len 32 || fail "corpus_tool set-int"
refused "samples longer than max_seq_len" 3 "more than the corpus's max_seq_len = 32" $(train_on attr.h5)

# seeded flips: the first KiB (superblock, root group), 64 bytes from each
# metadata block signature
SIZE=$(wc -c <"$S/c.h5")
LC_ALL=C grep -boa -E 'OHDR|OCHK|BTHD|BTIN|BTLF|FRHP|FHDB|FHIB|TREE|HEAP|SNOD|FSHD|FSSE' "$S/c.h5" | cut -d: -f1 \
    >"$S/hdr.txt"
check "the corpus has metadata blocks to flip" '[ "$(wc -l <"$S/hdr.txt")" -ge 5 ]'
i=0
while [ $i -lt "$N" ]; do
    i=$((i + 1))
    if [ $((i % 2)) -eq 0 ]; then
        off=0; len=1024
    else
        off=$(sed -n "$((1 + (SEED + i) % $(wc -l <"$S/hdr.txt")))p" "$S/hdr.txt"); len=64
    fi
    "$FUZZ_TOOL" bytes $((SEED + i)) "$S/c.h5" "$S/m.h5" "$off" "$len"
    fuzz_case "flip seed $((SEED + i)) in [$off, +$len) of $SIZE" "$S/m.h5" $(train_on m.h5)
done
fuzz_summary "hostile corpus files"
finish
