#!/usr/bin/env python3
"""Split pre-tokenizers whose matches can be empty, against `tokenizers`.

tokenizers cuts the text at every match, empty ones included (the onig
crate's find_iter: an empty match right after the previous match is passed
over, any other counts), so an empty pattern, Regex("") or String(""),
cuts between every two characters under any behavior and either invert.
For each behavior fabula reads (Isolated, MergedWithPrevious,
MergedWithNext, Contiguous), both invert values and both pattern kinds,
before and after ByteLevel, and for a few patterns that match empty at some
places only (x*, \\s*, a lookahead), this builds a tokenizer.json from
GPT-2's vocabulary and merges and compares the ids of `fabula tokenizer
encode` with tokenizers' on a few texts. Removed is refused by fabula
(exit 3): with an empty pattern tokenizers removes nothing (invert false) or
everything (invert true).

Prints one line per check; exits 0 when all pass, 1 otherwise.
"""
import argparse
import copy
import json
import os
import struct
import subprocess
import sys

from tokenizers import Tokenizer

TEXTS = [
    "abc",
    "Hello, world! It's 2024.",
    "h\u00e9llo w\u00f6rld  \u65e5\u672c\u8a9e ok",
    "x\n\ny  \t z",
    "axxbxxxc xx",
    "banana bandana",
    " ",
    "emoji \U0001F600\U0001F44D end",
]
BEHAVIORS = ["Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]


def read_ids(path):
    out, data, i = [], open(path, "rb").read(), 0
    while i < len(data):
        (n,) = struct.unpack_from("<I", data, i)
        out.append(list(struct.unpack_from("<%dI" % n, data, i + 4)))
        i += 4 + 4 * n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabula", required=True)
    ap.add_argument("--launcher", default="")
    ap.add_argument("--base", required=True, help="GPT-2's tokenizer.json")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    launcher = args.launcher.split()
    os.makedirs(args.workdir, exist_ok=True)
    base = json.load(open(args.base, encoding="utf-8"))
    texts_path = os.path.join(args.workdir, "texts.jsonl")
    with open(texts_path, "w", encoding="utf-8") as f:
        for t in TEXTS:
            f.write(json.dumps({"content": t, "genre": "other"}, ensure_ascii=False) + "\n")
    bytelevel = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}

    def split(kind, pattern, behavior, invert):
        return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}

    cases = []
    for kind in ("Regex", "String"):
        for beh in BEHAVIORS:
            for inv in (False, True):
                cases.append(("%s \"\" %s invert=%s" % (kind, beh, inv), [split(kind, "", beh, inv), bytelevel]))
    for beh in BEHAVIORS:
        cases.append(("Regex \"\" %s after ByteLevel" % beh, [bytelevel, split("Regex", "", beh, False)]))
    for pat in ("x*", "\\s*", "(?=a)", "b?"):
        for beh in BEHAVIORS:
            cases.append(("Regex /%s/ %s" % (pat, beh), [split("Regex", pat, beh, False), bytelevel]))

    checks = fails = 0

    def check(ok, what):
        nonlocal checks, fails
        checks += 1
        fails += not ok
        print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)

    out = os.path.join(args.workdir, "ids.bin")
    for i, (name, items) in enumerate(cases):
        t = copy.deepcopy(base)
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": items}
        path = os.path.join(args.workdir, "case%02d.json" % i)
        json.dump(t, open(path, "w", encoding="utf-8"), ensure_ascii=False)
        tok = Tokenizer.from_file(path)
        want = [tok.encode(x, add_special_tokens=False).ids for x in TEXTS]
        r = subprocess.run(launcher + [args.fabula, "tokenizer", "encode", "--tokenizer", path, "--input",
                                       texts_path, "--output", out, "--force"], capture_output=True, text=True)
        if r.returncode != 0:
            check(False, "%s: fabula tokenizer encode exited %d: %s" % (name, r.returncode, r.stderr.strip()))
            continue
        got = read_ids(out)
        bad = [k for k in range(len(TEXTS)) if k >= len(got) or got[k] != want[k]]
        check(not bad, "%s: ids equal on %d texts%s" % (name, len(TEXTS), "" if not bad else " -- text %d: fabula %s, "
              "tokenizers %s" % (bad[0], got[bad[0]] if bad[0] < len(got) else None, want[bad[0]])))

    # Removed: refused, naming it
    t = copy.deepcopy(base)
    t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split("Regex", "", "Removed", False), bytelevel]}
    path = os.path.join(args.workdir, "removed.json")
    json.dump(t, open(path, "w", encoding="utf-8"))
    r = subprocess.run(launcher + [args.fabula, "tokenizer", "info", path], capture_output=True, text=True)
    check(r.returncode == 3 and "Removed" in r.stderr, "Regex \"\" Removed: refused, exit 3 (got %d)" % r.returncode)

    print("%d passed, %d failed" % (checks - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
