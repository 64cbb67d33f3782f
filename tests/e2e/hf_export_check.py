#!/usr/bin/env python3
"""Checks of `fabula export` output (tests/e2e/hf_export.sh), each a subcommand.

ref runs under a Python with torch and h5py (validation/reference_model.py's
float64 forward on the checkpoint's own weights); the others under
$HF_PYTHON (transformers, tokenizers, safetensors), which loads the export
the way a user would. Exit 0 when the check holds, 1 with a reason."""
import json
import os
import struct
import sys


def ref(ckpt, ids_npy, out_npy):
    import h5py
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(os.environ["FB_SRCDIR"], "validation"))
    import reference_model as rm
    with h5py.File(ckpt, "r") as f:
        cfg_all = json.loads(f.attrs["config"])
        params = {k: torch.tensor(np.asarray(v[...]), dtype=torch.float64) for k, v in f["params"].items()}
    m = cfg_all["model"]
    fields = rm.ModelConfig.__dataclass_fields__
    cfg = rm.ModelConfig(**{k: m[k] for k in fields if k in m})
    ids = torch.tensor(np.load(ids_npy), dtype=torch.int32)
    T = ids.shape[0]
    batch = {"tokens": ids, "positions": torch.arange(T, dtype=torch.int32),
             "targets": torch.cat([ids[1:], torch.tensor([-1], dtype=torch.int32)]),
             "cu_seqlens": torch.tensor([0, T], dtype=torch.int32)}
    np.save(out_npy, rm.forward(params, cfg, batch)["logits"].numpy())
    return 0


def logits(d, ids_npy, ref_npy, arch):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(d)
    if type(model).__name__ != arch:
        print("loaded as %s, expected %s" % (type(model).__name__, arch))
        return 1
    ids = torch.tensor(np.load(ids_npy), dtype=torch.long)[None]
    with torch.no_grad():
        got = model(ids).logits[0].double().numpy()
    want = np.load(ref_npy)
    rel = np.abs(got - want).max() / np.abs(want).max()
    print("%s: logits %s, max |hf - ref| / max |ref| = %.3g" % (d, got.shape, rel))
    return 0 if got.shape == want.shape and rel <= 1e-5 else 1


def load_st(d):
    """{name: torch tensor} of an export, sharded or not."""
    from safetensors.torch import load_file
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for f in files:
        out.update(load_file(os.path.join(d, f)))
    return out


def dtype(d32, d16, name):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    want_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
    model = AutoModelForCausalLM.from_pretrained(d16, torch_dtype="auto")
    dts = {p.dtype for p in model.parameters()}
    a, b = load_st(d32), load_st(d16)
    ok = dts == {want_dtype} and set(a) == set(b)
    for k in a:
        x = a[k]
        if name == "fp16":  # numpy's float32 -> float16 rounds to nearest even
            r = torch.from_numpy(x.numpy().astype(np.float16))
        else:               # torch's float32 -> bfloat16 rounds to nearest even
            r = x.to(torch.bfloat16)
        ok &= b[k].dtype == want_dtype and torch.equal(b[k].view(torch.int16), r.view(torch.int16))
    print("%s: loads as %s; %d tensors bit-equal to the rounded fp32 export: %s" % (d16, dts, len(a), ok))
    return 0 if ok else 1


def sharded(d1, dn, limit):
    import torch
    from transformers import AutoModelForCausalLM
    limit = int(limit)
    idx = json.load(open(os.path.join(dn, "model.safetensors.index.json")))
    files = sorted(set(idx["weight_map"].values()))
    n = len(files)
    ok = n > 1 and files == ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)]
    a, b = load_st(d1), load_st(dn)
    ok &= set(a) == set(b) == set(idx["weight_map"])
    ok &= idx["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in a.values())
    for f in files:  # each shard within the limit, unless it is one tensor alone
        from safetensors import safe_open
        with safe_open(os.path.join(dn, f), "pt") as s:
            keys = list(s.keys())
            size = sum(s.get_tensor(k).numel() * s.get_tensor(k).element_size() for k in keys)
        ok &= size <= limit or len(keys) == 1
    m1 = AutoModelForCausalLM.from_pretrained(d1).state_dict()
    mn = AutoModelForCausalLM.from_pretrained(dn).state_dict()
    ok &= set(m1) == set(mn) and all(torch.equal(m1[k], mn[k]) for k in m1)
    print("%s: %d shards, loads, equals %s: %s" % (dn, n, d1, ok))
    return 0 if ok else 1


def st_same(d, scratch):
    """safetensors' own save_file of the export's tensors gives the same
    bytes as fabula's writer (header layout, order, padding, data)."""
    from safetensors.torch import load_file, save_file
    src = os.path.join(d, "model.safetensors")
    save_file(load_file(src), scratch, metadata={"format": "pt"})
    same = open(src, "rb").read() == open(scratch, "rb").read()
    print("%s: byte-identical to safetensors.torch.save_file of its tensors: %s" % (src, same))
    return 0 if same else 1


def read_ids(path):
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(list(struct.unpack_from("<%dI" % n, data, pos + 4)))
        pos += 4 + 4 * n
    return out


def tok(d, novels, ids_bin, info):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    texts = [json.loads(l)["content"] for l in open(novels, encoding="utf-8") if l.strip()]
    want = read_ids(ids_bin)
    raw = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(d)
    ok = len(texts) == len(want)
    same = 0
    for t, w in zip(texts, want):
        a = raw.encode(t, add_special_tokens=False).ids
        b = auto(t, add_special_tokens=False)["input_ids"]
        same += a == w and b == w
    ok &= same == len(texts)
    # every special token fabula lists, at fabula's id
    specials = [l.split() for l in open(info) if l.startswith("  ") and len(l.split()) == 2]
    ok &= all(auto.convert_tokens_to_ids(s) == int(i) for i, s in specials)
    ok &= all(raw.token_to_id(s) == int(i) for i, s in specials)
    stm = json.load(open(os.path.join(d, "special_tokens_map.json")))
    names = {s for _, s in specials}
    if "<|bos|>" in names:
        ok &= auto.bos_token == "<|bos|>" and auto.eos_token == "<|eos|>" and auto.pad_token == "<|pad|>"
    ok &= set(stm["additional_special_tokens"]) == names - {"<|bos|>", "<|eos|>", "<|pad|>"}
    print("%s: %d of %d novels give fabula's ids (tokenizers and AutoTokenizer, %d tokens); %d specials at "
          "fabula's ids: %s" % (d, same, len(texts), sum(map(len, want)), len(specials), ok))
    return 0 if ok else 1


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    sys.exit({"ref": ref, "logits": logits, "dtype": dtype, "sharded": sharded, "tok": tok,
              "st_same": st_same}[cmd](*args))
