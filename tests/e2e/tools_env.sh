#!/bin/sh
# The documented commands of the environment tools/install-deps.sh makes
# (issue 46): `tensorboard --logdir RUN_DIR/tensorboard` starts and serves a
# run's scalars, every one in a section (docs/monitoring.md); a plain
# transformers `model.generate()` runs in $HF_PYTHON (/opt/fabula-hf) on
# Debian's torch 1.13 (tools/hf-env/fabula_hf_compat.py). Each part skips
# where its package is not installed; the whole test skips (77) when
# neither is.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
HF_PY=${HF_PYTHON:-/opt/fabula-hf/bin/python}
ran=0

if "$PY" -c 'import tensorboard' >/dev/null 2>&1; then
    ran=1
    R="$SCRATCH/run"
    run_fabula 1 train --steps 2 --run-dir "$R" --set tensorboard.enabled=true --set checkpoint.save_interval=-1
    check "a run with TensorBoard files (exit $RC)" '[ $RC -eq 0 ]'
    # the server the docs start, on a free port of the loopback; its scalar
    # tags through its own HTTP API, polled while it loads the files
    "$PY" - "$R/tensorboard" >"$SCRATCH/serve.txt" 2>&1 <<'PYEOF'
import json, socket, subprocess, sys, time, urllib.request
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
p = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", sys.argv[1], "--host", "127.0.0.1",
                      "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
tags, deadline = {}, time.time() + 90
try:
    while time.time() < deadline and p.poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/data/plugin/scalars/tags" % port, timeout=5) as r:
                tags = json.load(r)
            if any(tags.values()):
                break
        except OSError:
            pass
        time.sleep(0.5)
finally:
    alive = p.poll() is None
    p.terminate()
    out = p.communicate(timeout=30)[0].decode(errors="replace")
names = sorted(t for run in tags.values() for t in run)
print("server alive: %s; runs %s; %d scalar tags, e.g. %s" % (alive, sorted(tags), len(names), names[:4]))
if not alive:
    print(out[-2000:])
ungrouped = [t for t in names if "/" not in t]
print("ungrouped: %s" % ungrouped)
sys.exit(0 if alive and "loss/loss" in names and "optimizer/lr" in names and not ungrouped else 1)
PYEOF
    rc=$?
    sed 's/^/  | /' "$SCRATCH/serve.txt" | tail -n 12
    check "tensorboard --logdir serves the run's scalars, each in a section" '[ $rc -eq 0 ]'
else
    echo "SKIP part: no tensorboard in $PY (tools/install-deps.sh installs it)"
fi

if [ -x "$HF_PY" ] && "$HF_PY" -c 'import transformers, torch' >/dev/null 2>&1; then
    ran=1
    # what a user writes after `fabula export`, on a tiny Llama: no
    # workaround in the script itself
    "$HF_PY" - >"$SCRATCH/generate.txt" 2>&1 <<'PYEOF'
import torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)
model = LlamaForCausalLM(cfg).eval()
x = torch.tensor([[1, 2, 3]])
y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=5, do_sample=False, pad_token_id=0)
print("generated", y[0, 3:].tolist())
PYEOF
    rc=$?
    tail -n 3 "$SCRATCH/generate.txt" | sed 's/^/  | /'
    check "transformers' generate() runs in $HF_PY" '[ $rc -eq 0 ] && grep -q "^generated \[" "$SCRATCH/generate.txt"'
else
    echo "SKIP part: no transformers in $HF_PY (tools/install-deps.sh makes /opt/fabula-hf)"
fi
[ "$ran" -eq 1 ] || exit 77
finish
