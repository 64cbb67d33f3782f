#!/usr/bin/env python3
"""What `fabula generate` must give, computed without fabula's code
(tests/e2e/generate.sh).

  greedy CKPT N R IDS... the greedy continuation of the prompt ids by the
                         float64 reference model (validation/reference_model.py):
                         the full forward over prompt + output every step,
                         argmax; weights read from the checkpoint with h5py;
                         MoE dropless (capacity ignored at inference, as
                         docs/generate.md says); R != 1: Hugging Face's
                         repetition penalty (a positive logit of a token of
                         prompt or output divided by R, a negative one
                         multiplied). Prints the N ids on one line,
                         then the smallest top-1/top-2 logit margin seen.
  decode IDS_FILE OUT STOP...
                         checks that OUT (fabula's stdout) is valid UTF-8 and
                         equals, per line of IDS_FILE, the byte tokenizer's
                         decode (bytes; specials by name, from
                         src/tokenizer/bytetok.h's table) of the ids without a
                         final stop id, replaced as Python's
                         bytes.decode("utf-8", "replace"), plus a newline.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "validation"))

GENRES = ["fantasy", "romance", "urban", "scifi", "historical", "wuxia", "mystery", "other", "unknown"]
SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|chapter_sep|>"] + ["<|genre_%s|>" % g for g in GENRES]


def token_bytes(i):
    if i < 256:
        return bytes([i])
    if i - 256 < len(SPECIALS):
        return SPECIALS[i - 256].encode()
    return ("<|id_%d|>" % i).encode()


def greedy(ckpt, n, penalty, prompt):
    import h5py
    import torch
    import reference_model as rm

    with h5py.File(ckpt, "r") as f:
        cfg_json = f.attrs["config"]
        cfg_json = cfg_json.decode() if isinstance(cfg_json, bytes) else str(cfg_json)
        model = json.loads(cfg_json)["model"]
        fields = rm.ModelConfig.__dataclass_fields__
        cfg = rm.ModelConfig(**{k: v for k, v in model.items() if k in fields})
        cfg.capacity_factor = 0.0
        params = {name: torch.tensor(f["params"][name][()], dtype=rm.DTYPE) for name in f["params"]}
    ids = list(prompt)
    margin = float("inf")
    with torch.no_grad():
        for _ in range(n):
            T = len(ids)
            batch = {"tokens": torch.tensor(ids), "positions": torch.arange(T), "targets": torch.full((T,), -1),
                     "cu_seqlens": torch.tensor([0, T])}
            batch["targets"][0] = 0  # forward() divides by the target count
            last = rm.forward(params, cfg, batch)["logits"][-1].clone()
            for i in set(ids):
                last[i] = last[i] / penalty if last[i] > 0 else last[i] * penalty
            top = torch.topk(last, 2).values
            margin = min(margin, float(top[0] - top[1]))
            ids.append(int(torch.argmax(last)))
    print(" ".join(str(i) for i in ids[len(prompt):]))
    print("margin %.3g" % margin)


def decode(ids_file, out_file, stops):
    want = ""
    for line in open(ids_file):
        ids = [int(x) for x in line.split()]
        if ids and ids[-1] in stops:
            ids = ids[:-1]
        want += b"".join(token_bytes(i) for i in ids).decode("utf-8", "replace") + "\n"
    got = open(out_file, "rb").read()
    try:
        text = got.decode("utf-8")
    except UnicodeDecodeError as e:
        print("stdout is not valid UTF-8: %s" % e)
        return 1
    if text != want:
        print("stdout differs from the decode of the ids:\n%r\n%r" % (text[:200], want[:200]))
        return 1
    print("stdout: %d bytes, valid UTF-8, equal to the decode of %s" % (len(got), ids_file))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "greedy":
        greedy(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), [int(x) for x in sys.argv[5:]])
    else:
        sys.exit(decode(sys.argv[2], sys.argv[3], {int(x) for x in sys.argv[4:]}))
