# Shared by the memory tests (sourced after lib.sh): plan memory beside
# train's start-up memory line and the run's peak RSS (docs/plan.md,
# "Memory"). `same NAME NP ARGS...` trains 1 step on NP ranks and checks that
# train's "memory bytes:" line equals `plan memory --world NP` field by
# field and that the peak RSS (the step records' ranks.rss_max_bytes) is
# within 10% of the plan's total plus the process baseline: what a rank
# holds beyond its model (the MPI library, the loader's corpus, code,
# stacks), measured by measure_baselines as the peak RSS of the same run
# with a 32-wide model minus the plan's total for it (about 35 MiB on
# Linux/MPICH). The run's output is $SCRATCH/NAME.out, its run directory
# $SCRATCH/NAME, the plan's JSON $SCRATCH/plan.json.
PY=${PYTHON:-python3}
COMMON="--set data.seq_len=64 --set train_micro_batch_size_per_gpu=2 --set data.max_tokens_per_batch=128"
BIG="--set model.hidden_size=384 --set model.intermediate_size=768"
MID="--set model.hidden_size=192 --set model.intermediate_size=384"
TINY="--set model.hidden_size=32 --set model.intermediate_size=64"

# plan NP ARGS...: plan memory --world NP as JSON into $SCRATCH/plan.json
plan() {
    np=$1; shift
    (cd "$FB_SRCDIR" && "$FABULA" plan memory --world "$np" --json $COMMON --set train_batch_size=$((2 * np)) "$@") \
        >"$SCRATCH/plan.json" 2>"$SCRATCH/plan.err"
}

# run NAME NP ARGS...: 1 step on NP ranks into $SCRATCH/NAME, status in $RC
run() {
    name=$1; np=$2; shift 2
    t0=$(date +%s)
    (cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n "$np" "$FABULA" train --steps 1 --run-dir "$SCRATCH/$name" \
        --set checkpoint.save_interval=-1 $COMMON --set train_batch_size=$((2 * np)) "$@") >"$SCRATCH/$name.out" 2>&1
    RC=$?
    echo "$name: $(($(date +%s) - t0)) s"
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}

# measure_baselines: BASE1, BASE2, BASE4, peak RSS minus the plan's total
# for the tiny model on 1, 2 and 4 ranks
measure_baselines() {
    for np in 1 2 4; do
        run base$np $np $TINY
        plan $np $TINY
        eval "BASE$np=$("$PY" - "$SCRATCH/base$np" "$SCRATCH/plan.json" <<'PYEOF'
import json, sys
rss = max(json.loads(l)["ranks"]["rss_max_bytes"] for l in open(sys.argv[1] + "/metrics.jsonl"))
p = json.load(open(sys.argv[2]))
print(rss - p["device_total"] - p["host_total"])
PYEOF
    )"
    done
    echo "process baseline (peak RSS - plan, 32-wide model): 1 rank $BASE1, 2 ranks $BASE2, 4 ranks $BASE4 bytes"
    check "process baseline measured, below 128 MiB" '[ "$BASE1" -gt 0 ] && [ "$BASE4" -lt 134217728 ]'
}

# same NAME NP ARGS...: train and plan agree on every field, RSS within 10%
same() {
    name=$1; np=$2; shift 2
    run "$name" "$np" "$@"
    plan "$np" "$@"
    eval "base=\$BASE$np"
    check "$name: plan memory equals train's memory bytes, peak RSS within 10% of plan + baseline" \
        '[ $RC -eq 0 ] && "$PY" - "$SCRATCH/$name.out" "$SCRATCH/$name" "$SCRATCH/plan.json" "$base" <<PYEOF
import json, re, sys
line = [l for l in open(sys.argv[1]) if "memory bytes:" in l][0]
got = dict(kv.split("=") for kv in line.split("memory bytes:")[1].split())
p = json.load(open(sys.argv[3]))
want = p["train_line"]
bad = [k for k in want if int(got[k]) != want[k]]
rss = max(json.loads(l)["ranks"]["rss_max_bytes"] for l in open(sys.argv[2] + "/metrics.jsonl"))
expect = p["device_total"] + p["host_total"] + int(sys.argv[4])
print("  train %s" % line.split("memory bytes:")[1].strip())
print("  plan  %s" % " ".join("%s=%d" % kv for kv in want.items()))
print("  peak RSS %d, plan total %d + baseline %s = %d (%+.1f%%)" % (rss, expect - int(sys.argv[4]),
      sys.argv[4], expect, 100.0 * (rss - expect) / expect))
if bad:
    print("  differ: %s" % bad)
sys.exit(1 if bad or abs(rss - expect) > 0.10 * expect else 0)
PYEOF'
}

