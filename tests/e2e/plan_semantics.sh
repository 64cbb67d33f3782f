#!/bin/sh
# fabula plan means what fabula train means (docs/plan.md; issue 43): the
# batch identity counts the layout's data-parallel ranks, as train's does
# (a); a global batch made from a per-GPU micro-batch is warned about, since
# it grows with --gpus (b); a layout's tokens= and accum= are the micro-batch
# and accumulation of plan memory, plan time and plan layout --compare alike
# (c); train's host-memory guard, sized by this machine, does not refuse a
# plan (d); ZeRO-3 runs under pipeline parallelism in the plan as in train
# (e); refusals name the key that fixes them (f); and the search of a 10T
# MoE on 1,024 GPUs takes under 30 s of CPU, its prunes dropping nothing
# that fits (g). Expected figures are DeepSpeed's rule, the model's shapes
# and train's own memory lines, restated here, not fabula plan's output.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}
export FABULA
M=inputs/machines/h200-8x-nvlink-ib.json
G=inputs/examples/gpt3-175b.json
CHECKER="$FB_SRCDIR/tests/e2e/plan_layout_check.py"
cd "$FB_SRCDIR" || exit 99

# jq_check FILE PYTHON-EXPR: the expression over d (the JSON of FILE) is true
jq_check() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):])
ok = eval(sys.argv[2])
if not ok:
    print("  got: " + json.dumps({k: v for k, v in d.items() if not isinstance(v, (dict, list))})[:600])
sys.exit(0 if ok else 1)
PYEOF
}

# ---- (a) the batch identity counts the layout's dp --------------------------
# GPT-3's batch, 1,536 sequences of 2,048 tokens, on dp 8 x tp 8 x pp 16:
# DeepSpeed's rule with train_batch_size alone gives accumulation 1 and
# 1536 / 8 = 192 sequences a micro-batch
TB=1536 L=2048
"$FABULA" plan time $G --layout dp=8,tp=8,pp=16 --set train_batch_size=$TB --machine $M --json \
    >"$SCRATCH/a1.json" 2>"$SCRATCH/a1.err"
rc=$?
check "(a) plan time: 1,536 sequences on dp 8 x tp 8 x pp 16 is a micro-batch of 192 sequences, one a step (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/a1.json" "d[\"tokens\"] == $TB * $L and d[\"microbatches_per_rank\"] == 1 and d[\"tokens_per_microbatch\"] == $TB // 8 * $L"'
"$FABULA" plan memory $G --layout dp=8,tp=8,pp=16 --set train_batch_size=$TB --json >"$SCRATCH/a2.json" 2>"$SCRATCH/a2.err"
rc=$?
check "(a) plan memory: the same micro-batch, 192 x 2,048 tokens, accumulation 1 (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/a2.json" "d[\"micro_batch_tokens\"] == $TB // 8 * $L and d[\"grad_accum\"] == 1"'
"$FABULA" plan layout --gpus 1024 --machine $M --set train_batch_size=$TB --top 3 --json $G \
    >"$SCRATCH/a3.json" 2>"$SCRATCH/a3.err"
rc=$?
check "(a) plan layout --gpus 1024 plans 1,536 sequences a step on every layout (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/a3.json" "d[\"global_batch_tokens\"] == $TB * $L and all(l[\"dp\"] * l[\"grad_accum\"] * l[\"micro_batch_tokens\"] == $TB * $L for l in d[\"layouts\"])"'
# the default model: dp 2 x tp 2 counts 2 data-parallel ranks, 6 / 2 = 3 sequences a micro-batch
"$FABULA" plan memory --layout dp=2,tp=2 --set data.seq_len=64 --set train_batch_size=6 --json \
    >"$SCRATCH/a4.json" 2>"$SCRATCH/a4.err"
rc=$?
check "(a) plan memory --layout dp=2,tp=2 with train_batch_size 6: 3 x 64 tokens a micro-batch (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/a4.json" "d[\"micro_batch_tokens\"] == 3 * 64 and d[\"grad_accum\"] == 1"'

# ---- (b) a batch that grows with --gpus is warned about ---------------------
cat >"$SCRATCH/model.json" <<'JSON'
{"model": {"vocab_size": 8192, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 8, "num_local_experts": 0, "num_experts_per_tok": 1},
 "data": {"seq_len": 256}, "zero_optimization": {"stage": 1}}
JSON
machine() { # machine FILE DEVICE_BYTES
    cat >"$1" <<JSON
{"format": "fabula-machine-1", "name": "test-$2",
 "devices_per_node": {"value": 8, "source": "test"},
 "flops": {"value": 1e14, "source": "test"},
 "device_memory": {"value": $2, "source": "test"},
 "host_memory": {"value": 1e12, "source": "test"},
 "host_link_bandwidth": {"value": 2e10, "source": "test"},
 "intra": {"latency_s": {"value": 1e-5, "source": "test"}, "bandwidth": {"value": 1e11, "source": "test"}},
 "inter": {"latency_s": {"value": 2e-5, "source": "test"}, "bandwidth": {"value": 1e10, "source": "test"}}}
JSON
}
machine "$SCRATCH/m.json" 5e9
"$FABULA" plan layout --gpus 16 --machine "$SCRATCH/m.json" --set train_micro_batch_size_per_gpu=2 --top 1 --json \
    "$SCRATCH/model.json" >"$SCRATCH/b1.json" 2>"$SCRATCH/b1.err"
rc=$?
cat "$SCRATCH/b1.err"
check "(b) micro-batch 2 on 16 GPUs: the batch is 2 x 16 x 256 tokens and one stderr line warns, naming --global-batch-tokens" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/b1.json" "d[\"global_batch_tokens\"] == 2 * 16 * 256" &&
     [ "$(grep -c "warning: .*--global-batch-tokens" "$SCRATCH/b1.err")" -eq 1 ]'
for given in "--global-batch-tokens 16384" "--set train_batch_size=64"; do
    "$FABULA" plan layout --gpus 16 --machine "$SCRATCH/m.json" --set train_micro_batch_size_per_gpu=2 --top 1 \
        $given "$SCRATCH/model.json" >"$SCRATCH/b2.txt" 2>"$SCRATCH/b2.err"
    rc=$?
    check "(b) with $given: no warning (exit $rc)" '[ $rc -eq 0 ] && ! grep -q "warning: .*global-batch" "$SCRATCH/b2.err"'
done

# ---- (c) tokens= and accum= of a layout --------------------------------------
# the default model, 8 sequences of 64 tokens: 512 tokens a step on dp 1
S="--set data.seq_len=64 --set train_batch_size=8"
"$FABULA" plan time $S --layout dp=1,tokens=256 --machine $M --json >"$SCRATCH/c1.json" 2>"$SCRATCH/c1.err"
rc=$?
check "(c) plan time tokens=256: micro-batches of 256 tokens, 512 / 256 = 2 a step, 512 tokens (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/c1.json" "d[\"tokens_per_microbatch\"] == 256 and d[\"microbatches_per_rank\"] == 2 and d[\"tokens\"] == 512"'
"$FABULA" plan memory $S --layout dp=1,tokens=256 --json >"$SCRATCH/c2.json" 2>"$SCRATCH/c2.err"
rc=$?
check "(c) plan memory tokens=256: the same micro-batch and accumulation 2 (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/c2.json" "d[\"micro_batch_tokens\"] == 256 and d[\"grad_accum\"] == 2"'
echo '{}' >"$SCRATCH/empty.json"
"$FABULA" plan layout --gpus 1 --machine $M $S --compare dp=1,tokens=256 --json "$SCRATCH/empty.json" \
    >"$SCRATCH/c3.json" 2>"$SCRATCH/c3.err"
rc=$?
check "(c) plan layout --compare dp=1,tokens=256: the same accumulation (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/c3.json" "d[\"compare\"][\"candidate\"][\"micro_batch_tokens\"] == 256 and d[\"compare\"][\"candidate\"][\"grad_accum\"] == 2"'
"$FABULA" plan time $S --layout dp=1,accum=4 --machine $M --json >"$SCRATCH/c4.json" 2>/dev/null
rc1=$?
"$FABULA" plan memory $S --layout dp=1,accum=4 --json >"$SCRATCH/c5.json" 2>/dev/null
rc2=$?
check "(c) accum=4 alone: 512 / 4 = 128 tokens a micro-batch in plan time and plan memory" \
    '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && jq_check "$SCRATCH/c4.json" "d[\"tokens_per_microbatch\"] == 128 and d[\"microbatches_per_rank\"] == 4" &&
     jq_check "$SCRATCH/c5.json" "d[\"micro_batch_tokens\"] == 128 and d[\"grad_accum\"] == 4"'
"$FABULA" plan time $G --layout dp=8,tp=8,pp=16,tokens=4096 --set train_batch_size=$TB --machine $M --json \
    >"$SCRATCH/c6.json" 2>/dev/null
rc=$?
check "(c) GPT-3, tokens=4096 on dp 8: 1,536 x 2,048 / (8 x 4,096) = 96 micro-batches, the batch kept (exit $rc)" \
    '[ $rc -eq 0 ] && jq_check "$SCRATCH/c6.json" "d[\"microbatches_per_rank\"] == $TB * $L // (8 * 4096) and d[\"tokens\"] == $TB * $L"'

# ---- (d) train's guard of this machine's memory is not the plan's ------------
"$FABULA" plan memory --world 1 $G --json >"$SCRATCH/d1.json" 2>"$SCRATCH/d1.err"
rc=$?
cat "$SCRATCH/d1.err" | grep -v "^fabula: note"
check "(d) plan memory --world 1 of GPT-3 175B: planned, its fp32 weights 4 bytes x the model's parameters (exit $rc)" \
    '[ $rc -eq 0 ] && PYTHONPATH="$FB_SRCDIR/tests/e2e" jq_check "$SCRATCH/d1.json" "d[\"params\"] == 4 * __import__(\"plan_deepspeed_ref\").model_shapes(json.load(open(\"$G\"))[\"model\"])[0]"'
"$FABULA" plan time --world 2 $G --machine $M --json >/dev/null 2>"$SCRATCH/d2.err"
rc=$?
check "(d) plan time --world 2 of GPT-3 175B: planned (exit $rc)" '[ $rc -eq 0 ]'

# ---- (e) ZeRO-3 under pipeline parallelism -----------------------------------
"$FABULA" plan memory --layout dp=1,pp=2,zero=3 >"$SCRATCH/e1.txt" 2>&1
rc=$?
check "(e) plan memory --layout dp=1,pp=2,zero=3: planned (exit $rc)" '[ $rc -eq 0 ] && grep -q "memory bytes stage 1:" "$SCRATCH/e1.txt"'
# train on 2 ranks, pp 2 at ZeRO 3: its stage lines are what the plan says
MID="--set model.hidden_size=192 --set model.intermediate_size=384 --set model.num_hidden_layers=4"
PPZ3="--set parallel.pipeline_parallel_size=2 --set zero_optimization.stage=3 --set data.seq_len=64 \
      --set train_micro_batch_size_per_gpu=2 --set data.max_tokens_per_batch=128 --set train_batch_size=4"
(timeout 300 $MPIEXEC -n 2 "$FABULA" train --steps 1 --run-dir "$SCRATCH/e2" --set checkpoint.save_interval=-1 \
    --set 'run.resume="none"' $MID $PPZ3) >"$SCRATCH/e2.out" 2>&1
rc=$?
"$FABULA" plan memory --world 2 --json $MID $PPZ3 >"$SCRATCH/e2.json" 2>"$SCRATCH/e2.err"
prc=$?
check "(e) pp 2 at ZeRO 3 on 2 ranks: plan memory's stage lines equal train's (exit $rc, plan $prc)" \
    '[ $rc -eq 0 ] && [ $prc -eq 0 ] && "$PY" - "$SCRATCH/e2.out" "$SCRATCH/e2.json" <<PYEOF
import json, sys
lines = [l.split("memory bytes stage ")[1] for l in open(sys.argv[1]) if "memory bytes stage " in l]
got = {int(l.split(":")[0]): dict(kv.split("=") for kv in l.split(":")[1].split()) for l in lines}
p = json.load(open(sys.argv[2]))
ok = len(p["stage_lines"]) == 2 == len(got)
for st in p["stage_lines"]:
    s = st["stage"]
    bad = [k for k in ("params", "grads", "optimizer", "workspace", "activations") if int(got[s][k]) != st[k]]
    print("  stage %d: train %s%s" % (s, " ".join("%s=%s" % kv for kv in got[s].items()), " differ: %s" % bad if bad else ""))
    ok = ok and not bad
sys.exit(0 if ok else 1)
PYEOF'
sed 's/"stage": 1/"stage": 3/' "$SCRATCH/model.json" >"$SCRATCH/model3.json"
machine "$SCRATCH/m8.json" 8e8
"$FABULA" plan layout --gpus 4 --machine "$SCRATCH/m8.json" --global-batch-tokens 16384 --keep-zero --top 100 --json \
    "$SCRATCH/model3.json" >"$SCRATCH/e3.json" 2>"$SCRATCH/e3.err"
rc=$?
$PY "$CHECKER" search "$SCRATCH/e3.json" "$SCRATCH/m8.json" "$SCRATCH/model3.json" 4 16384 0.1 >"$SCRATCH/e3.txt" 2>&1
crc=$?
sed 's/^/  /' "$SCRATCH/e3.txt"
check "(e) plan layout at ZeRO 3 searches pp > 1, as the brute force over plan memory (exit $rc, check $crc)" \
    '[ $rc -eq 0 ] && [ $crc -eq 0 ] && jq_check "$SCRATCH/e3.json" "any(l[\"pp\"] > 1 and l[\"zero\"] == 3 for l in d[\"layouts\"])"'

# ---- (f) refusals name the key -----------------------------------------------
"$FABULA" plan memory $G --layout dp=7 --set train_batch_size=$TB >"$SCRATCH/f1.txt" 2>&1
rc=$?
check "(f) 1,536 sequences on dp 7: exit 2 naming train_batch_size and the 7 data-parallel ranks" \
    '[ $rc -eq 2 ] && grep -q "train_batch_size (1536) must be a multiple of the data-parallel ranks (7)" "$SCRATCH/f1.txt"'
"$FABULA" plan time $S --layout dp=1,tokens=192 --machine $M >"$SCRATCH/f2.txt" 2>&1
rc=$?
check "(f) tokens=192 does not divide 512 tokens a step: exit 2 naming train_batch_size" \
    '[ $rc -eq 2 ] && grep -q "tokens 192 does not divide the global batch of 512 tokens (train_batch_size 8" "$SCRATCH/f2.txt"'
"$FABULA" plan memory $S --layout dp=1,tokens=32,accum=1 >"$SCRATCH/f3.txt" 2>&1
rc=$?
check "(f) tokens=32 below a sample: exit 2 naming data.seq_len" \
    '[ $rc -eq 2 ] && grep -q "tokens = 32: a micro-batch holds at least one sample of data.seq_len = 64" "$SCRATCH/f3.txt"'
"$FABULA" plan memory --world 1 $G >"$SCRATCH/f4.txt" 2>&1
rc=$?
check "(f) GPT-3 on one rank: no refusal naming model.vocab_size (exit $rc)" \
    '[ $rc -eq 0 ] && ! grep -q "model.vocab_size" "$SCRATCH/f4.txt"'

# ---- (g) the search's prunes: nothing that fits dropped ------------------------
# (their speed is measured by bench/plan_layout_examples.sh, not asserted here:
# CPU seconds on a shared machine are no test)
T10=inputs/examples/moe-10t.json
"$PY" - "$FABULA" "$M" "$T10" >"$SCRATCH/g1.txt" 2>&1 <<'PYEOF'
import resource, subprocess, sys
fabula, machine, cfg = sys.argv[1:4]
p = subprocess.run([fabula, "plan", "layout", "--gpus", "1024", "--machine", machine, "--global-batch-tokens",
                    "16777216", cfg], capture_output=True, text=True, timeout=600)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r.ru_utime + r.ru_stime
print("  exit %d, %.1f s of CPU (not checked)" % (p.returncode, cpu))
sys.exit(0 if p.returncode == 0 and "\n   1 " in p.stdout else 1)
PYEOF
rc=$?
cat "$SCRATCH/g1.txt"
check "(g) plan layout of the 10T MoE on 1,024 GPUs: a best layout" '[ $rc -eq 0 ]'
"$FABULA" plan memory --world 1024 --json --set zero_optimization.stage=0 $T10 >"$SCRATCH/g2.json" 2>/dev/null
check "(g) the 10T example holds 9,955,938,680,832 parameters (the model's shapes; ZeRO-0: the whole fp32 master)" \
    'PYTHONPATH="$FB_SRCDIR/tests/e2e" jq_check "$SCRATCH/g2.json" "d[\"params\"] == 4 * __import__(\"plan_deepspeed_ref\").model_shapes(json.load(open(\"$T10\"))[\"model\"])[0] == 4 * 9955938680832"'
# every ZeRO stage and offload, 16-bit weights (cpu16), a small device: the
# prunes by weight copy and activations and by offload skip most states
machine "$SCRATCH/m3.json" 2.5e8
"$FABULA" plan layout --gpus 4 --machine "$SCRATCH/m3.json" --global-batch-tokens 16384 --top 100 --json \
    --set run.backend=cpu16 "$SCRATCH/model.json" >"$SCRATCH/g3.json" 2>"$SCRATCH/g3.err"
rc=$?
FB_CHECK_STATES=all FB_CHECK_SETS=run.backend=cpu16 $PY "$CHECKER" search "$SCRATCH/g3.json" "$SCRATCH/m3.json" \
    "$SCRATCH/model.json" 4 16384 0.1 >"$SCRATCH/g3.txt" 2>&1
crc=$?
sed 's/^/  /' "$SCRATCH/g3.txt"
check "(g) every ZeRO stage and offload: the search keeps what the brute force keeps (exit $rc, check $crc)" \
    '[ $rc -eq 0 ] && [ $crc -eq 0 ]'
# ---- every pipeline stage fits on its own ----------------------------------
# pp 2, ZeRO-1 with the optimizer offloaded, a 512-token vocabulary: stage 0
# has the most device bytes and the most of both, stage 1 16 KiB more host
# bytes (its head and norm). A host memory between the two stages' figures
# must refuse the layout: the fit was checked on the fullest stage's figures
# alone, so this one was said to fit.
"$FABULA" plan memory --json --layout dp=1,tp=1,pp=2,zero=1,offload=optimizer,tokens=256,accum=4,recompute=none \
    --set run.backend=cpu16 --set model.vocab_size=512 "$SCRATCH/model.json" >"$SCRATCH/h1.json" 2>"$SCRATCH/h1.err"
hosts=$("$PY" -c 'import json, sys; s = json.load(open(sys.argv[1]))["stage_lines"]; print(s[0]["host_total"], s[1]["host_total"], int(s[0]["device_total"] > s[1]["device_total"]))' "$SCRATCH/h1.json")
h0=${hosts%% *}; rest=${hosts#* }; h1=${rest%% *}; d0=${rest#* }
cat >"$SCRATCH/mh.json" <<JSON
{"format": "fabula-machine-1", "name": "test-host-between-stages",
 "devices_per_node": {"value": 8, "source": "test"},
 "flops": {"value": 1e14, "source": "test"},
 "device_memory": {"value": 1e10, "source": "test"},
 "host_memory": {"value": $((8 * (h0 + h1) / 2)), "source": "test"},
 "host_link_bandwidth": {"value": 2e10, "source": "test"},
 "intra": {"latency_s": {"value": 1e-5, "source": "test"}, "bandwidth": {"value": 1e11, "source": "test"}},
 "inter": {"latency_s": {"value": 2e-5, "source": "test"}, "bandwidth": {"value": 1e10, "source": "test"}}}
JSON
"$FABULA" plan layout --gpus 2 --machine "$SCRATCH/mh.json" --global-batch-tokens 1024 --set run.backend=cpu16 \
    --set model.vocab_size=512 --compare dp=1,tp=1,pp=2,zero=1,offload=optimizer,tokens=256,accum=4,recompute=none \
    "$SCRATCH/model.json" >"$SCRATCH/h2.txt" 2>&1
rc=$?
grep "^cmp" "$SCRATCH/h2.txt"
check "(h) stage 1's host bytes ($h1) over the host memory a device gets, stage 0's ($h0, with more device bytes) under: refused" \
    '[ $rc -eq 0 ] && [ "$h0" -lt "$h1" ] && [ "$d0" = 1 ] && grep -q "^cmp (.*) does not fit: .* of host memory per device" "$SCRATCH/h2.txt"'
finish
