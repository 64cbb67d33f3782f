#!/usr/bin/env python3
"""fabula's tokenizer.json normalizers, its problem reports and its notes on
ignored fields, against the real `tokenizers` package.

Makes variants of a byte-level tokenizer.json (the GPT-2 one) whose
"normalizer" is each normalizer `tokenizers` has that fabula implements
(NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace with a string
and with a regex, Prepend, BertNormalizer with several options, Sequence),
and for each compares fabula's ids with those of `tokenizers` on the start
of every novel of the corpus, on NFD and NFKD copies of it, and on tricky
texts. Then checks that a file with several unsupported parts is refused
with all of them listed in one error, and that truncation and padding are
each said to be ignored, once.

Prints one line per check; exits 0 when all pass, 1 otherwise.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import unicodedata

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_equivalence import read_ids  # noqa: E402

# Texts for the Unicode rules: precomposed and decomposed accents, ligatures
# and compatibility characters (NFK*), case pairs with odd mappings (U+0130,
# final sigma, the Kelvin sign), whitespace of every kind at both ends
# (Strip), controls, U+FFFD and format characters (BERT clean_text), the
# edges of BERT's CJK blocks (handle_chinese_chars).
TRICKY = [
    "Caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m \u212b \u1e9b\u0323 na\u00efve \u01c4 \ufb01ne \ufb03 \u2460 \u00bd x\u00b2",
    "\u0130stanbul \u0130I\u0131i \u03a3\u039f\u03a6\u039f\u03a3 \u212a \u00df \u1e9e \u0149 \u01f0 \uff21\uff22\uff43 \u2163",
    " \t\u00a0\u3000 both ends \u2028\u2029 \u0085\n ",
    "\r\n\u000b\u000c\u001f\u007f\u0085\u00ad\u200b\u200d\u2060\ufeff\ufffd tab\there\u2003em\u00a0nbsp",
    "\u4e00\u9fff\u3400\u4dbf\uf900\ufaff\U00020000\U0002a6df\U0002a700\U0002b73f\U0002b740\U0002b81f"
    "\U0002b920\U0002ceaf\U0002f800\U0002fa1f \u3007\u3002\u300c\u30a2\uac00\u1100\u1161\u11a8",
    "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab \u0915\u094d\u0937 \u0627\u0650\u0644 \u05e9\u05c1\u05b8",
    "aaa xyz aa  --  foo--bar ... \u2026 hello",
    "",
    "   ",
]

NORMALIZERS = [
    ("NFC", {"type": "NFC"}),
    ("NFD", {"type": "NFD"}),
    ("NFKC", {"type": "NFKC"}),
    ("NFKD", {"type": "NFKD"}),
    ("Lowercase", {"type": "Lowercase"}),
    ("Strip both", {"type": "Strip", "strip_left": True, "strip_right": True}),
    ("Strip right", {"type": "Strip", "strip_left": False, "strip_right": True}),
    ("StripAccents after NFD", {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]}),
    ("Replace string", {"type": "Replace", "pattern": {"String": "aa"}, "content": "\u2581b"}),
    ("Replace regex", {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}),
    ("Replace regex classes", {"type": "Replace", "pattern": {"Regex": r"[\p{P}\p{S}]+|\d"}, "content": "#"}),
    ("Prepend", {"type": "Prepend", "prepend": "\u2581"}),
    ("BertNormalizer defaults", {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                 "strip_accents": None, "lowercase": True}),
    ("BertNormalizer cased", {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                              "strip_accents": False, "lowercase": False}),
    ("BertNormalizer strip only", {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
                                   "strip_accents": True, "lowercase": False}),
    ("Sequence NFKC Lowercase Strip Prepend", {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Prepend", "prepend": "\u2581"}]}),
]


def run_fabula(args, *cmd):
    return subprocess.run(args.launcher.split() + [args.fabula, "tokenizer"] + list(cmd), capture_output=True,
                          text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabula", required=True)
    ap.add_argument("--launcher", default="")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--base", required=True, help="a byte-level tokenizer.json without normalizer (GPT-2's)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--chars-per-novel", type=int, default=25000)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    novels = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                novels.append(json.loads(line)["content"][:args.chars_per_novel])
    texts = novels + [unicodedata.normalize("NFD", t) for t in novels] + \
        [unicodedata.normalize("NFKD", t) for t in novels] + TRICKY
    # fabula skips records with an empty content; keep the comparison aligned.
    texts = [t for t in texts if t]
    corpus = os.path.join(args.workdir, "norm_texts.jsonl")
    with open(corpus, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"content": t, "genre": "other"}, ensure_ascii=False) + "\n")
    with open(args.base, encoding="utf-8") as f:
        base = json.load(f)

    checks = fails = 0

    def check(ok, what):
        nonlocal checks, fails
        checks += 1
        fails += not ok
        print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)

    for name, norm in NORMALIZERS:
        d = copy.deepcopy(base)
        d["normalizer"] = norm
        path = os.path.join(args.workdir, "norm.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False)
        tok = Tokenizer.from_file(path)
        want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        out = os.path.join(args.workdir, "norm_ids.bin")
        r = run_fabula(args, "encode", "--tokenizer", path, "--input", corpus, "--output", out, "--force",
                       "--verify")
        if r.returncode != 0:
            check(False, "%s: fabula tokenizer encode exited %d:\n%s%s" % (name, r.returncode, r.stdout, r.stderr))
            continue
        got = read_ids(out)
        bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        detail = ""
        if bad:
            i = bad[0]
            a, b = got[i], want[i]
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            detail = " -- %d texts differ; text %d (%r...) at token %d: fabula %r, tokenizers %r" % (
                len(bad), i, texts[i][:30], k, tok.decode(a[k:k + 4]), tok.decode(b[k:k + 4]))
        check(len(got) == len(want) and not bad, "%s: ids equal on %d texts (%d chars, %d tokens)%s" % (
            name, len(texts), sum(map(len, texts)), sum(map(len, want)), detail))

    # Several problems in one file: one run lists them all.
    d = copy.deepcopy(base)
    d["normalizer"] = {"type": "Nmt"}
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Whitespace"}, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}]}
    d["model"]["dropout"] = 0.1
    d["model"]["colour"] = "blue"
    d["extra_field"] = 1
    path = os.path.join(args.workdir, "bad.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    r = run_fabula(args, "info", path)
    wanted = ['"Nmt"', '"Whitespace"', "add_prefix_space", "dropout", '"colour"', '"extra_field"', "6 problems"]
    missing = [w for w in wanted if w not in r.stderr]
    check(r.returncode == 3 and not missing and r.stderr.count("fabula: error") == 1,
          "a file with 6 problems: exit %d, one error naming all (missing: %s)\n%s" % (r.returncode, missing,
                                                                                       r.stderr.strip()))

    # truncation and padding: ignored, said once; the ids are the file's
    # without them (tokenizers would cut at 50 tokens and pad).
    d = copy.deepcopy(base)
    d["truncation"] = {"direction": "Right", "max_length": 50, "strategy": "LongestFirst", "stride": 0}
    d["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                    "pad_type_id": 0, "pad_token": "<|endoftext|>"}
    path = os.path.join(args.workdir, "trunc.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    r = run_fabula(args, "info", path)
    n_tr = r.stderr.count("tokenizer.json sets truncation max_length 50: ignored, fabula cuts windows itself")
    n_pad = r.stderr.count("sets padding (to a fixed length): ignored")
    check(r.returncode == 0 and n_tr == 1 and n_pad == 1,
          "truncation and padding: exit %d, each said ignored once (%d, %d)\n%s" % (r.returncode, n_tr, n_pad,
                                                                                   r.stderr.strip()))

    print("%d passed, %d failed" % (checks - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
