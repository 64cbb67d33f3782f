#!/bin/sh
# The data keys, documented and real alike (docs/config.md "data",
# docs/data.md): every key of the effective config's "data" section has a row
# in the config reference's data tables and every row is a key (data.corpus
# had none); every `data.X` the docs and the README name is a key (or a
# section of keys), or one the config refuses naming the key to use
# (data.train_path was documented, warned about as unknown, and the run
# trained on the bundled sample); data.overlap is refused where windows
# would not advance; the text-input keys given beside data.corpus are in the
# no-effect note.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}

run_fabula 1 train --dry-run
check "train --dry-run: exit 0" '[ $RC -eq 0 ]'
"$PY" - "$SCRATCH/out.txt" "$FB_SRCDIR" >"$SCRATCH/keys.txt" 2>&1 <<'PYEOF'
import glob, json, os, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
effective = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]

def flat(prefix, node):
    for k, v in node.items():
        if isinstance(v, dict):
            yield from flat(prefix + k + ".", v)
        else:
            yield prefix + k

real = set(flat("data.", effective["data"]))

def sections(prefix, node):
    for k, v in node.items():
        if isinstance(v, dict):
            yield prefix + k
            yield from sections(prefix + k + ".", v)

groups = set(sections("data.", effective["data"]))
top = sys.argv[2]
lines = open(os.path.join(top, "docs/config.md"), encoding="utf-8").read().split("\n")
rows, inside = set(), False
for line in lines:
    if line.startswith("## "):
        inside = line.strip() == "## data"
    elif inside and line.startswith("| ") and not line.startswith("| key") and not line.startswith("|---"):
        rows.add("data." + line.split("|")[1].strip().strip("`"))
for k in sorted(real - rows):
    print("undocumented", k)
for k in sorted(rows - real):
    print("not a key", k)
named = set()
for path in glob.glob(os.path.join(top, "docs/*.md")) + [os.path.join(top, "README.md")]:
    for m in re.finditer(r"(?<![\w./-])data\.[a-z_]+(?:\.[a-z_]+)*", open(path, encoding="utf-8").read()):
        if m.group(0) != "data.md":
            named.add(m.group(0))
for k in sorted(named - real - groups):
    print("named", k)
print("checked %d keys, %d table rows, %d names in the docs" % (len(real), len(rows), len(named)))
PYEOF
cat "$SCRATCH/keys.txt"
check "every data key has a row in docs/config.md's data tables, every row is a key" \
    'grep -q "^checked" "$SCRATCH/keys.txt" && ! grep -Eq "^(undocumented|not a key) " "$SCRATCH/keys.txt"'
ok=1
for k in $(sed -n 's/^named //p' "$SCRATCH/keys.txt"); do
    run_fabula 1 train --dry-run --set "$k=x"
    if [ $RC -ne 2 ] || ! grep -q "error: config key '$k' is not fabula's: .*data\.[a-z]" "$SCRATCH/out.txt"; then
        echo "the docs name $k, which is neither a key nor refused naming the key to use:"; cat "$SCRATCH/out.txt"
        ok=0
    fi
done
check "every data.X the docs name is a key or refused with the key to use" '[ $ok -eq 1 ]'

# data.train_path: refused, pointing at the key for what it names
expect_exit2 "data.train_path = a JSONL file" "data.train_path" "novels as .jsonl/.json text (byte tokenizer) are data.train" \
    1 "$FABULA" train --dry-run --set data.train_path=inputs/sample.jsonl
expect_exit2 "data.train_path = a corpus file" "data.train_path" "made by \`fabula prep\` is data.corpus" \
    2 "$FABULA" train --dry-run --set data.train_path=runs/corpus.h5
printf '{"data": {"train_path": "inputs/sample.jsonl"}}\n' >"$SCRATCH/old_docs.json"
expect_exit2 "data.train_path in a config file" "data.train_path" "data.train" 1 "$FABULA" train --dry-run "$SCRATCH/old_docs.json"
check "... and not also warned about as an unknown key" '! grep -q "unknown" "$SCRATCH/err.txt"'

# data.overlap: windows must advance (it was accepted up to seq_len - 1)
expect_exit2 "data.overlap = seq_len - 1" "data.overlap" "[0, data.seq_len - 2 = 126]" \
    1 "$FABULA" train --dry-run --set data.seq_len=128 --set data.overlap=127
run_fabula 1 train --dry-run --set data.seq_len=128 --set data.overlap=126
check "data.overlap = seq_len - 2: accepted" '[ $RC -eq 0 ]'

# the keys of text input beside data.corpus: no effect, said so (the
# pre-flight opens the corpus, so it is a real one)
"$FABULA" prep -q --max-seq-len 128 -o "$SCRATCH/bytes.h5" "$FB_SRCDIR/inputs/sample.jsonl" >"$SCRATCH/prep.out" 2>&1 ||
    { cat "$SCRATCH/prep.out"; exit 99; }
run_fabula 1 train --dry-run --set data.corpus="$SCRATCH/bytes.h5" --set data.overlap=4 --set data.min_seq_len=8
check "data.overlap and data.min_seq_len with data.corpus: in the no-effect note, with the reason" \
    '[ $RC -eq 0 ] && grep -q "note: accepted without effect in fabula: data.overlap (data.corpus is given: its samples are prep.s), data.min_seq_len (data.corpus is given" "$SCRATCH/out.txt"'
run_fabula 1 train --dry-run --set data.overlap=4
check "... and not without data.corpus" '[ $RC -eq 0 ] && ! grep -q "data.overlap (data.corpus" "$SCRATCH/out.txt"'
finish
