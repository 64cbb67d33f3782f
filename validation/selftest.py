#!/usr/bin/env python3
"""Self-test of the PyTorch reference (validation/reference_model.py).

The reference is what fabula is judged against, so it is checked on its own:
 (a) autograd gradients of the total loss equal central finite differences
     (float64, Richardson-extrapolated) for a few parameters of each config;
 (b) one sample, no MoE: the block-mask attention equals a plain causal
     attention written as loops, alone and inside the whole model;
 (c) the packed batch of 3 samples gives each token the same loss as running
     its sample alone (samples are isolated; dropless configs only, since
     capacity dropping makes the samples of a batch compete by design);
 (d) the committed validation/ref/*.h5 are what make_references.py writes now;
 (e) the global-batch losses over one micro-batch are forward()'s, and over
     moe_global's two micro-batches they differ from the micro-batch scope.
Exit 0 pass, 1 fail, 77 skip (no torch/h5py).
"""
import math
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # tests write only under the build tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import h5py
    import numpy as np
    import torch
except ImportError as exc:
    print(f"SKIP: {exc}")
    sys.exit(77)
import make_references as mr  # noqa: E402
import reference_model as rm  # noqa: E402

failures = []


def report(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def setup(name):
    cfg, seed = mr.CONFIGS[name]
    w32 = mr.init_weights(cfg, seed)
    batch = mr.make_batch(mr.SAMPLE_LENGTHS, cfg.vocab_size, mr.BATCH_SEED)
    return cfg, {n: w.to(rm.DTYPE) for n, w in w32.items()}, batch


def total_loss(case, params, cfg, batch):
    return float(mr.step_forward(case, params, cfg, batch)["loss"])


def finite_difference(case, params, cfg, batch, name, index, h):
    """Central difference at steps h and h/2, Richardson-combined: O(h^4)."""
    def central(step):
        w = params[name]
        old = float(w[index])
        w[index] = old + step
        up = total_loss(case, params, cfg, batch)
        w[index] = old - step
        down = total_loss(case, params, cfg, batch)
        w[index] = old
        return (up - down) / (2 * step)
    return (4 * central(h / 2) - central(h)) / 3


def fd_parameters(cfg):
    """A handful of parameters touching every kind of op of the config."""
    last = cfg.num_hidden_layers - 1
    names = ["model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight",
             "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
             f"model.layers.{last}.self_attn.v_proj.weight", f"model.layers.{last}.self_attn.o_proj.weight",
             f"model.layers.{last}.post_attention_layernorm.weight"]
    if not cfg.tie_word_embeddings:
        names.append("lm_head.weight")
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}."
        if cfg.is_moe_layer(l):
            names += [p + "block_sparse_moe.gate.weight", p + "block_sparse_moe.experts.1.w1.weight",
                      p + "block_sparse_moe.experts.2.w3.weight", p + "block_sparse_moe.experts.3.w2.weight"]
        else:
            names += [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
    return names


def check_gradients(name):
    cfg, params, batch = setup(name)
    leaves = {n: w.clone().requires_grad_(True) for n, w in params.items()}
    mr.step_forward(name, leaves, cfg, batch)["loss"].backward()
    gen = torch.Generator().manual_seed(7)
    worst, count = 0.0, 0
    for pname in fd_parameters(cfg):
        g = leaves[pname].grad
        flat = g.abs().reshape(-1)
        # The largest entry, and a random one among the non-negligible ones
        # (a relative error means nothing on a gradient that is ~0).
        candidates = torch.nonzero(flat > 1e-2 * flat.max()).reshape(-1)
        picks = [int(flat.argmax()), int(candidates[torch.randint(len(candidates), (1,), generator=gen)])]
        for flat_i in picks:
            index = np.unravel_index(flat_i, g.shape)
            index = tuple(int(i) for i in index)
            fd = finite_difference(name, params, cfg, batch, pname, index, 1e-4)
            rel = abs(fd - float(g[index])) / abs(float(g[index]))
            worst, count = max(worst, rel), count + 1
            if not rel < 1e-6:
                report(False, f"(a) {name}: d loss / d {pname}{list(index)}: autograd {float(g[index]):.12g} "
                              f"finite difference {fd:.12g} (rel err {rel:.2e})")
    report(worst < 1e-6, f"(a) {name}: {count} gradient entries match finite differences (worst rel err {worst:.2e})")


def loop_causal_attention(q, k, v, cu_seqlens):
    """Plain causal attention of ONE sequence: explicit loops, no mask."""
    assert len(cu_seqlens) == 2
    T, H, hd = q.shape
    group = H // k.shape[1]
    out = torch.zeros(T, H, hd, dtype=q.dtype)
    for h in range(H):
        for t in range(T):
            scores = torch.stack([(q[t, h] * k[s, h // group]).sum() / math.sqrt(hd) for s in range(t + 1)])
            weights = torch.softmax(scores, dim=0)
            out[t, h] = sum(weights[s] * v[s, h // group] for s in range(t + 1))
    return out.reshape(T, H * hd)


def check_single_sample_attention():
    cfg, params, batch = setup("dense")
    T = 16
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(T, cfg.num_attention_heads, cfg.head_dim, generator=gen, dtype=rm.DTYPE)
    k = torch.randn(T, cfg.num_key_value_heads, cfg.head_dim, generator=gen, dtype=rm.DTYPE)
    v = torch.randn(T, cfg.num_key_value_heads, cfg.head_dim, generator=gen, dtype=rm.DTYPE)
    cu = torch.tensor([0, T])
    diff = float((rm.block_attention(q, k, v, cu) - loop_causal_attention(q, k, v, cu)).abs().max())
    report(diff < 1e-12, f"(b) block-mask attention == loop causal attention on one sequence (max diff {diff:.1e})")

    one = mr.make_batch((T,), cfg.vocab_size, 11)
    a = rm.forward(params, cfg, one)["logits"]
    b = rm.forward(params, cfg, one, attention=loop_causal_attention)["logits"]
    diff = float((a - b).abs().max())
    report(diff < 1e-12, f"(b) dense model, one sample: logits with either attention agree (max diff {diff:.1e})")


def check_isolation(name):
    cfg, params, batch = setup(name)
    packed = rm.forward(params, cfg, batch)
    cu = batch["cu_seqlens"].tolist()
    worst = 0.0
    for s in range(len(cu) - 1):
        a, b = cu[s], cu[s + 1]
        alone = {key: batch[key][a:b] for key in ("tokens", "positions", "targets")}
        alone["cu_seqlens"] = torch.tensor([0, b - a], dtype=torch.int32)
        out = rm.forward(params, cfg, alone)
        worst = max(worst, float((out["token_losses"] - packed["token_losses"][a:b]).abs().max()),
                    float((out["logits"] - packed["logits"][a:b]).abs().max()))
    report(worst < 1e-12, f"(c) {name}: per-token losses and logits of the packed batch equal each sample "
                          f"run alone (max diff {worst:.1e})")


def compare_files(path_new, path_ref):
    """Every attribute and dataset of the committed file, reproduced."""
    problems = []
    with h5py.File(path_new, "r") as new, h5py.File(path_ref, "r") as ref:
        for key in set(ref.attrs) | set(new.attrs):
            if key == "torch_version":
                continue
            if key not in ref.attrs or key not in new.attrs:
                problems.append(f"attribute {key}")
            elif isinstance(ref.attrs[key], np.floating):
                # a computed value (the router's smallest logit gap): the
                # datasets' tolerance below, for the same reason
                a, b = float(new.attrs[key]), float(ref.attrs[key])
                if not (a == b or abs(a - b) <= 1e-9 * max(abs(b), 1e-3)):
                    problems.append(f"attribute {key}: {a!r} vs committed {b!r}")
            elif not np.array_equal(ref.attrs[key], new.attrs[key]):
                problems.append(f"attribute {key}")
        names = {}
        for f, tag in ((ref, "ref"), (new, "new")):
            f.visititems(lambda n, o, tag=tag: names.setdefault(n, set()).add(tag)
                         if isinstance(o, h5py.Dataset) else None)
        worst = 0.0
        for n, where in sorted(names.items()):
            if where != {"ref", "new"}:
                problems.append(f"dataset {n} only in {sorted(where)}")
                continue
            a, b = new[n][()], ref[n][()]
            if a.dtype != b.dtype or a.shape != b.shape:
                problems.append(f"dataset {n}: {a.dtype}{a.shape} vs committed {b.dtype}{b.shape}")
            elif a.dtype == np.float64:
                # Computed values: equal bit for bit on one machine; another
                # CPU's BLAS may round differently, so allow 1e-9 relative,
                # far below any change of the model code.
                dev = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3), initial=0.0))
                worst = max(worst, dev)
                if not dev <= 1e-9:
                    problems.append(f"dataset {n}: rel deviation {dev:.2e}")
            elif not np.array_equal(a, b):
                problems.append(f"dataset {n}: differs")
    return problems, len(names), worst


def check_global_batch_one_micro_batch():
    """(e) With the whole batch as one micro-batch, the global-batch losses
    are the micro-batch ones: the two formulas of docs/model.md agree."""
    cfg, params, batch = setup("moe_global")
    a = rm.forward(params, cfg, batch)
    b = rm.global_batch_losses(params, cfg, batch, [len(mr.SAMPLE_LENGTHS)])
    dev = max(abs(float(a[k]) - float(b[k])) / abs(float(a[k])) for k in ("loss", "lm_loss", "aux_loss", "z_loss"))
    report(dev < 1e-12, f"(e) global-batch losses over one micro-batch = forward()'s (rel dev {dev:.1e})")
    split = mr.STEPS["moe_global"]["micro_samples"]
    g = float(rm.global_batch_losses(params, cfg, batch, split)["aux_loss"])
    subs = rm.split_batch(batch, split)
    T = sum(len(s["tokens"]) for s in subs)
    micro = sum(len(s["tokens"]) / T * float(rm.forward(params, cfg, s)["aux_loss"]) for s in subs)
    report(abs(g - micro) > 1e-4 * abs(micro),
           f"(e) moe_global: the global-batch aux loss {g:.6f} differs from the micro-batch one {micro:.6f} "
           "(the case tells the two scopes apart)")


def check_committed_references():
    refdir = os.path.join(HERE, "ref")
    with tempfile.TemporaryDirectory(dir=os.environ.get("FB_BUILDDIR")) as tmp:
        saved = sys.argv
        sys.argv = ["make_references.py", "--outdir", tmp]
        try:
            rc = mr.main()
        finally:
            sys.argv = saved
        report(rc == 0, "(d) make_references.py ran")
        for name in mr.CONFIGS:
            ref, new = os.path.join(refdir, name + ".h5"), os.path.join(tmp, name + ".h5")
            missing = [p for p in (ref, new) if not os.path.exists(p)]
            if missing:
                report(False, f"(d) {name}: missing {missing}")
                continue
            problems, n, worst = compare_files(new, ref)
            shown = "".join("\n       " + p for p in problems[:8])
            if len(problems) > 8:
                shown += f"\n       ... and {len(problems) - 8} more"
            report(not problems, f"(d) {name}.h5: {n} datasets and the attributes reproduced "
                                 f"(float64 worst rel dev {worst:.1e})" + shown)


def main():
    torch.use_deterministic_algorithms(True)
    for name in mr.CONFIGS:
        check_gradients(name)
    check_single_sample_attention()
    for name in mr.CONFIGS:
        cfg = mr.CONFIGS[name][0]
        if cfg.num_local_experts > 1 and cfg.capacity_factor > 0:
            print(f"--   (c) {name}: skipped, capacity dropping couples the samples of a batch by design")
            continue
        check_isolation(name)
    check_global_batch_one_micro_batch()
    check_committed_references()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
