#!/bin/sh
# Per-GPU model-state memory: fabula's plan memory beside DeepSpeed's
# estimators and the ZeRO paper, for Llama 7B, GPT-3 175B and a 355B MoE at
# 8, 64 and 1024 GPUs x ZeRO 1/2/3 x offload none/optimizer/both
# (bench/zero_memory.py has the columns; docs/zero.md the reading).
#
#   bench/zero_memory.sh [OUT.md]
#
# DeepSpeed's own estimator functions are called when the venv named by
# $DS_VENV (default bench/.venv-deepspeed, ignored by git) imports it; make it
# with
#   /usr/bin/python3 -m venv --system-site-packages bench/.venv-deepspeed   # Debian's, with its torch
#   bench/.venv-deepspeed/bin/pip install wheel setuptools hjson py-cpuinfo pydantic msgpack ninja einops tqdm psutil packaging
#   DS_BUILD_OPS=0 bench/.venv-deepspeed/bin/pip install --no-build-isolation --no-deps deepspeed==0.19.8
# Without it the formulas restated in tests/e2e/plan_deepspeed_ref.py are used
# and the table says so. No computation is timed: the figures are arithmetic
# on the configs, so any machine gives the same table.
set -eu
cd "$(dirname "$0")/.."
[ -x ./fabula ] || { echo "zero_memory.sh: build fabula first (make)" >&2; exit 2; }
PY=python3
venv=${DS_VENV:-bench/.venv-deepspeed}
[ -x "$venv/bin/python3" ] && PY="$venv/bin/python3"
out=${1:-/dev/stdout}
{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown);" \
         "machine: $(uname -n) (arithmetic only); command: bench/zero_memory.sh"
    echo
    "$PY" bench/zero_memory.py
} >"$out"
