#!/usr/bin/env python3
"""The Hugging Face side of bench/tokenizer_encode.sh.

  tokenizer_encode.py train CORPUS OUT.json [--vocab-size N]
      trains a byte-level BPE tokenizer.json with `tokenizers` (ByteLevel
      pre-tokenizer, GPT-2 regex, no prefix space) on every novel's content.
  tokenizer_encode.py encode TOKENIZER.json CORPUS IDS.bin
      encodes every novel (tok.encode per novel, no special tokens), times
      the encode calls alone, prints one line "hf-encode: BYTES TOKENS SECONDS",
      and writes the ids in the format of `fabula tokenizer encode`
      (per novel: uint32 count, then uint32 ids; little-endian).

Run `encode` with RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false in
the environment (the shell script does) so that it uses one core.
"""
import json
import struct
import sys
import time


def novels(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line)["content"])
    return out


def train(corpus, out, vocab_size):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t0 = time.perf_counter()
    tok.train_from_iterator(novels(corpus), trainer)
    tok.save(out)
    print("hf-train: vocab %d in %.1f s" % (tok.get_vocab_size(), time.perf_counter() - t0))


def encode(tokenizer, corpus, out):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer)
    texts = novels(corpus)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    t0 = time.perf_counter()
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    secs = time.perf_counter() - t0
    with open(out, "wb") as f:
        for x in ids:
            f.write(struct.pack("<I", len(x)))
            f.write(struct.pack("<%dI" % len(x), *x))
    print("hf-encode: %d %d %.6f" % (nbytes, sum(len(x) for x in ids), secs))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "train":
        vocab = int(sys.argv[5]) if len(sys.argv) >= 6 and sys.argv[4] == "--vocab-size" else 32000
        train(sys.argv[2], sys.argv[3], vocab)
    elif len(sys.argv) == 5 and sys.argv[1] == "encode":
        encode(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
