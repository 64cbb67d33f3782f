#!/usr/bin/env python3
"""The fabula model in PyTorch, float64, written only from docs/model.md.

This is the independent reference that fabula's C forward/backward is checked
against: the forward follows the contract line by line, and every gradient
comes from autograd, so none of fabula's hand-written backward is reused.

The model is a plain function of a dict {Hugging Face name: tensor}, so that
parameter names, shapes and the optimizer's view of them are exactly those of
docs/model.md. Clarity wins over speed everywhere (T x T masks, Python loops
over experts and the capacity queue).
"""
import json
import math
from dataclasses import dataclass, asdict

import torch

DTYPE = torch.float64


@dataclass
class ModelConfig:
    """The model section, with the Hugging Face key names of docs/model.md."""
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    num_local_experts: int = 0
    num_experts_per_tok: int = 2
    moe_layer_freq: int = 1
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    router_aux_loss_coef: float = 0.0
    router_z_loss_coef: float = 0.0
    capacity_factor: float = 0.0
    expert_dropout: float = 0.0

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def is_moe_layer(self, layer):
        return self.num_local_experts > 1 and layer % self.moe_layer_freq == 0

    def to_json(self):
        return json.dumps(asdict(self), sort_keys=False)


def param_shapes(cfg):
    """[(hf_name, shape)] in a fixed order: embedding, layers, norm, head."""
    D, I, V, E = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_local_experts
    hd = cfg.head_dim
    H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
    out = [("model.embed_tokens.weight", (V, D))]
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}."
        out += [
            (p + "input_layernorm.weight", (D,)),
            (p + "self_attn.q_proj.weight", (H * hd, D)),
            (p + "self_attn.k_proj.weight", (KV * hd, D)),
            (p + "self_attn.v_proj.weight", (KV * hd, D)),
            (p + "self_attn.o_proj.weight", (D, H * hd)),
            (p + "post_attention_layernorm.weight", (D,)),
        ]
        if cfg.is_moe_layer(l):
            out.append((p + "block_sparse_moe.gate.weight", (E, D)))
            for e in range(E):
                q = p + f"block_sparse_moe.experts.{e}."
                out += [(q + "w1.weight", (I, D)), (q + "w3.weight", (I, D)), (q + "w2.weight", (D, I))]
        else:
            out += [
                (p + "mlp.gate_proj.weight", (I, D)),
                (p + "mlp.up_proj.weight", (I, D)),
                (p + "mlp.down_proj.weight", (D, I)),
            ]
    out.append(("model.norm.weight", (D,)))
    if not cfg.tie_word_embeddings:
        out.append(("lm_head.weight", (V, D)))
    return out


def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def rope(x, positions, theta):
    """x [T, n, hd]; rotate_half convention. The angle pos * f_i is formed in
    fp32 as the contract says (f_i rounded to fp32 first); cos/sin in fp64."""
    hd = x.shape[-1]
    half = hd // 2
    i = torch.arange(half, dtype=DTYPE)
    inv_freq = (theta ** (-2.0 * i / hd)).to(torch.float32)
    angle = (positions.to(torch.float32)[:, None] * inv_freq[None, :]).to(DTYPE)
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1)[:, None, :]
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1)[:, None, :]
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def block_causal_mask(cu_seqlens, T):
    """[T, T] bool: row t may read column s iff same sample and s <= t."""
    sample = torch.empty(T, dtype=torch.long)
    for s in range(len(cu_seqlens) - 1):
        sample[int(cu_seqlens[s]):int(cu_seqlens[s + 1])] = s
    idx = torch.arange(T)
    return (sample[:, None] == sample[None, :]) & (idx[None, :] <= idx[:, None])


def block_attention(q, k, v, cu_seqlens):
    """q [T,H,hd], k/v [T,KV,hd] -> [T, H*hd]; GQA by repeating kv heads so
    that query head h reads kv head h // (H/KV)."""
    T, H, hd = q.shape
    rep = H // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
    scores = scores.masked_fill(~block_causal_mask(cu_seqlens, T)[None], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("hts,shd->thd", probs, v).reshape(T, H * hd)


def swiglu(h, w_gate, w_up, w_down):
    return (torch.nn.functional.silu(h @ w_gate.T) * (h @ w_up.T)) @ w_down.T


def topk_lower_index_ties(p, K):
    """Top-K per row by value, descending; equal values keep the lower index
    first (stable sort), as docs/model.md requires."""
    order = torch.sort(p, dim=-1, descending=True, stable=True).indices
    return order[:, :K]


def moe_ffn(h, params, prefix, cfg):
    """Returns (ffn output [T,D], aux_l, z_l, stats dict)."""
    T = h.shape[0]
    E, K, c = cfg.num_local_experts, cfg.num_experts_per_tok, cfg.capacity_factor
    r = h @ params[prefix + "gate.weight"].T                     # [T, E]
    p = torch.softmax(r, dim=-1)
    chosen = topk_lower_index_ties(p.detach(), K)                 # [T, K]
    chosen_p = p.gather(1, chosen)
    w = chosen_p / chosen_p.sum(dim=-1, keepdim=True)

    # Capacity: first choices of all tokens in token order, then second
    # choices, ...; an assignment finding its expert full is dropped.
    kept = torch.ones(T, K, dtype=torch.bool)
    load = [0] * E
    cap = math.ceil(c * T * K / E) if c > 0 else None
    for k in range(K):
        for t in range(T):
            e = int(chosen[t, k])
            if cap is not None and load[e] >= cap:
                kept[t, k] = False
            else:
                load[e] += 1

    out = torch.zeros_like(h)
    for e in range(E):
        # Every expert runs (possibly on zero rows) so each weight is in the
        # graph and always gets a gradient tensor, zero when unused.
        t_idx, k_idx = torch.nonzero((chosen == e) & kept, as_tuple=True)
        q = prefix + f"experts.{e}."
        y = swiglu(h[t_idx], params[q + "w1.weight"], params[q + "w3.weight"], params[q + "w2.weight"])
        out = out.index_add(0, t_idx, w[t_idx, k_idx][:, None] * y)

    # Load balancing: f counts assignments before dropping and is a constant.
    f = torch.bincount(chosen.reshape(-1), minlength=E).to(DTYPE) / T
    aux = E * (f * p.mean(dim=0)).sum()
    z = (torch.logsumexp(r, dim=-1) ** 2).mean()

    sorted_p = torch.sort(p.detach(), dim=-1, descending=True).values
    sorted_r = torch.sort(r.detach(), dim=-1, descending=True).values
    stats = {
        "dropped": int((~kept).sum()),
        "tokens_per_expert": load,
        # Margins of the K-th over the (K+1)-th choice, for robustness checks.
        "prob_gap": float((sorted_p[:, K - 1] - sorted_p[:, K]).min()) if K < E else math.inf,
        "logit_gap": float((sorted_r[:, K - 1] - sorted_r[:, K]).min()) if K < E else math.inf,
        # Largest distance of the (K+1)-th logit below the top one: bounded so
        # that fp32 softmax cannot underflow the candidates to equal zeros.
        "logit_spread": float((sorted_r[:, 0] - sorted_r[:, min(K, E - 1)]).max()),
        # What a loss over several micro-batches needs (global_batch_losses):
        # the router probabilities (with their graph), the choice counts
        # before dropping, the log-sum-exp of each token's router logits.
        "probs": p,
        "counts": torch.bincount(chosen.reshape(-1), minlength=E),
        "lse": torch.logsumexp(r, dim=-1),
    }
    return out, aux, z, stats


def forward(params, cfg, batch, attention=block_attention):
    """params: {hf name: float64 tensor}; batch: dict of integer tensors
    tokens, positions, targets [T] and cu_seqlens [nseq+1].

    Returns a dict: logits [T,V], token_losses [T] (0 where target < 0),
    lm_loss, aux_loss, z_loss (means over MoE layers, 0 without any), loss
    (= lm + aux_coef*aux + z_coef*z), and per layer: dropped, tokens_per_expert,
    prob_gap, logit_gap, logit_spread (None for
    dense layers)."""
    tokens, positions, targets = batch["tokens"].long(), batch["positions"].long(), batch["targets"].long()
    cu = batch["cu_seqlens"].long()
    T = tokens.shape[0]
    H, KV, hd, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps

    x = params["model.embed_tokens.weight"][tokens]
    aux_l, z_l, layer_stats = [], [], []
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}."
        h = rmsnorm(x, params[p + "input_layernorm.weight"], eps)
        q = (h @ params[p + "self_attn.q_proj.weight"].T).view(T, H, hd)
        k = (h @ params[p + "self_attn.k_proj.weight"].T).view(T, KV, hd)
        v = (h @ params[p + "self_attn.v_proj.weight"].T).view(T, KV, hd)
        q, k = rope(q, positions, cfg.rope_theta), rope(k, positions, cfg.rope_theta)
        x = x + attention(q, k, v, cu) @ params[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, params[p + "post_attention_layernorm.weight"], eps)
        if cfg.is_moe_layer(l):
            y, aux, z, stats = moe_ffn(h, params, p + "block_sparse_moe.", cfg)
            aux_l.append(aux)
            z_l.append(z)
            layer_stats.append(stats)
        else:
            y = swiglu(h, params[p + "mlp.gate_proj.weight"], params[p + "mlp.up_proj.weight"],
                       params[p + "mlp.down_proj.weight"])
            layer_stats.append(None)
        x = x + y

    x = rmsnorm(x, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"]
    logits = x @ head.T

    has_target = targets >= 0
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(1, targets.clamp(min=0)[:, None])[:, 0]
    token_losses = torch.where(has_target, -picked, torch.zeros_like(picked))
    lm = token_losses.sum() / int(has_target.sum())
    zero = torch.zeros((), dtype=DTYPE)
    aux = torch.stack(aux_l).mean() if aux_l else zero
    z = torch.stack(z_l).mean() if z_l else zero
    loss = lm + cfg.router_aux_loss_coef * aux + cfg.router_z_loss_coef * z
    return {"logits": logits, "token_losses": token_losses, "lm_loss": lm, "aux_loss": aux,
            "z_loss": z, "loss": loss, "layers": layer_stats}


def split_batch(batch, micro_samples):
    """The batch's samples cut into consecutive micro-batches of
    micro_samples[i] samples each (positions and targets as they are,
    cu_seqlens restarting at 0)."""
    cu = batch["cu_seqlens"].long().tolist()
    subs, first = [], 0
    for n in micro_samples:
        lo, hi = cu[first], cu[first + n]
        sub = {k: batch[k][lo:hi] for k in ("tokens", "positions", "targets")}
        sub["cu_seqlens"] = torch.as_tensor([c - lo for c in cu[first:first + n + 1]], dtype=torch.int32)
        subs.append(sub)
        first += n
    assert first == len(cu) - 1, "micro_samples must cover the batch"
    return subs


def global_batch_losses(params, cfg, batch, micro_samples):
    """One optimizer step over several micro-batches with the global-batch
    load-balancing loss (docs/model.md "Losses", router_aux_loss_scope
    "global_batch"). The batch's samples are cut into consecutive
    micro-batches of micro_samples[i] samples; each runs through forward()
    alone (capacity is per micro-batch). The losses are then taken over the
    whole step at once: lm = all token losses / all targets; per MoE layer,
    f_e = that layer's choices of e over all micro-batches / all tokens, P_e
    = the mean router probability over all tokens, aux_l = E * sum f_e P_e;
    z_l = the mean over all tokens of lse^2; aux and z are means over the MoE
    layers. Returns forward()'s dict with logits concatenated and the layer
    statistics summed (dropped, tokens_per_expert) or extreme (margins)."""
    outs = [forward(params, cfg, sub) for sub in split_batch(batch, micro_samples)]
    targets = batch["targets"].long()
    T = targets.shape[0]
    lm = torch.cat([o["token_losses"] for o in outs]).sum() / (targets >= 0).sum()
    aux_l, z_l, layers = [], [], []
    for l in range(cfg.num_hidden_layers):
        if not cfg.is_moe_layer(l):
            layers.append(None)
            continue
        st = [o["layers"][l] for o in outs]
        f = sum(s["counts"] for s in st).to(DTYPE) / T
        P = torch.cat([s["probs"] for s in st]).mean(dim=0)
        aux_l.append(cfg.num_local_experts * (f * P).sum())
        z_l.append((torch.cat([s["lse"] for s in st]) ** 2).mean())
        layers.append({"dropped": sum(s["dropped"] for s in st),
                       "tokens_per_expert": [sum(s["tokens_per_expert"][e] for s in st)
                                             for e in range(cfg.num_local_experts)],
                       "prob_gap": min(s["prob_gap"] for s in st), "logit_gap": min(s["logit_gap"] for s in st),
                       "logit_spread": max(s["logit_spread"] for s in st)})
    zero = torch.zeros((), dtype=DTYPE)
    aux = torch.stack(aux_l).mean() if aux_l else zero
    z = torch.stack(z_l).mean() if z_l else zero
    loss = lm + cfg.router_aux_loss_coef * aux + cfg.router_z_loss_coef * z
    return {"logits": torch.cat([o["logits"] for o in outs]), "lm_loss": lm, "aux_loss": aux, "z_loss": z,
            "loss": loss, "layers": layers}
