"""Reference side of tests/e2e/hf_init_from.sh (not named hf_init_from.py: a .py file is a test of its own), run with $HF_PYTHON.

  make OUT           tiny Llama and Mixtral models saved by transformers
                     itself (random init, save_pretrained) plus a byte-level
                     BPE tokenizer.json made by `tokenizers`, in OUT/<name>
  logits DIR IDS OUT transformers' fp32 logits of the comma list IDS as .npy
  compare A B TOL    max|A - B| / max|B| <= TOL for two .npy files
  bad OUT            the malformed directories of the bad-input checks
  loads DIR          exit 0 when transformers' from_pretrained loads DIR
"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def tokenizer_json(path, text):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator([text], trainer)
    tok.save(path)
    return tok.get_vocab_size()


def make(out):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs",
                             "sample.jsonl"), encoding="utf-8").read()
    tj = os.path.join(out, "tokenizer.json")
    V = tokenizer_json(tj, text)
    common = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                  initializer_range=0.1)
    models = {
        # vocab = the tokenizer's: the appended specials grow it
        "llama": (LlamaForCausalLM, LlamaConfig(vocab_size=V, tie_word_embeddings=False, **common), {}, None),
        # padding rows past the tokenizer cover the appended specials
        "llama_tied_bf16": (LlamaForCausalLM, LlamaConfig(vocab_size=V + 20, tie_word_embeddings=True, **common),
                            {}, torch.bfloat16),
        "mixtral_sharded": (MixtralForCausalLM,
                            MixtralConfig(vocab_size=V, tie_word_embeddings=False, num_local_experts=4,
                                          num_experts_per_tok=2, **common),
                            {"max_shard_size": "40KB"}, None),
        "mixtral_tied_f16": (MixtralForCausalLM,
                             MixtralConfig(vocab_size=V, tie_word_embeddings=True, num_local_experts=4,
                                           num_experts_per_tok=2, **common),
                             {}, torch.float16),
    }
    for name, (cls, cfg, kw, dtype) in models.items():
        m = cls(cfg).eval()
        with torch.no_grad():  # RMSNorm weights away from 1, so that a lost norm shows
            for n, p in m.named_parameters():
                if "norm" in n:
                    p.add_(0.1 * torch.randn_like(p))
        if dtype is not None:
            m = m.to(dtype)
        d = os.path.join(out, name)
        m.save_pretrained(d, safe_serialization=True, **kw)
        shutil.copy(tj, os.path.join(d, "tokenizer.json"))
        print(name, "saved", sorted(os.listdir(d)))


def logits(d, ids, out, vtotal=None):
    """vtotal: a vocabulary grown past the file's rows; the rows added are
    the mean of the file's (docs/init-from.md), so their logits are the
    final hidden state times that mean row."""
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    x = torch.tensor([[int(i) for i in ids.split(",")]])
    with torch.no_grad():
        o = m(x, output_hidden_states=True)
        y = o.logits[0].double()
        if vtotal is not None and int(vtotal) > y.shape[1]:
            w = m.get_output_embeddings().weight.double()
            extra = o.hidden_states[-1][0].double() @ w.mean(0)
            y = torch.cat([y, extra[:, None].expand(-1, int(vtotal) - y.shape[1])], 1)
    np.save(out, y.float().numpy())


def compare(a, b, tol):
    x, y = np.load(a), np.load(b)
    assert x.dtype == np.float32 and x.shape == y.shape, (x.dtype, x.shape, y.shape)
    rel = float(np.abs(x - y).max() / np.abs(y).max())
    print(f"{a}: max |fabula - transformers| / max |transformers| = {rel:.3g} (tolerance {tol})")
    sys.exit(0 if rel <= float(tol) else 1)


def bad(src, out):
    """Variants of the directory src (a single-file fp32 model)."""
    def clone(name):
        d = os.path.join(out, name)
        shutil.copytree(src, d)
        return d
    st = os.path.join(src, "model.safetensors")
    raw = open(st, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    def write(d, hdr, body):
        h = json.dumps(hdr).encode()
        open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + body)
    os.remove(os.path.join(clone("no_config"), "config.json"))
    d = clone("truncated")
    open(os.path.join(d, "model.safetensors"), "wb").write(raw[:len(raw) - 100])
    d = clone("dtype")  # a header that says F16 for bytes of F32
    h = dict(header)
    k = "model.norm.weight"
    h[k] = dict(h[k], dtype="F16")
    write(d, h, raw[8 + n:])
    d = clone("missing")
    h = {k2: v for k2, v in header.items() if k2 != "model.layers.1.mlp.up_proj.weight"}
    write(d, h, raw[8 + n:])
    d = clone("qwen2")
    c = json.load(open(os.path.join(d, "config.json")))
    c["model_type"] = "qwen2"
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    d = clone("gpt2")
    json.dump({"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 300},
              open(os.path.join(d, "config.json"), "w"))
    from safetensors.torch import load_file, save_file
    d = clone("vocab_rows")  # config.json's vocab_size past the embedding's rows
    c = json.load(open(os.path.join(d, "config.json")))
    c["vocab_size"] += 20
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    d = clone("tied_head_rows")  # tied, with an lm_head copy of other rows than vocab_size
    c = json.load(open(os.path.join(d, "config.json")))
    c["tie_word_embeddings"] = True
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    w = load_file(st)
    w["lm_head.weight"] = w["lm_head.weight"][:200].clone()
    save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    d = clone("small_vocab")  # a model of fewer rows than the tokenizer's own ids
    c = json.load(open(os.path.join(d, "config.json")))
    c["vocab_size"] = 200
    json.dump(c, open(os.path.join(d, "config.json"), "w"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "logits":
        logits(*sys.argv[2:6])
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "bad":
        bad(sys.argv[2], sys.argv[3])
    elif cmd == "loads":  # exit 0 when transformers loads DIR
        from transformers import AutoModelForCausalLM
        try:
            AutoModelForCausalLM.from_pretrained(sys.argv[2])
        except Exception as e:  # noqa: BLE001 (any refusal)
            print(type(e).__name__, str(e).splitlines()[0:2])
            sys.exit(1)
