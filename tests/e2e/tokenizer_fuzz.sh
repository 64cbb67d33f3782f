#!/bin/sh
# Hostile tokenizer files (docs/tokenizer.md, "Hostile files"): `fabula
# tokenizer info` (and, for one case in three, `tokenizer encode` of the
# sample novels) on seeded mutations of a Hugging Face tokenizer.json
# (MiniMind's; most mutations fall before its vocab, in the added tokens,
# normalizer, pre_tokenizer and model settings) and of a fabula-bpe file
# trained here, exit 0, 2 or 3 (never 1, 4, a signal or a hang) within
# 20 s and 2 GiB. And the cases that used to hang or blow that bound: a
# FIFO or /dev/zero as the tokenizer (blocked, or read without end), a
# vocab id or an added-token id of 10^9 in a small file (tables of 10^9
# rows: 23 GB), a pre-tokenizer regex that hits PCRE2's match limit (exit 1).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/fuzz_lib.sh"
SEED=${FB_FUZZ_SEED:-3802}
N=${FB_FUZZ_CASES:-400}
S=$SCRATCH
HF="$FB_SRCDIR/tests/data/tokenizers/minimind/tokenizer.json"
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
run_fabula 1 tokenizer train --input "$SAMPLE" --output "$S/bpe.json" --vocab-size 400
[ $RC -eq 0 ] || { tail -n 5 "$S/out.txt"; exit 99; }
HOT=$(grep -bo '"vocab"' "$HF" | head -n 1 | cut -d: -f1)
check "MiniMind's tokenizer.json has its vocab after the settings (byte $HOT)" '[ "${HOT:-0}" -gt 1000 ]'

# a small Hugging Face file: two tokens, one added token, a Split regex
small() { # VOCAB_B_ID ADDED_ID REGEX
    printf '{"added_tokens": [{"id": %s, "content": "<s>", "special": true}], "normalizer": null,
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "%s"},
 "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
 "model": {"type": "BPE", "vocab": {"a": 0, "b": %s}, "merges": []}}\n' "$2" "$3" "$1"
}
small 1 2 'a+' >"$S/small.json"
bounded "$FABULA" tokenizer info small.json
check "the small file loads (exit $RC)" '[ $RC -eq 0 ]'

fifo_in "$S/fifo.json"
refused "a FIFO as the tokenizer" 3 "fifo.json: not a regular file (a FIFO)" "$FABULA" tokenizer info fifo.json
refused "/dev/zero as the tokenizer" 3 "/dev/zero: not a regular file (a character device)" \
    "$FABULA" tokenizer info /dev/zero
mkdir -p "$S/dir.json"
refused "a directory as the tokenizer" 3 "dir.json: not a regular file (a directory)" "$FABULA" tokenizer info dir.json
refused "a FIFO as prep's tokenizer" 3 "not a regular file (a FIFO)" \
    "$FABULA" prep -q --tokenizer "$S/fifo.json" --output "$S/c.h5" "$SAMPLE"
small 1000000000 2 'a+' >"$S/vocab_id.json"
refused "a vocab id of 10^9 in a 400-byte file" 3 \
    "vocab[\"b\"] has id 1000000000, not below the file's 3 entries" "$FABULA" tokenizer info vocab_id.json
refused "the same for prep" 3 "has id 1000000000" \
    "$FABULA" prep -q --tokenizer "$S/vocab_id.json" --output "$S/c.h5" "$SAMPLE"
small 1 1000000000 'a+' >"$S/added_id.json"
refused "an added-token id of 10^9" 3 \
    "added_tokens[0] \"<s>\" has id 1000000000, not below the file's 3 entries" "$FABULA" tokenizer info added_id.json
sed 's/"ĠĠ": 332/"ĠĠ": 1000000000/' "$HF" >"$S/minimind_id.json"
refused "MiniMind's with one vocab id of 10^9" 3 "has id 1000000000, not below the file's" \
    "$FABULA" tokenizer info minimind_id.json
small 1 2 '(a|a)+$' >"$S/catastrophic.json"
printf '{"content": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "genre": "other"}\n' >"$S/a.jsonl"
refused "a Split regex over PCRE2's match limit" 3 "match limit exceeded" \
    "$FABULA" tokenizer encode --tokenizer catastrophic.json --input a.jsonl --output ids.bin --force

# seeded mutations
i=0
while [ $i -lt "$N" ]; do
    i=$((i + 1))
    "$FUZZ_TOOL" json $((SEED + i)) "$HF" "$S/m.json" "$HOT"
    fuzz_case "tokenizer.json seed $((SEED + i))" "$S/m.json" "$FABULA" tokenizer info m.json
    if [ $((i % 3)) -eq 0 ] && [ $RC -eq 0 ]; then
        fuzz_case "the same, encode" "$S/m.json" "$FABULA" tokenizer encode --tokenizer m.json --input "$SAMPLE" \
            --output ids.bin --force
    fi
    "$FUZZ_TOOL" json $((SEED + i)) "$S/bpe.json" "$S/f.json"
    fuzz_case "fabula-bpe seed $((SEED + i))" "$S/f.json" "$FABULA" tokenizer info f.json
done
fuzz_summary "hostile tokenizer files"
finish
