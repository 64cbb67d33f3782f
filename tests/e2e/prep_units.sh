#!/bin/sh
# `fabula prep --split windows|chapters|scenes` (docs/prep.md, "Sample
# units"): every sample length, in order, equals that of an independent
# Python reference (tests/e2e/unit_lengths.py) for each unit, on the bundled
# sample and on tests/data/novels/scenes.jsonl (scene breaks, and lines that
# only look like them), whole pieces and pieces windowed with overlap; the
# unit is recorded in the file and read back by `fabula plan sampler
# --corpus`; chapters is the default; 1 and 3 ranks write the same file;
# the plan sampler's lengths are the corpus's training samples; bad options.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TOOL="$FB_BUILDDIR/tests/e2e/corpus_tool"
PY=${PYTHON:-python3}
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"
SCENES="$FB_SRCDIR/tests/data/novels/scenes.jsonl"

# unit, then max_seq_len overlap min_seq_len: whole pieces; windows of 512
# sharing 64 with short tails dropped; small windows
for input in "$SAMPLE" "$SCENES"; do
    for unit in windows chapters scenes; do
        for opts in "65536 0 0" "512 64 64" "200 20 2"; do
            set -- $opts
            name="$(basename "$input" .jsonl) --split $unit --max-seq-len $1 --overlap $2 --min-seq-len $3"
            run_fabula 1 prep -q --split "$unit" --max-seq-len "$1" --overlap "$2" --min-seq-len "$3" \
                -o "$SCRATCH/u.h5" --force "$input"
            "$TOOL" lengths "$SCRATCH/u.h5" >"$SCRATCH/got.txt" 2>&1
            "$PY" "$FB_SRCDIR/tests/e2e/unit_lengths.py" "$unit" "$1" "$2" "$3" "$input" >"$SCRATCH/want.txt"
            check "$name: $(wc -l <"$SCRATCH/want.txt") sample lengths as the Python reference's" \
                '[ $RC -eq 0 ] && [ -s "$SCRATCH/want.txt" ] && cmp -s "$SCRATCH/got.txt" "$SCRATCH/want.txt"'
            [ $RC -eq 0 ] || tail -n 5 "$SCRATCH/out.txt"
        done
    done
done

# What the units do to scenes.jsonl, in numbers the reference gives too:
# novel 0 has 2 chapters and 4 scene breaks, novel 1 none (its near misses
# are not breaks), novel 2 2 chapters and 2 breaks that open a scene with
# text before them (a third comes right after a heading).
pieces() { "$PY" "$FB_SRCDIR/tests/e2e/unit_lengths.py" "$1" 65536 0 0 "$SCENES" | awk '{print $1}' | uniq -c | awk '{printf "%s ", $1}'; }
check "scenes.jsonl: pieces per novel 1 1 1 (windows), 2 1 2 (chapters), 6 1 4 (scenes)" \
    '[ "$(pieces windows)" = "1 1 1 " ] && [ "$(pieces chapters)" = "2 1 2 " ] && [ "$(pieces scenes)" = "6 1 4 " ]'

# The summary and the file say which unit made the samples.
run_fabula 1 prep --split scenes --max-seq-len 512 -o "$SCRATCH/s.h5" "$SCENES"
check "prep prints the unit, its pieces and how many were windowed" \
    '[ $RC -eq 0 ] && grep -q "split scenes, max_seq_len 512, overlap 32," "$SCRATCH/out.txt" &&
     grep -q "sample unit scenes: 11 scenes with text, [0-9]* of them longer than 512 tokens and cut into windows (overlap 32)" "$SCRATCH/out.txt"'
(cd "$FB_SRCDIR" && "$FABULA" plan sampler --corpus "$SCRATCH/s.h5" --simulate-ranks 2 --steps 2 --batch 2) \
    >"$SCRATCH/plan.txt" 2>&1
rc=$?
check "plan sampler --corpus reads the unit back from the file" \
    '[ $rc -eq 0 ] && grep -q "^corpus: [0-9]* samples (.*s.h5, training split, sample unit scenes)" "$SCRATCH/plan.txt"'

# chapters is the default; the datasets do not depend on the rank count
run_fabula 1 prep -q --max-seq-len 300 -o "$SCRATCH/d1.h5" "$SAMPLE" "$SCENES"
run_fabula 1 prep -q --split chapters --max-seq-len 300 -o "$SCRATCH/c1.h5" "$SAMPLE" "$SCENES"
"$TOOL" digest "$SCRATCH/d1.h5" >"$SCRATCH/dd1.txt" 2>&1
"$TOOL" digest "$SCRATCH/c1.h5" >"$SCRATCH/dc1.txt" 2>&1
check "no --split: the chapters corpus, byte for byte" \
    '[ -s "$SCRATCH/dc1.txt" ] && cmp -s "$SCRATCH/dd1.txt" "$SCRATCH/dc1.txt"'
for unit in chapters scenes; do
    run_fabula 1 prep -q --split $unit --max-seq-len 300 --valid-fraction 0.4 -o "$SCRATCH/${unit}1.h5" "$SAMPLE" "$SCENES"
    run_fabula 3 prep -q --split $unit --max-seq-len 300 --valid-fraction 0.4 -o "$SCRATCH/${unit}3.h5" "$SAMPLE" "$SCENES"
    "$TOOL" digest "$SCRATCH/${unit}1.h5" >"$SCRATCH/${unit}d1.txt" 2>&1
    "$TOOL" digest "$SCRATCH/${unit}3.h5" >"$SCRATCH/${unit}d3.txt" 2>&1
    check "--split $unit: 3 ranks write every dataset and attribute as 1 rank does" \
        '[ $RC -eq 0 ] && grep -q "sample_unit" "$SCRATCH/${unit}d1.txt" && cmp -s "$SCRATCH/${unit}d1.txt" "$SCRATCH/${unit}d3.txt"'
done

# plan sampler --corpus: the training split's lengths, cut at --max-seq-len
(cd "$FB_SRCDIR" && "$FABULA" plan sampler --corpus "$SCRATCH/chapters1.h5" --simulate-ranks 2 --steps 2 --batch 2) \
    >"$SCRATCH/plan.txt" 2>&1
rc=$?
ntrain=$("$MPIEXEC" -n 1 "$TOOL" open "$SCRATCH/chapters1.h5" 0 | sed -n 's/^samples \([0-9]*\) .*/\1/p')
check "plan sampler --corpus: the $ntrain training samples at the corpus's max_seq_len 300" \
    '[ $rc -eq 0 ] && grep -q "^corpus: $ntrain samples (.*chapters1.h5, training split, sample unit chapters), lengths [0-9]*..300, .* 0 cut to max_seq_len 300" "$SCRATCH/plan.txt"'
(cd "$FB_SRCDIR" && "$FABULA" plan sampler --corpus "$SCRATCH/chapters1.h5" --max-seq-len 200 --simulate-ranks 2 \
    --steps 2 --batch 2) >"$SCRATCH/plan.txt" 2>&1
rc=$?
"$TOOL" lengths "$SCRATCH/chapters1.h5" >"$SCRATCH/all.txt"
check "--max-seq-len 200: the longer samples are cut, as training cuts them" \
    '[ $rc -eq 0 ] && grep -q "^corpus: $ntrain samples .*lengths [0-9]*..200, .* [1-9][0-9]* cut to max_seq_len 200" "$SCRATCH/plan.txt"'
check "the lengths line counts the samples at max_seq_len and the curriculum's classes" \
    'grep -q "^lengths: [0-9.]*% at max_seq_len; 100.0% short (< 1024), 0.0% medium, 0.0% long (>= 2048)" "$SCRATCH/plan.txt"'

# bad options
run_fabula 1 prep -q --split paragraphs -o "$SCRATCH/x.h5" "$SAMPLE"
check "--split paragraphs: exit 2 naming the values" \
    '[ $RC -eq 2 ] && grep -q -- "--split .paragraphs.: expected chapters, scenes or windows" "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/x.h5" ]'
"$FABULA" plan sampler --corpus "$SCRATCH/chapters1.h5" --split chapters --simulate-ranks 2 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan sampler --corpus with --split: exit 2, the unit is the corpus's" \
    '[ $rc -eq 2 ] && grep -q -- "--split goes with --jsonl" "$SCRATCH/out.txt"'
"$FABULA" plan sampler --corpus "$SCRATCH/chapters1.h5" --jsonl "$SAMPLE" --simulate-ranks 2 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan sampler --corpus and --jsonl: exit 2" '[ $rc -eq 2 ] && grep -q "exactly one of --corpus" "$SCRATCH/out.txt"'
"$FABULA" plan sampler --corpus "$SCRATCH/none.h5" --simulate-ranks 2 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan sampler --corpus of a missing file: exit 4 naming it" '[ $rc -eq 4 ] && grep -q "none.h5" "$SCRATCH/out.txt"'
"$TOOL" set-str "$SCRATCH/chapters1.h5" sample_unit paragraphs
"$FABULA" plan sampler --corpus "$SCRATCH/chapters1.h5" --simulate-ranks 2 >"$SCRATCH/out.txt" 2>&1
rc=$?
check "a corpus whose sample_unit is none of the three: exit 3 naming it" \
    '[ $rc -eq 3 ] && grep -q "sample_unit. is .paragraphs., not windows, chapters or scenes" "$SCRATCH/out.txt"'
finish
