#!/bin/sh
# A config.json saved by transformers (tests/data/hf_configs, made by its
# make_configs.py) is the "model" section as it comes: {"model": "PATH"}.
# The sizes and the RoPE base are the file's, a Llama is dense, a Mixtral
# routes as transformers' does; a key that changes the function computed is
# refused naming it and its value, all in one run (docs/model.md).
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
# the dry run opens the training data as the run would (its pre-flight)
DATA="$FB_SRCDIR/inputs/sample.jsonl"
HF="$FB_SRCDIR/tests/data/hf_configs"
RD="$SCRATCH/rundir"
PY=${PYTHON:-python3}

dry() {
    printf '{"model": "%s"}\n' "$1" >"$SCRATCH/cfg.json"
    shift
    timeout 120 $MPIEXEC -n 1 "$FABULA" train --dry-run --set "run.run_dir=$RD" --set "data.train=$DATA" "$@" \
        "$SCRATCH/cfg.json" \
        >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
    RC=$?
}

# The model section of the effective config against the file, read with
# Python's json: every key fabula names alike equal, the architecture's rules.
agrees() {
    sed -n '/^fabula: effective config:/,$p' "$SCRATCH/out.txt" | sed 1d >"$SCRATCH/eff.json"
    "$PY" - "$1" "$SCRATCH/eff.json" <<'PYEOF'
import json, sys
hf = json.load(open(sys.argv[1]))
m = json.load(open(sys.argv[2]))["model"]
same = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
        "initializer_range", "num_local_experts", "num_experts_per_tok"]
bad = [k for k in same if k in hf and m[k] != hf[k]]
rope = hf.get("rope_parameters") or {"rope_theta": hf["rope_theta"]}  # transformers 5 / 4
if m["rope_theta"] != rope["rope_theta"]:
    bad.append("rope_theta")
if hf["model_type"] == "llama" and m["num_local_experts"] != 0:
    bad.append("dense llama")
if hf["model_type"] == "mixtral":
    aux = hf["router_aux_loss_coef"] if hf["output_router_logits"] else 0.0
    if (m["capacity_factor"], m["router_z_loss_coef"], m["router_aux_loss_coef"]) != (0.0, 0.0, aux):
        bad.append("mixtral routing")
print(" ".join(bad))
sys.exit(1 if bad else 0)
PYEOF
}

for f in llama_default mixtral_default llama_small mixtral_small llama_default_v4 mixtral_default_v4 llama_small_v4; do
    dry "$HF/$f.json"
    check "$f: loads as the model section, exit 0, no warning" '[ $RC -eq 0 ] && ! grep -q warning "$SCRATCH/err.txt"'
    [ "$RC" -eq 0 ] || sed 's/^/  /' "$SCRATCH/err.txt"
    check "$f: the effective model is the file's" 'agrees "$HF/$f.json"'
    check "$f: bookkeeping keys in the no-effect note" \
        'grep -q "note: accepted without effect.*model.transformers_version" "$SCRATCH/err.txt"'
done

# A relative path is relative to the config file naming it.
mkdir -p "$SCRATCH/sub/hf"
cp "$HF/mixtral_small.json" "$SCRATCH/sub/hf/config.json"
printf '{"model": "hf/config.json"}\n' >"$SCRATCH/sub/run.json"
timeout 120 $MPIEXEC -n 1 "$FABULA" train --dry-run --set "run.run_dir=$RD" --set "data.train=$DATA" "$SCRATCH/sub/run.json" \
    >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
RC=$?
check "relative model path: read next to the config file" '[ $RC -eq 0 ] && agrees "$HF/mixtral_small.json"'

# It trains: two steps of the small Mixtral and the small (tied) Llama (in
# a run directory of their own: the dry runs below would resume from them).
TD="$SCRATCH/trained"
for f in mixtral_small llama_small; do
    printf '{"model": "%s"}\n' "$HF/$f.json" >"$SCRATCH/cfg.json"
    rm -rf "$TD"
    (cd "$FB_SRCDIR" && timeout 300 $MPIEXEC -n 1 "$FABULA" train --steps 2 --set "run.run_dir=$TD" \
        --set data.seq_len=64 --set data.min_seq_len=16 "$SCRATCH/cfg.json") >"$SCRATCH/out.txt" 2>&1
    RC=$?
    check "$f: trains 2 steps" '[ $RC -eq 0 ] && [ "$(wc -l <"$TD/metrics.jsonl")" -ge 2 ]'
    [ "$RC" -eq 0 ] || tail -5 "$SCRATCH/out.txt"
done

# Keys that change the function, each at a value fabula does not compute:
# all refused in one run, each named with its value.
dry "$HF/llama_changed.json"
check "llama_changed: exit 2" '[ $RC -eq 2 ]'
for kv in "model.hidden_act' = \"gelu\"" "model.attention_bias' = true" "model.mlp_bias' = true" \
    "model.attention_dropout' = 0.1" "model.head_dim' = 32" "model.rope_parameters.rope_type' = \"linear\""; do
    check "llama_changed: refuses '$kv" 'grep -qF "config key '"'"'$kv" "$SCRATCH/err.txt"'
done
dry "$HF/llama_changed_v4.json"
check "llama_changed_v4: linear rope_scaling refused, named" \
    '[ $RC -eq 2 ] && grep -qF "model.rope_scaling.rope_type'"'"' = \"linear\"" "$SCRATCH/err.txt"'
dry "$HF/mixtral_changed.json"
check "mixtral_changed: exit 2 naming sliding_window and router_jitter_noise" \
    '[ $RC -eq 2 ] && grep -qF "model.sliding_window'"'"' = 64" "$SCRATCH/err.txt" && grep -qF "model.router_jitter_noise'"'"' = 0.1" "$SCRATCH/err.txt"'

# The values fabula computes are accepted when written out.
dry "$HF/llama_small.json" --set model.hidden_act=swish --set model.sliding_window=4096 --set model.head_dim=16 \
    --set 'model.rope_scaling={"rope_type":"default"}'
check "equal values accepted (swish, a window >= max positions, head_dim = D/H, default rope_scaling)" \
    '[ $RC -eq 0 ] && ! grep -q warning "$SCRATCH/err.txt"'
[ "$RC" -eq 0 ] || sed 's/^/  /' "$SCRATCH/err.txt"
dry "$HF/llama_small.json" --set model.model_type=qwen2
check "another model_type: exit 2 naming it" '[ $RC -eq 2 ] && grep -q "model.model_type" "$SCRATCH/err.txt"'
dry "$HF/llama_small.json" --set model.rope_theta=500
check "rope_theta and rope_parameters.rope_theta disagreeing: exit 2" \
    '[ $RC -eq 2 ] && grep -q "model.rope_parameters.rope_theta" "$SCRATCH/err.txt"'
finish
