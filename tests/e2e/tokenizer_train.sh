#!/bin/sh
# `fabula tokenizer train`: the same tokenizer file from 1, 2 and 4 ranks and
# from the sample split into one file per novel; the file loads, its digest
# is verified, encoding round-trips; refusals and their exit codes.
. "$FB_SRCDIR/tests/e2e/lib.sh"
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
V=1024

for np in 1 2 4; do
    run_fabula $np tokenizer train --input "$SAMPLE" --output "$SCRATCH/t$np.json" --vocab-size $V
    check "train on $np rank(s) exits 0 and writes the file" '[ $RC -eq 0 ] && [ -s "$SCRATCH/t$np.json" ]'
    [ $RC -eq 0 ] || cat "$SCRATCH/out.txt"
done
check "progress lines are printed" 'grep -q "merges (last pair seen" "$SCRATCH/out.txt"'
check "1 and 2 ranks give byte-identical files" 'cmp "$SCRATCH/t1.json" "$SCRATCH/t2.json"'
check "1 and 4 ranks give byte-identical files" 'cmp "$SCRATCH/t1.json" "$SCRATCH/t4.json"'

# One novel per file: ranks now share files (by size), not novels.
mkdir -p "$SCRATCH/split"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    printf '%s\n' "$line" >"$SCRATCH/split/novel$i.jsonl"
done <"$SAMPLE"
echo "not an input" >"$SCRATCH/split/README.txt"
for np in 1 3; do
    run_fabula $np tokenizer train --input "$SCRATCH/split" --output "$SCRATCH/d$np.json" --vocab-size $V
    check "train on a directory of $i files, $np rank(s): same file as from the one file" \
        '[ $RC -eq 0 ] && cmp "$SCRATCH/t1.json" "$SCRATCH/d$np.json"'
done

run_fabula 1 tokenizer info "$SCRATCH/t1.json"
digest=$(sed -n 's/^  "digest": "\([0-9a-f]*\)",$/\1/p' "$SCRATCH/t1.json")
check "info: kind fabula-bpe, vocab $V, the file's digest verified" \
    '[ $RC -eq 0 ] && grep -q "^kind: fabula-bpe" "$SCRATCH/out.txt" && grep -q "^vocab_size: $V\$" "$SCRATCH/out.txt" && [ -n "$digest" ] && grep -q "^digest: $digest\$" "$SCRATCH/out.txt"'
check "info: <|chapter_sep|> comes after the merges (id $((V - 10)))" \
    'grep -q "^  $((V - 10)) <|chapter_sep|>\$" "$SCRATCH/out.txt"'

run_fabula 1 tokenizer encode --tokenizer "$SCRATCH/t1.json" --input "$SAMPLE" --output "$SCRATCH/ids.bin" --verify
check "encode with the trained tokenizer round-trips every novel" \
    '[ $RC -eq 0 ] && grep -q "verify: 4 of 4 novels round-trip exactly" "$SCRATCH/out.txt"'

cp "$SCRATCH/t1.json" "$SCRATCH/before.json"
run_fabula 1 tokenizer train --input "$SAMPLE" --output "$SCRATCH/t1.json" --vocab-size 512
check "existing output without --force: exit 2 naming it, file untouched" \
    '[ $RC -eq 2 ] && grep -q "t1.json exists" "$SCRATCH/out.txt" && cmp "$SCRATCH/t1.json" "$SCRATCH/before.json"'
run_fabula 2 tokenizer train --input "$SAMPLE" --output "$SCRATCH/t1.json" --vocab-size 512 --force
check "existing output with --force: replaced" \
    '[ $RC -eq 0 ] && ! cmp -s "$SCRATCH/t1.json" "$SCRATCH/before.json"'
check "no temporary file is left behind" '[ -z "$(ls "$SCRATCH" | grep "\.tmp\.")" ]'

mkdir -p "$SCRATCH/empty"
run_fabula 2 tokenizer train --input "$SCRATCH/empty" --output "$SCRATCH/e.json"
check "empty input directory: exit 3 naming it, no output" \
    '[ $RC -eq 3 ] && grep -q "empty holds no input file" "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/e.json" ]'
# Every rank finds the directory empty: rank 0 alone reports it and all
# ranks leave MPI cleanly. With MPI_Abort the launcher could end the job
# before the message was forwarded, so look for it more than once.
for try in 1 2 3; do
    run_fabula 2 tokenizer train --input "$SCRATCH/empty" --output "$SCRATCH/e.json"
    check "empty input directory, 2 ranks, try $try: exit 3, the message exactly once, no MPI abort" \
        '[ $RC -eq 3 ] && [ "$(grep -c "empty holds no input file" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q "Abort(" "$SCRATCH/out.txt"'
done
run_fabula 2 tokenizer train --input "$SAMPLE" --output "$SCRATCH/before.json"
check "existing output, 2 ranks: exit 2, the message exactly once, no MPI abort" \
    '[ $RC -eq 2 ] && [ "$(grep -c "before.json exists" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q "Abort(" "$SCRATCH/out.txt"'
run_fabula 2 tokenizer train --input "$SAMPLE" --output "$SCRATCH/e.json" --vocab-size 100
check "bad option value, 2 ranks: exit 2, the message exactly once" \
    '[ $RC -eq 2 ] && [ "$(grep -c -- "--vocab-size expects" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q "Abort(" "$SCRATCH/out.txt"'
run_fabula 2 tokenizer train --input "$SCRATCH/nope.jsonl" --output "$SCRATCH/e.json"
check "missing input, 2 ranks: exit 4, the message exactly once, no MPI abort" \
    '[ $RC -eq 4 ] && [ "$(grep -c "nope.jsonl" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q "Abort(" "$SCRATCH/out.txt"'
run_fabula 1 tokenizer train --input "$SCRATCH/nope.jsonl" --output "$SCRATCH/e.json"
check "missing input: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "nope.jsonl" "$SCRATCH/out.txt"'
run_fabula 1 tokenizer train --input "$SAMPLE" --output "$SCRATCH/e.json" --vocab-size 100
check "vocab size below 269: exit 2" '[ $RC -eq 2 ] && grep -q -- "--vocab-size" "$SCRATCH/out.txt"'
run_fabula 1 tokenizer train --output "$SCRATCH/e.json"
check "no --input: exit 2 with usage" '[ $RC -eq 2 ] && grep -q "usage" "$SCRATCH/out.txt"'

# Damage one merge: the digest no longer matches.
sed '0,/^    \[\([0-9]*\), \([0-9]*\)\],$/s//    [\2, \1],/' "$SCRATCH/before.json" >"$SCRATCH/bad.json"
run_fabula 1 tokenizer info "$SCRATCH/bad.json"
check "edited tokenizer file: exit 3, digest mismatch naming the file" \
    '! cmp -s "$SCRATCH/bad.json" "$SCRATCH/before.json" && [ $RC -eq 3 ] && grep -q "bad.json: digest mismatch" "$SCRATCH/out.txt"'
finish
