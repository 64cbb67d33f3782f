#!/usr/bin/env python3
"""DeepSpeed's model-state memory estimates, restated from their definitions.

DeepSpeed's estimate_zero2_model_states_mem_needs
(deepspeed/runtime/zero/stage_1_and_2.py) and
estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py)
count bytes per parameter of a mixed-precision Adam run; this file restates
those counts (DeepSpeed 0.19.8, read, not imported) so that
tests/e2e/plan_layout.sh can compare fabula's `plan memory` with them
without DeepSpeed installed, and bench/plan_deepspeed.py can show the real
functions beside this restatement.

Per parameter, DeepSpeed counts: a 16-bit weight (2 bytes), a 16-bit
gradient (2), an fp32 gradient (4), an fp32 master weight (4) and Adam's two
fp32 moments (8). ZeRO-2 keeps the 16-bit weight whole and shards the other
18 bytes; ZeRO-3 shards all of it and adds 4 bytes per parameter of the
largest layer (the gathered one). With offload the sharded state moves to
the host, padded by additional_buffer_factor (1.5).

Also: the parameter count of a fabula model config (Llama/Mixtral shapes),
independent of fabula's own count, and the largest single module's
parameters as DeepSpeed's model_to_params finds it in the transformers
model (one nn.Linear / nn.Embedding each).
"""
import json
import math
import sys


def model_shapes(model):
    """(total parameters, largest module's parameters) of a model section
    (the keys of docs/config.md "model"; defaults as there)."""
    V = model["vocab_size"]
    D = model["hidden_size"]
    I = model["intermediate_size"]
    L = model["num_hidden_layers"]
    H = model["num_attention_heads"]
    KV = model.get("num_key_value_heads", H)
    E = model.get("num_local_experts", 0)
    freq = model.get("moe_layer_freq", 1)
    tied = model.get("tie_word_embeddings", False)
    hd = D // H
    attn = D * H * hd * 2 + D * KV * hd * 2  # q, o; k, v
    norms = 2 * D
    moe_layers = sum(1 for l in range(L) if E > 1 and l % freq == 0)
    dense_layers = L - moe_layers
    ffn = dense_layers * 3 * D * I + moe_layers * (E * 3 * D * I + E * D)
    total = V * D * (1 if tied else 2) + L * (attn + norms) + ffn + D
    largest = max(V * D, D * H * hd, D * KV * hd, D * I, (E * D if E > 1 else 0))
    return total, largest


def zero2(total, gpus_per_node, nodes, offload, buffer_factor=1.5):
    """(cpu bytes per node, gpu bytes per GPU) of ZeRO-2."""
    n = gpus_per_node * nodes
    if offload:
        return int(total * max(4 * n, 16) * buffer_factor), int(2 * total)
    return int(total * 4 * gpus_per_node * buffer_factor), int(2 * total + int(18 * total / n))


def zero3(total, largest, gpus_per_node, nodes, offload_optimizer, offload_param, zero_init=True,
          buffer_factor=1.5):
    """(cpu bytes per node, gpu bytes per GPU) of ZeRO-3."""
    n = gpus_per_node * nodes
    per_node = 1.0 / nodes
    gathered = 4 * largest
    if offload_optimizer and offload_param:
        per = 18 * per_node if zero_init else max(4 * gpus_per_node, 18 * per_node)
        return int(total * per * buffer_factor), int(gathered)
    if offload_optimizer:
        per = 16 * per_node if zero_init else max(4 * gpus_per_node, 16 * per_node)
        return int(total * per * buffer_factor), int(gathered + int(2 * total / n))
    cpu = largest * 4 * gpus_per_node * buffer_factor if zero_init else total * 4 * gpus_per_node * buffer_factor
    return int(cpu), int(gathered + int(18 * total / n))


def sharded_terms(total, n):
    """The bytes per rank DeepSpeed's counts give each sharded state, where
    its definitions and fabula's agree: fp32 master weights (4), fp32
    gradients (4), Adam's moments (8), each over n ranks."""
    return {"fp32_params": 4 * total / n, "fp32_grads": 4 * total / n, "moments": 8 * total / n}


if __name__ == "__main__":
    # plan_deepspeed_ref.py CONFIG.json: the config's counts, as JSON
    cfg = json.load(open(sys.argv[1]))
    t, l = model_shapes(cfg["model"])
    print(json.dumps({"total": t, "largest": l}))
