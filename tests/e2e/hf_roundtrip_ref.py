"""transformers' side of tests/e2e/hf_roundtrip.sh, run with $HF_PYTHON (not
named hf_roundtrip.py: a .py file is a test of its own).

  logits DIR IDS OUT        fp32 logits of the comma list IDS, as .npy
  greedy DIR TEXT N OUT [GENRE_ID]
                            model.generate(do_sample=False) of N new tokens
                            after AutoTokenizer(DIR)'s ids of TEXT (after
                            GENRE_ID when given); the new ids, one line
  encode DIR NOVELS OUT     AutoTokenizer(DIR) ids of every novel's content,
                            in fabula's IDS.bin layout (per novel a uint32
                            count, then the uint32 ids)
  specials DIR              every added token as "text id" lines, by id
  diff A B TOL              succeeds when two .npy arrays differ by more than
                            TOL relative (the weights did change)
"""
import json
import struct
import sys

import numpy as np


def load(d):
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()


def logits(d, ids, out):
    import torch
    x = torch.tensor([[int(i) for i in ids.split(",")]])
    with torch.no_grad():
        np.save(out, load(d)(x).logits[0].float().numpy())


def greedy(d, text, n, out, genre=None):
    import torch
    # transformers 4.46's generate() asks torch.distributed.fsdp whether the
    # model is sharded; Debian's torch 1.13 cannot import that module under
    # Python 3.11 (a dataclass with a mutable default), and nothing here is
    # sharded
    import transformers.generation.utils as gu
    from transformers import AutoTokenizer
    gu.is_fsdp_managed_module = lambda m: False
    m = load(d)
    ids = AutoTokenizer.from_pretrained(d)(text, add_special_tokens=False)["input_ids"]
    x = torch.tensor([([int(genre)] if genre is not None else []) + ids])
    n = int(n)
    with torch.no_grad():
        y = m.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                       pad_token_id=m.generation_config.pad_token_id or 0)
    with open(out, "w") as f:
        f.write(" ".join(str(int(t)) for t in y[0, x.shape[1]:]) + "\n")


def encode(d, novels, out):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(d)
    with open(out, "wb") as f:
        for line in open(novels, encoding="utf-8"):
            if not line.strip():
                continue
            ids = tok(json.loads(line)["content"], add_special_tokens=False)["input_ids"]
            f.write(struct.pack("<I", len(ids)))
            f.write(struct.pack("<%dI" % len(ids), *ids))


def specials(d):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(d)
    for text, i in sorted(tok.get_added_vocab().items(), key=lambda kv: kv[1]):
        print(text, i)


def diff(a, b, tol):
    x, y = np.load(a), np.load(b)
    x = x[:, :y.shape[1]]  # the untrained model lacks the appended rows
    rel = float(np.abs(x - y).max() / np.abs(y).max())
    print(f"{a} vs {b}: {rel:.3g} relative")
    sys.exit(0 if rel > float(tol) else 1)


if __name__ == "__main__":
    {"logits": logits, "greedy": greedy, "encode": encode, "specials": specials, "diff": diff}[sys.argv[1]](*sys.argv[2:])
