"""Writes the config.json files of this folder with Hugging Face transformers
(config classes only; torch is not needed):

    python3 -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install transformers
    /tmp/hfenv/bin/python make_configs.py

Each file is what `save_pretrained` writes, renamed DIR/config.json -> DIR.json.
The files were made with transformers 5.24.0; those ending in _v4 with
transformers 4.46.3 (`pip install transformers==4.46.3`), whose files spell
RoPE as rope_theta + rope_scaling and carry torch_dtype. Each run writes the
files of the version it runs under.
"""
import os
import shutil
import tempfile

import transformers
from transformers import LlamaConfig, MixtralConfig

V4 = transformers.__version__.startswith("4.")

SMALL = dict(vocab_size=272, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

CONFIGS_V4 = {
    "llama_default_v4": lambda: LlamaConfig(),
    "mixtral_default_v4": lambda: MixtralConfig(),
    "llama_small_v4": lambda: LlamaConfig(**SMALL, tie_word_embeddings=True),
    "llama_changed_v4": lambda: LlamaConfig(**SMALL, rope_scaling={"rope_type": "linear", "factor": 2.0}),
}

CONFIGS = {
    # the classes' defaults (Llama-2-7B-like, Mixtral-8x7B-like)
    "llama_default": lambda: LlamaConfig(),
    "mixtral_default": lambda: MixtralConfig(),
    # small sizes fabula trains in the tests
    "llama_small": lambda: LlamaConfig(**SMALL, tie_word_embeddings=True),
    "mixtral_small": lambda: MixtralConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2,
                                   output_router_logits=True, router_aux_loss_coef=0.02),
    # keys that change the function computed, each to a value fabula lacks
    "llama_changed": lambda: LlamaConfig(**SMALL, hidden_act="gelu", attention_bias=True, mlp_bias=True,
                                 attention_dropout=0.1, head_dim=32,
                                 rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
    "mixtral_changed": lambda: MixtralConfig(**SMALL, num_local_experts=4, sliding_window=64, router_jitter_noise=0.1),
}

here = os.path.dirname(os.path.abspath(__file__))
for name, make in (CONFIGS_V4 if V4 else CONFIGS).items():
    with tempfile.TemporaryDirectory() as tmp:
        make().save_pretrained(tmp)
        shutil.copyfile(os.path.join(tmp, "config.json"), os.path.join(here, name + ".json"))
