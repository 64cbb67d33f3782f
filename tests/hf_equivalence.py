#!/usr/bin/env python3
"""fabula's Hugging Face tokenizer.json loader against the real `tokenizers`
package: the token ids of every novel must be equal.

Trains byte-level BPE tokenizers with `tokenizers` on the corpus (GPT-2's
ByteLevel regex; a Qwen2-style Split regex + ByteLevel; Llama-3's regex with
ignore_merges; a Sequence exercising every Split behavior, invert, a literal
pattern and Digits), adds the given existing tokenizer.json files (GPT-2,
MiniMind), and for each one encodes every novel of the corpus plus a set of
tricky texts with `tokenizers` and with `fabula tokenizer encode`, and
compares. Also checks that a special token `tokenizers` has keeps its id in
fabula and that fabula's own specials that the file lacks come after its
largest id.

Prints one line per check; exits 0 when all pass, 1 otherwise.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

GPT2_FILE_NOTE = "real GPT-2 tokenizer.json (no model type, merges as strings)"
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
FABULA_SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|chapter_sep|>"] + [
    "<|genre_%s|>" % g
    for g in ("fantasy", "romance", "urban", "scifi", "historical", "wuxia", "mystery", "other", "unknown")
]

# Texts that stress the pre-tokenizer: contractions in both cases, curly
# quotes, digit runs, whitespace runs of every kind (NBSP, ideographic space,
# tabs, CR LF), combining marks, emoji, mixed scripts, punctuation runs.
TRICKY = [
    "I'M sure you'LL see: he'd've said \u2018it\u2019s fine\u2019 \u2014 DON'T!",
    "1234567890 12 3.14159 \u0661\u0662\u0663 \u2167 \u00bd",
    "a  b   c\t\td \u00a0e\u3000\u3000f\r\n\r\ng\n\n\n  \n  h   ",
    "   leading and trailing   ",
    "cafe\u0301 na\u00efve \u1e9e\u00df \u0130stanbul \u212a",
    "\u7b2c\u4e00\u56de\u3000\u7504\u58eb\u96b1\u5922\u5e7b\u8b58\u901a\u9748\u3002\u201c\u4f60\u597d\uff01\u201d\u4ed6\u8aaa\u3002",
    "emoji \U0001F600\U0001F44D\U0001F3FD ok?! ...!!! ---",
    "\u3042\u3044\u3046\u30a2\u30a4 \ud55c\uad6d\uc5b4 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0420\u0443\u0441\u0441\u043a\u0438\u0439",
    "x" * 700 + " " + "\u4e2d" * 300,
    "\n",
    " ",
    "a,, b..c  d,",
    "baaab a aa",
    # Bytes Falcon's vocab lacks (dropped, as tokenizers does) and characters
    # whose UTF-8 bytes look like digits on byte-level text (² is C2 B2,
    # and B2 is the byte-level character ²): a Digits step after ByteLevel.
    "ctrl\x03\x04 a\x0bb \x1c\x1d\x1e end \u00b2\u00b3\u00b9 \u00bc\u00bd\u00be x1234567 $+<=>^`|~ \u00a7\u00b6",
]


def write_ids(path, seqs):
    with open(path, "wb") as f:
        for ids in seqs:
            f.write(struct.pack("<I", len(ids)))
            f.write(struct.pack("<%dI" % len(ids), *ids))


def read_ids(path):
    out = []
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        (n,) = struct.unpack_from("<I", data, i)
        i += 4
        out.append(list(struct.unpack_from("<%dI" % n, data, i)))
        i += 4 * n
    return out


def train(kind, texts, vocab_size, path):
    if kind == "bytelevel":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
    elif kind == "qwen2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), "isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    elif kind == "llama3":
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    elif kind == "behaviors":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\s+"), "merged_with_next", invert=False),
            pre_tokenizers.Split(Regex(r"[,.;:!?\u3002\uff0c]"), "merged_with_previous", invert=False),
            pre_tokenizers.Split(Regex(r"\p{L}+"), "merged_with_previous", invert=True),
            pre_tokenizers.Split("a", "contiguous", invert=False),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        specials = ["<|endoftext|>"]
    else:
        raise ValueError(kind)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.save(path)


def fabula_info(fabula, launcher, tokenizer):
    r = subprocess.run(launcher + [fabula, "tokenizer", "info", tokenizer], capture_output=True, text=True)
    info = {"specials": {}, "vocab_size": "-1"}
    if r.returncode != 0:
        print("fabula tokenizer info %s exited %d: %s" % (tokenizer, r.returncode, r.stderr.strip()))
        return info
    out = r.stdout
    for line in out.splitlines():
        if line.startswith("  "):
            tid, text = line.strip().split(" ", 1)
            info["specials"][text] = int(tid)
        elif ": " in line:
            k, v = line.split(": ", 1)
            info[k] = v
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabula", required=True)
    ap.add_argument("--launcher", default="", help="command prefix for fabula, e.g. 'mpiexec -n 1'")
    ap.add_argument("--corpus", required=True, help="JSON Lines novels")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tokenizer-json", action="append", default=[], help="an existing tokenizer.json to check")
    ap.add_argument("--vocab-size", type=int, default=3000)
    args = ap.parse_args()
    launcher = args.launcher.split()
    os.makedirs(args.workdir, exist_ok=True)

    novels = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                novels.append(json.loads(line)["content"])
    tricky_path = os.path.join(args.workdir, "tricky.jsonl")
    with open(tricky_path, "w", encoding="utf-8") as f:
        for t in TRICKY:
            f.write(json.dumps({"content": t, "genre": "other"}, ensure_ascii=False) + "\n")

    cases = []
    for kind in ("bytelevel", "qwen2", "llama3", "behaviors"):
        path = os.path.join(args.workdir, "hf_%s.json" % kind)
        train(kind, novels, args.vocab_size, path)
        cases.append((kind + " (trained by tokenizers %s)" % __import__("tokenizers").__version__, path))
    for p in args.tokenizer_json:
        cases.append((os.path.basename(os.path.dirname(p)) + " (shipped tokenizer.json)", p))

    checks = fails = 0

    def check(ok, what):
        nonlocal checks, fails
        checks += 1
        if not ok:
            fails += 1
        print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)

    for name, path in cases:
        tok = Tokenizer.from_file(path)
        for corpus_name, corpus, texts in (("sample", args.corpus, novels), ("tricky", tricky_path, TRICKY)):
            hf_ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
            out = os.path.join(args.workdir, "fabula_ids.bin")
            r = subprocess.run(launcher + [args.fabula, "tokenizer", "encode", "--tokenizer", path, "--input", corpus,
                                           "--output", out, "--force", "--verify"], capture_output=True, text=True)
            if r.returncode != 0:
                check(False, "%s: fabula tokenizer encode on %s exited %d:\n%s%s" % (name, corpus_name, r.returncode,
                                                                                   r.stdout, r.stderr))
                continue
            fb_ids = read_ids(out)
            same = len(fb_ids) == len(hf_ids)
            detail = "%d texts vs %d" % (len(fb_ids), len(hf_ids))
            for i, (a, b) in enumerate(zip(fb_ids, hf_ids)):
                if a != b:
                    same = False
                    k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
                    detail = ("text %d: first difference at token %d: fabula %s, tokenizers %s (%r vs %r)"
                              % (i, k, a[k:k + 5], b[k:k + 5], tok.decode(a[k:k + 5]), tok.decode(b[k:k + 5])))
                    break
            ntok = sum(len(x) for x in hf_ids)
            check(same, "%s: %s: ids equal on all %d texts (%d tokens)%s" % (
                name, corpus_name, len(hf_ids), ntok, "" if same else " -- " + detail))

        info = fabula_info(args.fabula, launcher, path)
        added = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}
        kept = all(info["specials"].get(c) == i for c, i in added.items())
        check(kept, "%s: the %d added tokens keep their ids in fabula" % (name, len(added)))
        top = max(max(tok.get_vocab(with_added_tokens=True).values()), max(added.values(), default=-1))
        missing = [s for s in FABULA_SPECIALS if s not in added]
        want = {s: top + 1 + k for k, s in enumerate(missing)}
        got = {s: info["specials"].get(s) for s in missing}
        check(got == want and int(info["vocab_size"]) == top + 1 + len(missing),
              "%s: fabula's %d missing specials follow id %d in order (vocab_size %s)"
              % (name, len(missing), top, info["vocab_size"]))

    print("%d passed, %d failed" % (checks - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
