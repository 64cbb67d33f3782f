#!/bin/sh
# A chapter far longer than prep's 1 MiB encode piece, in the shape of most
# real novels whose headings prep does not recognise: paragraphs separated by
# blank lines, no heading at all. prep cuts such a chapter into pieces at a
# newline followed by text; a newline followed by a blank line once sent the
# piece search back to the same newline forever (a hang at 100% CPU). Here
# a 3 MB and a 10 MB chapter must finish (under a timeout, so a hang fails)
# and every content byte must reach the corpus: with the byte tokenizer a
# novel's content token count is its UTF-8 length, counted by Python.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}

"$PY" - "$SCRATCH/long.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
words = "the of and a to in he was it his that with her she had for you on as at".split()
def para():
    return " ".join(rng.choice(words) for _ in range(rng.randint(20, 120))).capitalize() + "."
with open(sys.argv[1], "w") as f:
    for mb, genre in ((3, "fantasy"), (10, "romance")):
        parts, n = [], 0
        while n < mb << 20:
            p = para()
            parts.append(p)
            n += len(p) + 2
        f.write(json.dumps({"title": "%d MB" % mb, "genre": genre, "content": "\n\n".join(parts)}) + "\n")
PY
for np in 1 2; do
    (cd "$FB_SRCDIR" && timeout ${PREP_TIMEOUT:-300} $MPIEXEC -n $np "$FABULA" prep --max-seq-len 512 --overlap 64 \
        -o "$SCRATCH/long$np.h5" "$SCRATCH/long.jsonl") >"$SCRATCH/out$np.txt" 2>&1
    RC=$?
    check "prep of a 3 MB and a 10 MB chapter without headings finishes on $np rank(s) (exit $RC)" '[ $RC -eq 0 ]'
    "$PY" - "$SCRATCH/long.jsonl" "$SCRATCH/long$np.h5" >"$SCRATCH/count$np.txt" 2>&1 <<'PY'
import json, sys, h5py
want = sorted(len(json.loads(l)["content"].encode()) for l in open(sys.argv[1]))
with h5py.File(sys.argv[2], "r") as f:
    got = sorted(int(x) for x in f["/novels/content_tokens"][()])
print("content bytes", want, "content tokens", got)
sys.exit(0 if got == want else 1)
PY
    RC=$?
    cat "$SCRATCH/count$np.txt"
    check "every content byte is one token of the corpus ($np rank(s))" '[ $RC -eq 0 ]'
done
finish
