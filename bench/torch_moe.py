#!/usr/bin/env python3
"""The benchmark's PyTorch side: fabula's model (docs/model.md) written the
way a PyTorch user writes a Mixtral-style MoE, trained on CPU in fp32.

This is deliberately the ordinary idiom, not a tuned one: a [B, S] batch,
attention as matmul + additive causal mask + softmax (torch 1.13 has no
scaled_dot_product_attention), experts in a Python loop with index_select /
index_add_ (as Hugging Face's MixtralSparseMoeBlock), torch.optim.AdamW with
its defaults, autograd for every gradient. No torch.compile: it is not in
1.13, and on CPU it would measure a different thing.

The model, batch shape, data, optimizer and step count come from the same
JSON config fabula trains (bench/configs/cpu_small.json), so the two sides
cannot drift apart. Prints one line per step and a final line

    RESULT tokens_per_s <median> ms_per_step <median> best_ms <min> steps <n> threads <T> cpu_ms_per_step <median>

where the medians (and the fastest step) are over the steps after the warm-up;
cpu_ms_per_step is the process's CPU time (all threads) per step, the fair
measure on a machine shared with other load. With num_local_experts 0 or 1
the FFN is one dense SwiGLU MLP, fabula's dense model.
"""
import argparse
import ctypes
import ctypes.util
import json
import math
import os
import statistics
import sys
import time

# Genre tokens of fabula's byte tokenizer (src/tokenizer/bytetok.h): 260 + index.
GENRES = ["fantasy", "romance", "urban", "scifi", "historical", "wuxia", "mystery", "other", "unknown"]
GENRE_FIRST = 260


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="bench/configs/cpu_small.json")
    p.add_argument("--data", default=None, help="corpus .jsonl (default: the config's data.train_path)")
    p.add_argument("--steps", type=int, default=None, help="default: the config's run.steps")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the medians")
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


# ---------------------------------------------------------------- data

def genre_token(genre):
    if genre is None:
        return GENRE_FIRST + GENRES.index("unknown")
    g = str(genre).lower()
    return GENRE_FIRST + (GENRES.index(g) if g in GENRES else GENRES.index("other"))


def load_windows(path, seq_len, overlap):
    """Full-length windows [genre] + content bytes, cut as fabula cuts them
    (src/corpus/windows.h): W = seq_len - 1 content bytes, stride W - overlap.
    Only windows of exactly seq_len tokens are kept (the config sets
    data.min_seq_len = seq_len, so fabula drops the same tails)."""
    W = seq_len - 1
    stride = W - overlap
    rows = []
    with open(path, "rb") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            content = rec["content"].encode("utf-8", "surrogateescape")
            g = genre_token(rec.get("genre"))
            k = 0
            while True:
                chunk = content[k * stride: k * stride + W]
                if len(chunk) == W:
                    rows.append([g] + list(chunk))
                if k * stride + W >= len(content):
                    break
                k += 1
    return rows


# ---------------------------------------------------------------- model

def build_model(torch, nn, F, mc):
    D = mc["hidden_size"]
    H = mc["num_attention_heads"]
    KV = mc["num_key_value_heads"]
    hd = D // H
    I = mc["intermediate_size"]
    V = mc["vocab_size"]
    E = mc["num_local_experts"]
    K = mc["num_experts_per_tok"]
    L = mc["num_hidden_layers"]
    eps = mc["rms_norm_eps"]
    cap = mc["capacity_factor"]

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))

        def forward(self, x):
            var = x.pow(2).mean(-1, keepdim=True)
            return x * torch.rsqrt(var + eps) * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, H * hd, bias=False)
            self.k_proj = nn.Linear(D, KV * hd, bias=False)
            self.v_proj = nn.Linear(D, KV * hd, bias=False)
            self.o_proj = nn.Linear(H * hd, D, bias=False)

        def forward(self, x, cos, sin, mask):
            B, S, _ = x.shape
            q = self.q_proj(x).view(B, S, H, hd).transpose(1, 2)
            k = self.k_proj(x).view(B, S, KV, hd).transpose(1, 2)
            v = self.v_proj(x).view(B, S, KV, hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = H // KV
            k = k[:, :, None].expand(B, KV, rep, S, hd).reshape(B, H, S, hd)
            v = v[:, :, None].expand(B, KV, rep, S, hd).reshape(B, H, S, hd)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd) + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, H * hd)
            return self.o_proj(out)

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(D, I, bias=False)
            self.w3 = nn.Linear(D, I, bias=False)
            self.w2 = nn.Linear(I, D, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class SparseMoe(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.experts = nn.ModuleList([Expert() for _ in range(E)])

        def forward(self, h):
            B, S, _ = h.shape
            x = h.reshape(-1, D)
            T = x.shape[0]
            logits = self.gate(x)
            probs = F.softmax(logits, dim=-1, dtype=torch.float32)
            top_w, top_i = torch.topk(probs, K, dim=-1)
            top_w = top_w / top_w.sum(dim=-1, keepdim=True)
            # Priority order for the capacity: all first choices in token
            # order, then all second choices (docs/model.md, MoE step 3).
            onehot = F.one_hot(top_i.t().reshape(-1), E)            # [K*T, E]
            slot = (onehot.cumsum(0) * onehot).sum(-1) - 1           # place in its expert's queue
            if cap > 0:
                C = math.ceil(cap * T * K / E)
                keep = (slot < C).view(K, T).t()                     # [T, K]
            else:
                keep = torch.ones(T, K, dtype=torch.bool)
            f = onehot.sum(0).float() / T                            # before dropping, no gradient
            aux = E * (f * probs.mean(0)).sum()
            z = torch.logsumexp(logits, dim=-1).pow(2).mean()
            expert_mask = (F.one_hot(top_i, E) * keep[..., None]).permute(2, 1, 0)  # [E, K, T]
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                kk, tok = torch.where(expert_mask[e])
                if tok.numel() == 0:
                    continue
                y = expert(x.index_select(0, tok)) * top_w[tok, kk, None]
                out.index_add_(0, tok, y)
            return out.view(B, S, D), aux, z, T * K - int(keep.sum())

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            # fabula's rule: 0 or 1 experts is a dense model (docs/config.md)
            self.block_sparse_moe = SparseMoe() if E > 1 else None
            self.mlp = Expert() if E <= 1 else None

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            if self.mlp is not None:
                zero = x.new_zeros(())
                return x + self.mlp(self.post_attention_layernorm(x)), zero, zero, 0
            y, aux, z, dropped = self.block_sparse_moe(self.post_attention_layernorm(x))
            return x + y, aux, z, dropped

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(D, V, bias=False)
            std = mc.get("initializer_range", 0.02)
            for name, p in self.named_parameters():
                if p.dim() < 2:
                    continue
                scaled = any(s in name for s in ("o_proj", "w2"))
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * L) if scaled else std)
            inv = mc["rope_theta"] ** (-torch.arange(0, hd // 2, dtype=torch.float32) * 2 / hd)
            self.inv_freq = inv

        def forward(self, tokens, targets):
            B, S = tokens.shape
            pos = torch.arange(S, dtype=torch.float32)
            ang = pos[:, None] * self.inv_freq[None, :]
            ang = torch.cat((ang, ang), dim=-1)
            cos, sin = ang.cos(), ang.sin()
            mask = torch.full((S, S), float("-inf")).triu(1)
            x = self.embed_tokens(tokens)
            auxs, zs, dropped = [], [], 0
            for layer in self.layers:
                x, aux, z, d = layer(x, cos, sin, mask)
                auxs.append(aux)
                zs.append(z)
                dropped += d
            logits = self.lm_head(self.norm(x))
            lm = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)
            if E <= 1:
                return lm, lm, dropped
            aux = torch.stack(auxs).mean()
            z = torch.stack(zs).mean()
            loss = lm + mc["router_aux_loss_coef"] * aux + mc["router_z_loss_coef"] * z
            return loss, lm, dropped

    return Model()


def openblas_info():
    """OpenBLAS config string of the library torch loaded, or a note."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            continue
        lib.openblas_get_config.restype = ctypes.c_char_p
        return "%s, %d thread(s)" % (lib.openblas_get_config().decode(), lib.openblas_get_num_threads())
    return "not OpenBLAS (or not loaded)"


def main():
    args = parse_args()
    # Before torch starts its pools: OpenMP for torch's own kernels, OpenBLAS
    # (pthreads build on Debian) for its matmuls, the same count as fabula.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    with open(args.config) as f:
        cfg = json.load(f)
    mc = cfg["model"]
    data = cfg["data"]
    seq_len = data["seq_len"]
    B = cfg["train_micro_batch_size_per_gpu"] * cfg.get("gradient_accumulation_steps", 1)
    steps = args.steps if args.steps is not None else cfg["run"]["steps"]
    opt_cfg = cfg["optimizer"]["params"]
    clip = cfg.get("gradient_clipping", 0.0)
    assert mc.get("moe_layer_freq", 1) == 1, "benchmark model is all-MoE or all-dense"
    assert not mc.get("tie_word_embeddings", False) and mc.get("expert_dropout", 0.0) == 0.0

    rows = load_windows(args.data or data["train"], seq_len, data["overlap"])
    samples = torch.tensor(rows, dtype=torch.long)
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(samples.shape[0], generator=gen)

    model = build_model(torch, nn, F, mc)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"], betas=tuple(opt_cfg["betas"]),
                            eps=opt_cfg["eps"], weight_decay=opt_cfg["weight_decay"])
    print("torch: %s, %d thread(s) (interop %d), OpenBLAS: %s" %
          (torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads(), openblas_info()))
    print("torch: %d samples of %d tokens; model %.3fM parameters; batch %d x %d; %d steps" %
          (samples.shape[0], seq_len, nparams / 1e6, B, seq_len, steps))
    sys.stdout.flush()

    times, cpus, cursor = [], [], 0
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        c0 = time.process_time()
        if cursor + B > len(order):
            order = torch.randperm(samples.shape[0], generator=gen)
            cursor = 0
        batch = samples[order[cursor: cursor + B]]
        cursor += B
        targets = torch.cat((batch[:, 1:], torch.full((B, 1), -1, dtype=torch.long)), dim=1)
        loss, lm, dropped = model(batch, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf"))
        opt.step()
        dt = time.perf_counter() - t0
        times.append(dt)
        cpus.append(time.process_time() - c0)
        ntok = batch.numel()
        print("torch: step %d/%d | loss %.4f | lm %.4f | grad norm %.3f | dropped %d | %.0f tokens/s | %.1f ms" %
              (step, steps, loss.item(), lm.item(), gnorm.item(), dropped, ntok / dt, dt * 1e3))
        sys.stdout.flush()

    timed = times[args.warmup:] if len(times) > args.warmup else times
    cpu = cpus[args.warmup:] if len(cpus) > args.warmup else cpus
    med = statistics.median(timed)
    print("RESULT tokens_per_s %.1f ms_per_step %.2f best_ms %.2f steps %d threads %d cpu_ms_per_step %.2f" %
          (B * seq_len / med, med * 1e3, min(timed) * 1e3, len(timed), torch.get_num_threads(),
           statistics.median(cpu) * 1e3))


if __name__ == "__main__":
    main()
