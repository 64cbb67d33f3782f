#!/usr/bin/env python3
"""GPU throughput benchmark, PyTorch side: fabula's decoder (docs/model.md) on
fixed-length sequences, one full training step (forward, backward, AdamW)
timed, one JSON line on stdout.

The architecture is that of validation/reference_model.py (token embedding,
L x [RMSNorm, GQA attention with Llama/rotate_half RoPE, causal, residual,
RMSNorm, SwiGLU FFN or top-k MoE, residual], final RMSNorm, untied head,
cross-entropy) written the way a performance-minded PyTorch user writes it:
fused QKV and gate/up projections, scaled_dot_product_attention(is_causal=True)
on [B, H, S, hd], bf16 autocast over fp32 parameters, fused AdamW. The batch
is B sequences of S tokens, so attention is causal per sequence (no packing).

MoE layers: router logits and softmax in fp32, top-k, weights renormalised
over the k chosen, dropless (no capacity), SwiGLU experts; the load-balancing
and router z losses of docs/model.md are added (--aux-coef, --z-coef), and
the step clips the global gradient norm (--clip) before AdamW, as fabula's
bench/model_bench.c does.
Two ways to run the experts:
  loop     tokens sorted by expert (one host sync per layer for the counts),
           one fused gate/up and one down nn.Linear per expert on its slice
           (--impl eager / compile; under compile the loop is left eager, since
           its shapes are data-dependent)
  grouped  the same sorted tokens, each expert's group padded to a multiple
           of GROUP_ALIGN rows, two torch._grouped_mm calls (fused gate/up,
           down) over stacked [E, ., .] weights, no host sync (--impl grouped /
           grouped-compile)

FLOP convention (also in bench/README.md):
  N_active = every parameter except the token embedding, with the LM head
             and the RMSNorm weights included; in an MoE layer the router and
             only top-k experts' weights count.
  flops_per_token = 6 * N_active + 12 * L * D * S     (D = hidden, S = --seq)
  mfu = tokens_per_s * flops_per_token / (ceiling_tflops * 1e12), the ceiling
  being the bf16 8192^3 torch.matmul rate measured in the same process (on the
  CPU: fp32 1024^3), not the datasheet peak.

Runs on torch 1.13 (CPU, eager, fp32) for a smoke test: features that need a
newer torch (scaled_dot_product_attention, torch.compile, torch._grouped_mm,
F.rms_norm, fused AdamW) are looked up at run time; a requested mode whose
feature is missing ends with a JSON line carrying "error" and exit status 2.
"""
import argparse
import importlib
import inspect
import json
import math
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

# Rows of an expert's group are padded to a multiple of this for _grouped_mm:
# 16-byte alignment of bf16 rows/offsets as torchtitan does (it uses 8 for
# bf16; 16 also covers fp16/fp8 kernels and costs at most E*16 zero rows).
GROUP_ALIGN = 16

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
HAS_RMS_NORM = hasattr(F, "rms_norm")
HAS_COMPILE = hasattr(torch, "compile")


def grouped_mm_op():
    """torch._grouped_mm (torch >= 2.8), else None."""
    return getattr(torch, "_grouped_mm", None)


def compiler_disable(fn):
    """Keep fn out of torch.compile graphs (data-dependent shapes); identity
    where there is no compiler."""
    comp = getattr(torch, "compiler", None)
    if comp is not None and hasattr(comp, "disable"):
        return comp.disable(fn)
    return fn


class Unavailable(Exception):
    """A requested mode needs a torch feature this torch lacks."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["dense", "moe"], default="dense")
    p.add_argument("--impl", choices=["eager", "compile", "grouped", "grouped-compile"], default="eager")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--ffn-hidden", type=int, default=3072, help="dense SwiGLU intermediate size")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--expert-hidden", type=int, default=3072, help="expert SwiGLU intermediate size")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (they include compilation)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clip, 0: none")
    p.add_argument("--aux-coef", type=float, default=0.01, help="MoE load-balancing loss coefficient")
    p.add_argument("--z-coef", type=float, default=0.001, help="MoE router z-loss coefficient")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode (default, max-autotune, ...)")
    p.add_argument("--compile-scope", choices=["block", "model"], default="block",
                   help="block: each decoder block and the head+loss compiled (regional; one compile "
                        "shared by the L identical blocks); model: the whole forward+loss")
    p.add_argument("--no-check", action="store_true",
                   help="skip the grouped-vs-loop MoE check that grouped modes run first")
    p.add_argument("--check-only", action="store_true",
                   help="run only the grouped-vs-loop MoE check (with a Python reference for "
                        "_grouped_mm where torch lacks it) and print its JSON line")
    a = p.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        p.error("need hidden %% heads == 0, heads %% kv-heads == 0 and an even head dim")
    if a.model == "moe" and not 1 <= a.topk <= a.experts:
        p.error("need 1 <= topk <= experts")
    if min(a.layers, a.batch, a.seq, a.steps, a.vocab) < 1 or a.warmup < 0:
        p.error("sizes and --steps must be positive, --warmup >= 0")
    return a


# ---------------------------------------------------------------- model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        if HAS_RMS_NORM:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, hd, theta, device, dtype):
    """cos/sin [S, hd] in the rotate_half layout; angle = pos * f_i in fp32
    with f_i = theta^(-2i/hd) (docs/model.md)."""
    i = torch.arange(hd // 2, dtype=torch.float64, device=device)
    inv = (theta ** (-2.0 * i / hd)).to(torch.float32)
    ang = torch.arange(seq, dtype=torch.float32, device=device)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x [B, n, S, hd]: pairs (i, i + hd/2) rotated by the position's angle."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def causal_attention(q, k, v):
    """[B, H, S, hd] each -> [B, H, S, hd], causal, scale 1/sqrt(hd)."""
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    S = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.matmul(probs, v)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.H, self.KV, self.hd = a.heads, a.kv_heads, a.hidden // a.heads
        self.qkv = nn.Linear(a.hidden, (self.H + 2 * self.KV) * self.hd, bias=False)
        self.o_proj = nn.Linear(self.H * self.hd, a.hidden, bias=False)

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        qkv = self.qkv(x).view(B, S, self.H + 2 * self.KV, self.hd).transpose(1, 2)
        q, k, v = qkv.split([self.H, self.KV, self.KV], dim=1)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.KV != self.H:
            # Query head h reads kv head h // (H/KV).
            rep = self.H // self.KV
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = causal_attention(q, k, v)
        return self.o_proj(y.transpose(1, 2).reshape(B, S, self.H * self.hd))


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) with gate and up as one [2I, D] matrix."""

    def __init__(self, dim, inter):
        super().__init__()
        self.gate_up = nn.Linear(dim, 2 * inter, bias=False)
        self.down = nn.Linear(inter, dim, bias=False)

    def forward(self, x):
        g, u = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(g) * u)


def _sorted_assignments(idx, E):
    """idx [T, K] expert choices -> (order, tok, sorted_e, counts): the T*K
    assignments sorted by expert (stable, so token order inside an expert),
    the token of each sorted assignment, its expert, tokens per expert."""
    K = idx.shape[1]
    flat = idx.reshape(-1)
    order = torch.sort(flat, stable=True).indices
    counts = torch.zeros(E, dtype=torch.long, device=idx.device).scatter_add_(0, flat, torch.ones_like(flat))
    return order, order // K, flat[order], counts


def _combine(y_sorted, order, w, T):
    """y_sorted [T*K, D] in sorted order -> sum_k w[t, k] * y[t, k] as [T, D]
    (an unsort by index_copy, whose backward is a gather: no atomics)."""
    K = w.shape[1]
    y = y_sorted.new_empty(y_sorted.shape).index_copy(0, order, y_sorted)
    return (y.view(T, K, -1) * w.unsqueeze(-1).to(y.dtype)).sum(dim=1)


@compiler_disable
def _experts_loop(experts, x, idx, w, E):
    """Sorted tokens, one slice per expert; counts.tolist() is the host sync."""
    order, tok, _, counts = _sorted_assignments(idx, E)
    xs = x[tok].split(counts.tolist())
    y = torch.cat([expert(xe) for expert, xe in zip(experts, xs)])
    return _combine(y, order, w, x.shape[0])


def _experts_grouped(gmm, w13, w2, x, idx, w, E):
    """Tokens sorted by expert into groups padded to GROUP_ALIGN rows (zero
    rows), inside a buffer of static size T*K + E*GROUP_ALIGN whose slack
    belongs to the last group, so every row the kernels see is defined.
    w13 [E, 2I, D], w2 [E, D, I] (Hugging Face [out, in] per expert)."""
    T, D = x.shape
    TK = idx.numel()
    order, tok, sorted_e, counts = _sorted_assignments(idx, E)
    padded = ((counts + GROUP_ALIGN - 1) // GROUP_ALIGN * GROUP_ALIGN).clamp_min(GROUP_ALIGN)
    ends = padded.cumsum(0)
    starts = ends - padded
    rows = TK + E * GROUP_ALIGN            # >= sum(padded): padded_e <= counts_e + GROUP_ALIGN
    offs = torch.cat([ends[:-1], ends.new_full((1,), rows)]).to(torch.int32)
    rank = torch.arange(TK, device=x.device) - (counts.cumsum(0) - counts)[sorted_e]
    dest = starts[sorted_e] + rank          # row of each sorted assignment in the buffer
    xp = x.new_zeros(rows, D).index_copy(0, dest, x[tok])
    dt = x.dtype
    gu = gmm(xp, w13.to(dt).transpose(1, 2), offs=offs)          # [rows, 2I]
    g, u = gu.chunk(2, dim=-1)
    y = gmm(F.silu(g) * u, w2.to(dt).transpose(1, 2), offs=offs)  # [rows, D]
    return _combine(y.index_select(0, dest), order, w, T)


def reference_grouped_mm(a, b, offs):
    """torch._grouped_mm semantics for 2d x 3d (a [M, K], b [G, K, N], offs
    int32 group ends): Python loop, used only by the check where torch lacks
    the op."""
    out, start = [], 0
    for g, end in enumerate(offs.tolist()):
        out.append(a[start:end] @ b[g])
        start = end
    return torch.cat(out)


class MoE(nn.Module):
    def __init__(self, a, grouped, act_dtype, gmm=None):
        super().__init__()
        D, I, E = a.hidden, a.expert_hidden, a.experts
        self.E, self.K, self.grouped, self.act_dtype, self.gmm = E, a.topk, grouped, act_dtype, gmm
        self.aux_coef, self.z_coef = a.aux_coef, a.z_coef
        self.router = nn.Linear(D, E, bias=False)
        if grouped:
            self.w13 = nn.Parameter(torch.empty(E, 2 * I, D))
            self.w2 = nn.Parameter(torch.empty(E, D, I))
        else:
            self.experts = nn.ModuleList([SwiGLU(D, I) for _ in range(E)])

    def forward(self, h):
        """-> (output, aux_coef * aux + z_coef * z of this layer)."""
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        T = x.shape[0]
        # Router in fp32 whatever the autocast state (docs/model.md step 1).
        with torch.autocast(device_type=x.device.type, enabled=False):
            r = F.linear(x.float(), self.router.weight.float())
            p = torch.softmax(r, dim=-1)
            w, idx = torch.topk(p, self.K, dim=-1)
            w = w / w.sum(dim=-1, keepdim=True)
            # Load balancing (f counts top-k assignments, a constant) and z-loss.
            flat = idx.reshape(-1)
            f = torch.zeros(self.E, device=x.device).scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.float32)) / T
            extra = self.aux_coef * self.E * (f * p.mean(dim=0)).sum() + \
                self.z_coef * torch.logsumexp(r, dim=-1).pow(2).mean()
        x = x.to(self.act_dtype)
        if self.grouped:
            y = _experts_grouped(self.gmm, self.w13, self.w2, x, idx, w, self.E)
        else:
            y = _experts_loop(self.experts, x, idx, w, self.E)
        return y.view(shape), extra


class Block(nn.Module):
    def __init__(self, a, grouped, act_dtype, gmm):
        super().__init__()
        self.attn_norm = RMSNorm(a.hidden, a.eps)
        self.attn = Attention(a)
        self.ffn_norm = RMSNorm(a.hidden, a.eps)
        if a.model == "moe":
            self.ffn = MoE(a, grouped, act_dtype, gmm)
        else:
            self.ffn = SwiGLU(a.hidden, a.ffn_hidden)

    def forward(self, x, cos, sin):
        """-> (x, the MoE layer's auxiliary loss term, None for dense)."""
        x = x + self.attn(self.attn_norm(x), cos, sin)
        if isinstance(self.ffn, MoE):
            y, extra = self.ffn(self.ffn_norm(x))
            return x + y, extra
        return x + self.ffn(self.ffn_norm(x)), None


class Model(nn.Module):
    def __init__(self, a, grouped, act_dtype, gmm, device):
        super().__init__()
        self.vocab = a.vocab
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList([Block(a, grouped, act_dtype, gmm) for _ in range(a.layers)])
        self.norm = RMSNorm(a.hidden, a.eps)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        cos, sin = rope_tables(a.seq, a.hidden // a.heads, a.rope_theta, device, act_dtype)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # fabula's initialisation (docs/model.md): N(0, 0.02), output
        # projections scaled by 1/sqrt(2L), norms 1.
        # Stacked expert weights are drawn expert by expert, gate/up then
        # down, as the loop model's per-expert modules are: with the same
        # seed every --impl starts from the same weights (reseeded here, as
        # the modules' constructors drew different amounts).
        torch.manual_seed(a.seed)
        std, out_std = 0.02, 0.02 / math.sqrt(2 * a.layers)
        for name, prm in self.named_parameters():
            if name.endswith((".w13", ".w2")):
                continue            # drawn right after their router, below
            if prm.dim() >= 2:
                out_proj = name.endswith(("o_proj.weight", "down.weight"))
                nn.init.normal_(prm, 0.0, out_std if out_proj else std)
            if name.endswith(".router.weight"):
                moe = self.get_submodule(name[:-len(".router.weight")])
                if moe.grouped:
                    for e in range(moe.E):
                        nn.init.normal_(moe.w13.data[e], 0.0, std)
                        nn.init.normal_(moe.w2.data[e], 0.0, out_std)

    def head_loss(self, x, targets):
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, self.vocab), targets.reshape(-1))

    def forward(self, tokens, targets):
        """Mean cross-entropy + the MoE terms averaged over layers."""
        x = self.embed(tokens)
        extra = None
        for blk in self.blocks:
            x, e = blk(x, self.cos, self.sin)
            if e is not None:
                extra = e if extra is None else extra + e
        loss = self.head_loss(x, targets)
        return loss if extra is None else loss + extra / len(self.blocks)


def active_params(a):
    """N_active of the FLOP convention (module docstring)."""
    D, hd = a.hidden, a.hidden // a.heads
    attn = D * (a.heads + 2 * a.kv_heads) * hd + a.heads * hd * D
    if a.model == "moe":
        ffn = D * a.experts + a.topk * 3 * D * a.expert_hidden
    else:
        ffn = 3 * D * a.ffn_hidden
    return a.layers * (attn + 2 * D + ffn) + D + a.vocab * D


# ---------------------------------------------------------------- measuring

class Timer:
    """CUDA events on the GPU, perf_counter on the CPU; milliseconds."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            self.t0 = torch.cuda.Event(enable_timing=True)
            self.t1 = torch.cuda.Event(enable_timing=True)
            self.t0.record()
        else:
            self.c0 = time.perf_counter()

    def stop_ms(self):
        if self.cuda:
            self.t1.record()
            torch.cuda.synchronize()
            return self.t0.elapsed_time(self.t1)
        return (time.perf_counter() - self.c0) * 1e3


def matmul_ceiling_tflops(device):
    """bf16 8192^3 torch.matmul on the GPU (3 warm-ups, mean of 10), fp32
    1024^3 on the CPU (1 warm-up, mean of 5)."""
    if device.type == "cuda":
        n, dtype, warm, iters = 8192, torch.bfloat16, 3, 10
    else:
        n, dtype, warm, iters = 1024, torch.float32, 1, 5
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    y = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    for _ in range(warm):
        torch.matmul(x, y)
    timer = Timer(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    timer.start()
    for _ in range(iters):
        torch.matmul(x, y)
    ms = timer.stop_ms()
    del x, y
    return 2.0 * n ** 3 * iters / (ms * 1e-3) / 1e12


def moe_check(a, device, gmm):
    """The grouped MoE path against the loop path with the same weights:
    output and every gradient. Returns the largest error relative to each
    tensor's max magnitude. fp32 on the CPU (reference _grouped_mm where torch
    lacks it), bf16 autocast on the GPU with the real op."""
    E, D, I, K = min(a.experts, 8), 64, 128, min(a.topk, 2)
    ca = argparse.Namespace(hidden=D, expert_hidden=I, experts=E, topk=K, aux_coef=0.5, z_coef=0.1)
    torch.manual_seed(a.seed + 1)
    cuda = device.type == "cuda"
    act = torch.bfloat16 if cuda else torch.float32
    loop = MoE(ca, False, act).to(device)
    grouped = MoE(ca, True, act, gmm).to(device)
    with torch.no_grad():
        for prm in loop.parameters():
            prm.normal_(0.0, 0.1)
        grouped.router.weight.copy_(loop.router.weight)
        grouped.w13.copy_(torch.stack([e.gate_up.weight for e in loop.experts]))
        grouped.w2.copy_(torch.stack([e.down.weight for e in loop.experts]))
    # 2 x 37 tokens: group sizes that are not multiples of GROUP_ALIGN.
    h0 = torch.randn(2, 37, D, device=device)
    r = torch.randn(2, 37, D, device=device)
    outs = []
    for mod in (loop, grouped):
        h = h0.clone().requires_grad_(True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            y, extra = mod(h)
        ((y.float() * r).sum() + extra).backward()
        outs.append((y.float(), h.grad))
    g13 = torch.stack([e.gate_up.weight.grad for e in loop.experts])
    g2 = torch.stack([e.down.weight.grad for e in loop.experts])
    pairs = [(outs[0][0], outs[1][0]), (outs[0][1], outs[1][1]), (g13, grouped.w13.grad),
             (g2, grouped.w2.grad), (loop.router.weight.grad, grouped.router.weight.grad)]
    err = 0.0
    for ref, got in pairs:
        scale = ref.abs().max().item() or 1.0
        err = max(err, (ref - got).abs().max().item() / scale)
    return err, (3e-2 if cuda else 1e-5)


def emit(rec):
    print(json.dumps(rec), flush=True)


def run(a):
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise Unavailable("--device cuda but torch.cuda.is_available() is False")
    base = {"impl": a.impl, "model": a.model}
    grouped = a.impl.startswith("grouped")
    compiled = a.impl.endswith("compile")
    gmm = grouped_mm_op()

    if a.check_only:
        err, tol = moe_check(a, device, gmm or reference_grouped_mm)
        emit({"check": "moe grouped vs loop", "grouped_mm": "torch._grouped_mm" if gmm else "python reference",
              "max_rel_err": err, "tol": tol, "ok": err <= tol, "device": a.device, "torch": torch.__version__})
        return 0 if err <= tol else 1
    if grouped and a.model != "moe":
        raise Unavailable("--impl %s applies to --model moe only" % a.impl)
    if grouped and gmm is None:
        raise Unavailable("torch._grouped_mm is not available in torch %s (it appeared in 2.8)" % torch.__version__)
    if compiled and not HAS_COMPILE:
        raise Unavailable("torch.compile is not available in torch %s (needs >= 2.0)" % torch.__version__)
    if grouped and compiled and device.type != "cuda":
        raise Unavailable("grouped-compile runs on CUDA only: _grouped_mm's compiled form takes bf16, "
                          "and the CPU run is fp32")

    extra = {}
    if grouped and not a.no_check:
        err, tol = moe_check(a, device, gmm)
        extra["check_max_rel_err"] = err
        if not err <= tol:
            raise RuntimeError("grouped MoE differs from the loop MoE: max rel err %.3g > %.3g" % (err, tol))

    ceiling = matmul_ceiling_tflops(device)
    torch.manual_seed(a.seed)
    cuda = device.type == "cuda"
    act_dtype = torch.bfloat16 if cuda else torch.float32
    model = Model(a, grouped, act_dtype, gmm, device).to(device)
    params = list(model.parameters())
    opt_kw = dict(lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    if cuda and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        opt_kw["fused"] = True
    opt = torch.optim.AdamW(params, **opt_kw)

    fwd = model
    if compiled:
        dyn = importlib.import_module("torch._dynamo").config
        # L identical blocks: room for a recompile per block should guards
        # ever key on the module.
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dyn, name):
                setattr(dyn, name, max(getattr(dyn, name), 8 * a.layers))
        ckw = dict(mode=a.compile_mode, dynamic=False)
        if a.compile_scope == "model":
            fwd = torch.compile(model, **ckw)
        else:
            for i, blk in enumerate(model.blocks):
                model.blocks[i] = torch.compile(blk, **ckw)
            model.head_loss = torch.compile(model.head_loss, **ckw)

    g = torch.Generator(device=device).manual_seed(a.seed)
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device, generator=g)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def step():
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = fwd(tokens, targets)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t_warm = time.perf_counter()
    for _ in range(a.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    warm_s = time.perf_counter() - t_warm
    timer = Timer(device)
    timer.start()
    for _ in range(a.steps):
        loss = step()
    ms = timer.stop_ms()
    loss = loss.item()
    if not math.isfinite(loss):
        raise RuntimeError("non-finite loss %r" % loss)

    tokens_per_s = a.batch * a.seq * a.steps / (ms * 1e-3)
    n_active = active_params(a)
    fpt = 6 * n_active + 12 * a.layers * a.hidden * a.seq
    rec = dict(base)
    rec.update({
        "tokens_per_s": tokens_per_s,
        "step_ms": ms / a.steps,
        "mfu": tokens_per_s * fpt / (ceiling * 1e12),
        "ceiling_tflops": ceiling,
        "flops_per_token": fpt,
        "params_active": n_active,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "params_total": sum(prm.numel() for prm in params),
        "batch": a.batch, "seq": a.seq, "steps": a.steps, "warmup": a.warmup,
        "warmup_s": warm_s, "loss": loss,
        "dtype": "bf16 autocast, fp32 params" if cuda else "fp32",
        "optimizer": "AdamW fused" if opt_kw.get("fused") else "AdamW",
        "attention": "sdpa" if HAS_SDPA else "matmul+mask+softmax",
    })
    if compiled:
        counters = importlib.import_module("torch._dynamo.utils").counters
        rec["graph_breaks"] = sum(counters["graph_break"].values())
        rec["compile_scope"] = a.compile_scope
    if cuda:
        rec["max_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2 ** 30
    rec.update(extra)
    emit(rec)
    return 0


def main(argv=None):
    a = parse_args(argv)
    try:
        return run(a)
    except Unavailable as e:
        print("torch_model.py: %s" % e, file=sys.stderr)
        emit({"impl": a.impl, "model": a.model, "error": "unavailable: %s" % e, "torch": torch.__version__})
        return 2
    except Exception as e:  # one JSON line even on failure, for the table
        traceback.print_exc()
        msg = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300]
        emit({"impl": a.impl, "model": a.model, "error": msg, "torch": torch.__version__})
        return 1


if __name__ == "__main__":
    sys.exit(main())
