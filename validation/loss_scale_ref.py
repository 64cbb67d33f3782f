#!/usr/bin/env python3
"""Independent reference for fabula's fp16 loss scaler (src/zero/loss_scale.c).

A direct transcription of DeepSpeed's loss scaling, with no torch needed:

  * DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py),
    the scaler the ZeRO optimizers drive. Two versions of its raise rule
    exist; --rule picks one:
      current: stable_interval = (cur_iter - last_overflow_iter) - 1
               raise when stable_interval > 0 and stable_interval % window == 0
               (deepspeedai/DeepSpeed master, 2025)
      legacy:  raise when (cur_iter - last_overflow_iter) % window == 0
               (older releases)
    fabula implements "current"; "legacy" exists so that the e2e test can
    show the comparison is able to fail.
  * LossScaler, the static scaler (fp16.loss_scale > 0): a constant factor.
  * the engine's decision: with fp16 on, an overflowing step is skipped
    whatever the scaler (ZeRO's step() returns early on self.overflow); with
    fp16 off the factor is 1 and nothing is skipped.

raise_error_at_min_scale is DeepSpeed's abort when an overflow arrives with
the scale already at min_scale; fabula keeps skipping instead, which is
DeepSpeed's behaviour with raise_error_at_min_scale=False. This script
transcribes that flag too (--raise-at-min prints "raise" and stops).

Output (read by tests/unit/test_loss_scale.c), one line each:
  case NAME
  config enabled E loss_scale HEX initial_scale_power P loss_scale_window W
         hysteresis H consecutive_hysteresis C min_loss_scale HEX   (one line)
  step I OVERFLOW SKIP CUR_SCALE_HEX CUR_ITER LAST_OVERFLOW_ITER CUR_HYSTERESIS
  end N
State columns are the scaler after update I; for a static or disabled
scaler LAST_OVERFLOW_ITER and CUR_HYSTERESIS are "-" (DeepSpeed's
LossScaler has no such fields). Floats are printed with float.hex() so the
comparison is exact.

Overflow pattern (--pattern): comma-separated items, each "0" or "1"
optionally followed by "*COUNT", or "random:N:P:SEED" (N steps, each an
overflow with probability P, Python's random.Random(SEED)).
"""

import argparse
import random
import sys


class DynamicLossScaler:
    """DeepSpeed's DynamicLossScaler, state and update_scale only."""

    def __init__(self, init_scale, scale_window, min_scale, delayed_shift, consecutive_hysteresis,
                 raise_error_at_min_scale, rule):
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.delayed_shift = delayed_shift
        self.cur_hysteresis = delayed_shift
        self.consecutive_hysteresis = consecutive_hysteresis
        self.raise_error_at_min_scale = raise_error_at_min_scale
        self.rule = rule

    def update_scale(self, overflow):
        if overflow:
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                if (self.cur_scale == self.min_scale) and self.raise_error_at_min_scale:
                    raise RuntimeError("Current loss scale already at minimum - cannot decrease scale anymore.")
                self.cur_scale = max(self.cur_scale / self.scale_factor, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.delayed_shift
            if self.rule == "current":
                stable_interval = (self.cur_iter - self.last_overflow_iter) - 1
                raise_now = stable_interval > 0 and stable_interval % self.scale_window == 0
            else:
                raise_now = (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0
            if raise_now:
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1


class StaticLossScaler:
    """DeepSpeed's LossScaler plus the optimizers' cur_iter count."""

    def __init__(self, scale):
        self.cur_scale = scale
        self.cur_iter = 0

    def update_scale(self, overflow):
        self.cur_iter += 1


def parse_pattern(text):
    flags = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("random:"):
            _, n, p, seed = item.split(":")
            rng = random.Random(int(seed))
            flags.extend(1 if rng.random() < float(p) else 0 for _ in range(int(n)))
            continue
        value, _, count = item.partition("*")
        if value not in ("0", "1"):
            raise SystemExit(f"loss_scale_ref.py: bad pattern item {item!r}")
        flags.extend([int(value)] * (int(count) if count else 1))
    return flags


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True, help="name printed in the output")
    ap.add_argument("--enabled", type=int, default=1, help="fp16.enabled (0/1)")
    ap.add_argument("--loss-scale", type=float, default=0.0, help="fp16.loss_scale (0 = dynamic)")
    ap.add_argument("--initial-scale-power", type=int, default=16)
    ap.add_argument("--loss-scale-window", type=int, default=1000)
    ap.add_argument("--hysteresis", type=int, default=2)
    ap.add_argument("--consecutive-hysteresis", type=int, default=0)
    ap.add_argument("--min-loss-scale", type=float, default=1.0)
    ap.add_argument("--rule", choices=("current", "legacy"), default="current")
    ap.add_argument("--raise-at-min", action="store_true", help="DeepSpeed's raise_error_at_min_scale=True")
    ap.add_argument("--pattern", required=True)
    a = ap.parse_args()

    flags = parse_pattern(a.pattern)
    dynamic = a.enabled and a.loss_scale == 0.0
    if dynamic:
        # DeepSpeed's config turns initial_scale_power into init_scale = 2**power.
        s = DynamicLossScaler(float(2**a.initial_scale_power), a.loss_scale_window, a.min_loss_scale,
                              a.hysteresis, bool(a.consecutive_hysteresis), a.raise_at_min, a.rule)
    else:
        s = StaticLossScaler(a.loss_scale if a.enabled else 1.0)

    out = sys.stdout
    out.write(f"case {a.case}\n")
    out.write(f"config enabled {a.enabled} loss_scale {float(a.loss_scale).hex()} "
              f"initial_scale_power {a.initial_scale_power} loss_scale_window {a.loss_scale_window} "
              f"hysteresis {a.hysteresis} consecutive_hysteresis {a.consecutive_hysteresis} "
              f"min_loss_scale {float(a.min_loss_scale).hex()}\n")
    for i, overflow in enumerate(flags):
        try:
            s.update_scale(overflow)
        except RuntimeError:
            out.write(f"raise {i}\n")
            return
        skip = overflow if a.enabled else 0
        if dynamic:
            tail = f"{s.last_overflow_iter} {s.cur_hysteresis}"
        else:
            tail = "- -"
        out.write(f"step {i} {overflow} {skip} {float(s.cur_scale).hex()} {s.cur_iter} {tail}\n")
    out.write(f"end {len(flags)}\n")


if __name__ == "__main__":
    main()
