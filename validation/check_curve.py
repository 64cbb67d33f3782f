#!/usr/bin/env python3
"""Recomputes the first steps of `fabula validate`'s reference curve with the
float64 PyTorch model of reference_model.py, so that the committed curves are
not only fabula checking itself (docs/validation-format.md "Loss curves").

From fabula it takes only the inputs (validation/curve_inputs writes them):
the initial float32 weights, each step's packed micro-batches and each
update's lr. The losses, the gradients (autograd), the clipping and the AdamW
updates are the reference's, in float64:

  step loss = sum over micro-batches of lm_sum_mb / N_step
              + (T_mb / T_step) * (aux_coef * aux_mb + z_coef * z_mb)

(docs/model.md "Losses", router_aux_loss_scope "micro_batch"), then
torch.nn.utils.clip_grad_norm_(1.0) and torch.optim.AdamW over one group of
every parameter.

usage: check_curve.py INPUTS.h5 CURVE.json [--tol REL]
Exit 0 when every step's loss agrees with the curve to REL (relative;
default 1e-5), 1 otherwise; prints one line per step.
"""
import argparse
import json
import sys

sys.dont_write_bytecode = True
import os  # noqa: E402

import h5py  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as rm  # noqa: E402


def model_config(cfg):
    m = cfg["model"]
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "num_local_experts", "num_experts_per_tok", "moe_layer_freq", "rope_theta",
            "rms_norm_eps", "tie_word_embeddings", "router_aux_loss_coef", "router_z_loss_coef",
            "capacity_factor", "expert_dropout")
    assert m.get("router_aux_loss_scope", "micro_batch") == "micro_batch"
    assert m["expert_dropout"] == 0.0
    return rm.ModelConfig(**{k: m[k] for k in keys})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs")
    ap.add_argument("curve")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    with open(args.curve) as fh:
        curve = json.load(fh)
    f = h5py.File(args.inputs, "r")
    cfg = json.loads(f.attrs["config_json"])
    mc = model_config(cfg)
    opt_p = cfg["optimizer"]["params"]
    # any ZeRO stage: the partitions hold the same update, element for element
    assert cfg["optimizer"]["type"] == "AdamW"
    assert not cfg.get("fp16", {}).get("enabled") and not cfg.get("bf16", {}).get("enabled")
    steps = int(f.attrs["steps"])
    params = {n: torch.as_tensor(f["weights"][n][()]).to(rm.DTYPE).requires_grad_(True) for n in f["weights"]}
    plist = list(params.values())
    opt = torch.optim.AdamW(plist, lr=0.0, betas=tuple(opt_p["betas"]), eps=opt_p["eps"],
                            weight_decay=opt_p["weight_decay"])
    worst = 0.0
    print(f"check_curve: {args.curve} ({curve['name']}, job {curve['job']}) against the float64 reference, "
          f"{steps} steps, relative tolerance {args.tol:g}")
    for s in range(1, steps + 1):
        g = f["steps"][str(s)]
        mbs = sorted((k for k in g if k != "lr"), key=int)
        batches = [{k: torch.as_tensor(g[m][k][()]) for k in ("tokens", "positions", "targets", "cu_seqlens")}
                   for m in mbs]
        n_step = sum(int((b["targets"] >= 0).sum()) for b in batches)
        t_step = sum(int(b["tokens"].shape[0]) for b in batches)
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=rm.DTYPE)
        for b in batches:
            out = rm.forward(params, mc, b)
            w = b["tokens"].shape[0] / t_step
            total = total + out["token_losses"].sum() / n_step + w * (
                mc.router_aux_loss_coef * out["aux_loss"] + mc.router_z_loss_coef * out["z_loss"])
        total.backward()
        for p in plist:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        torch.nn.utils.clip_grad_norm_(plist, cfg["gradient_clipping"])
        lr = float(g["lr"][()])
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        ref, got = float(total), curve["records"][s - 1]["loss"]
        rel = abs(got - ref) / abs(ref)
        worst = max(worst, rel)
        print(f"  step {s:3d}: reference {ref:.12f}  curve {got:.12f}  rel diff {rel:.2e}  lr {lr:.3e}")
    ok = worst <= args.tol
    print(f"check_curve: worst relative difference {worst:.2e}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
