# Shared by hf_init_from.sh and hf_init_from_mp.sh (sourced after lib.sh,
# in $SCRATCH, with corpus.h5 prepared from m/tokenizer.json).

# train NP NAME DIR STEPS ARGS...: NAME.json imports m/DIR (init_from) and
# trains STEPS steps on NP ranks into run dir NAME; RC is the exit code.
train() {
    np=$1; name=$2; dir=$3; steps=$4; shift 4
    printf '{"model": {"init_from": "m/%s"}, "data": {"corpus": "corpus.h5", "tokenizer": "m/tokenizer.json", "seq_len": 64, "overlap": 8, "min_seq_len": 16}, "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "checkpoint": {"save_interval": -1}}\n' "$dir" >"$name.json"
    timeout 300 $MPIEXEC -n "$np" "$FABULA" train --steps "$steps" --run-dir "$name" "$@" "$name.json" >"$name.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 15 "$name.out"; }
}

# same_losses RUN_A RUN_B: both ran 10 steps with losses within 1e-5 relative.
same_losses() {
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PYEOF'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
bad = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if abs(x - y) > 1e-5 * abs(x)]
print(bad[:3])
sys.exit(0 if len(a) == len(b) == 10 and not bad else 1)
PYEOF
}
