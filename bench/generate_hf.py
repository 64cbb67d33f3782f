#!/usr/bin/env python3
"""The transformers side of bench/generate.sh: the checkpoint's weights
(h5py) in LlamaForCausalLM (dense) or MixtralForCausalLM (MoE), checked
against the float64 reference model (validation/reference_model.py) and
against fabula's greedy ids, then timed: greedy generate with the KV cache,
batch 1, N new tokens, no stop token.

  generate_hf.py CKPT FABULA_IDS N THREADS PROMPT_IDS...

Prints one line "hf KEY=VALUE ..." that bench/generate.sh reads.
"""
import json
import os
import sys
import time

import h5py
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation"))
import reference_model as rm  # noqa: E402

# transformers 4.46.3's generate() asks whether the model is FSDP-managed,
# which imports torch.distributed.fsdp; that import fails on Debian's torch
# 1.13 under Python 3.11. Nothing here is FSDP, so the answer is no.
transformers.generation.utils.is_fsdp_managed_module = lambda m: False


def load(ckpt):
    with h5py.File(ckpt, "r") as f:
        text = f.attrs["config"]
        mc = json.loads(text.decode() if isinstance(text, bytes) else str(text))["model"]
        params = {n: torch.from_numpy(f["params"][n][()]) for n in f["params"]}
    if mc["tie_word_embeddings"]:
        params["lm_head.weight"] = params["model.embed_tokens.weight"]
    # docs/model.md: the model section is the Hugging Face config's keys
    common = dict(vocab_size=mc["vocab_size"], hidden_size=mc["hidden_size"],
                  intermediate_size=mc["intermediate_size"], num_hidden_layers=mc["num_hidden_layers"],
                  num_attention_heads=mc["num_attention_heads"], num_key_value_heads=mc["num_key_value_heads"],
                  rms_norm_eps=mc["rms_norm_eps"], rope_theta=mc["rope_theta"],
                  tie_word_embeddings=mc["tie_word_embeddings"],
                  max_position_embeddings=mc["max_position_embeddings"], hidden_act="silu",
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if mc["num_local_experts"] > 1:
        assert mc["moe_layer_freq"] == 1, "Mixtral has an MoE FFN in every layer"
        cfg = MixtralConfig(num_local_experts=mc["num_local_experts"], num_experts_per_tok=mc["num_experts_per_tok"],
                            sliding_window=None, router_jitter_noise=0.0, **common)
        model = MixtralForCausalLM(cfg)
    else:
        model = LlamaForCausalLM(LlamaConfig(attention_bias=False, mlp_bias=False, **common))
    model.load_state_dict(params, strict=True)
    refcfg = rm.ModelConfig(**{k: v for k, v in mc.items() if k in rm.ModelConfig.__dataclass_fields__})
    refcfg.capacity_factor = 0.0
    return model.eval(), params, refcfg


def main():
    ckpt, ids_file, new, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    prompt = [int(x) for x in sys.argv[5:]]
    torch.set_num_threads(threads)
    model, params, refcfg = load(ckpt)
    fab = [int(x) for x in open(ids_file).read().split()]
    seq = torch.tensor([prompt + fab])
    with torch.no_grad():
        # the weights as transformers runs them against the independent
        # float64 model, over the prompt and fabula's output
        hf_logits = model(seq).logits[0].double()
        T = seq.shape[1]
        batch = {"tokens": seq[0], "positions": torch.arange(T), "targets": torch.zeros(T, dtype=torch.long),
                 "cu_seqlens": torch.tensor([0, T])}
        ref = rm.forward({k: v.double() for k, v in params.items()}, refcfg, batch)["logits"]
        diff = float((hf_logits - ref).abs().max())
        # fabula's greedy token t is transformers' argmax after the same prefix
        agree = int((hf_logits[len(prompt) - 1:-1].argmax(-1) == torch.tensor(fab)).sum())

        ids = torch.tensor([prompt])
        model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)  # warm-up
        t0 = time.perf_counter()
        model(ids, use_cache=True)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True)
        total = time.perf_counter() - t0
    got = out[0, len(prompt):].tolist()
    same = next((i for i, (a, b) in enumerate(zip(got, fab)) if a != b), min(len(got), len(fab)))
    print("hf prefill_tps=%.1f decode_tps=%.1f total_s=%.3f new=%d logit_diff_vs_ref=%.2e "
          "teacher_forced_agree=%d/%d same_greedy_prefix=%d" %
          (len(prompt) / prefill, len(got) / max(total - prefill, 1e-9), total, len(got), diff, agree, len(fab), same))


if __name__ == "__main__":
    main()
