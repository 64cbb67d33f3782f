#!/bin/sh
# fabula plan layout (docs/plan.md "Layout search"): the search's answer on a
# small case against a brute force over `fabula plan memory`, its ranking,
# a 10,000-rank search, "nothing fits", bad flags; and fabula's model states
# against DeepSpeed's byte counts where the definitions agree
# (tests/e2e/plan_layout_check.py, plan_deepspeed_ref.py).
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
CHECKER="$FB_SRCDIR/tests/e2e/plan_layout_check.py"
export FABULA

# a machine of 8 devices a node with little memory, so that the search drops layouts
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
machine "$SCRATCH/m.json" 5e8
machine "$SCRATCH/tiny.json" 1e6
cat >"$SCRATCH/model.json" <<'JSON'
{"model": {"vocab_size": 8192, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 8, "num_local_experts": 0, "num_experts_per_tok": 1},
 "data": {"seq_len": 256}, "zero_optimization": {"stage": 1}}
JSON
GBT=16384

cd "$FB_SRCDIR" || exit 99
"$FABULA" plan layout --gpus 4 --machine "$SCRATCH/m.json" --global-batch-tokens $GBT --keep-zero --top 100 \
    --json "$SCRATCH/model.json" >"$SCRATCH/search.json" 2>"$SCRATCH/search.err"
RC=$?
check "plan layout on 4 ranks exits 0 (exit $RC)" '[ $RC -eq 0 ]'
$PY "$CHECKER" search "$SCRATCH/search.json" "$SCRATCH/m.json" "$SCRATCH/model.json" 4 $GBT 0.1 \
    >"$SCRATCH/check.txt" 2>&1
RC=$?
sed 's/^/  /' "$SCRATCH/check.txt"
check "the search agrees with the brute force (exit $RC)" '[ $RC -eq 0 ]'
grep -q '"stats": {"evaluated": [0-9]*, "invalid": [0-9]*, "batch": [0-9]*, "device": [1-9]' "$SCRATCH/search.json"
RC=$?
check "the small machine drops some layouts for device memory" '[ $RC -eq 0 ]'

# one memory for device and host (no host link, the CPU machine): offloaded bytes count against it too
grep -v host_link_bandwidth "$SCRATCH/m.json" | sed "s/5e8/7e8/" >"$SCRATCH/one.json"
"$FABULA" plan layout --gpus 4 --machine "$SCRATCH/one.json" --global-batch-tokens $GBT --keep-zero --top 100 \
    --set zero_optimization.offload_optimizer.device=cpu --json "$SCRATCH/model.json" >"$SCRATCH/one_search.json" \
    2>"$SCRATCH/one.err"
RC=$?
check "plan layout with offload on one memory exits 0 (exit $RC)" '[ $RC -eq 0 ]'
FB_CHECK_SETS=zero_optimization.offload_optimizer.device=cpu $PY "$CHECKER" search "$SCRATCH/one_search.json" \
    "$SCRATCH/one.json" "$SCRATCH/model.json" 4 $GBT 0.1 >"$SCRATCH/check_one.txt" 2>&1
RC=$?
sed 's/^/  /' "$SCRATCH/check_one.txt"
check "one memory: the search agrees with the brute force, device + host against the device (exit $RC)" '[ $RC -eq 0 ]'

"$FABULA" plan layout --gpus 8 --machine "$SCRATCH/m.json" --global-batch-tokens $GBT "$SCRATCH/model.json" \
    --compare dp=8,tp=1,pp=1,zero=1,tokens=256 >"$SCRATCH/table.txt" 2>&1
RC=$?
check "the table exits 0 and explains #1 against #2 and the compared layout" \
    '[ $RC -eq 0 ] && grep -q "^#1 beats #2\|^#1 and #2" "$SCRATCH/table.txt" &&
     grep -q "^cmp (dp=8,tp=1,pp=1" "$SCRATCH/table.txt"'
ROWS=$(grep -c '^ *[0-9][0-9]* ' "$SCRATCH/table.txt")
check "the table prints 10 layouts by default ($ROWS)" '[ $ROWS -eq 10 ]'

# 10,000 ranks of the GPT-3 example: the walk stays small
start=$(date +%s)
timeout 60 "$FABULA" plan layout --gpus 10000 --machine inputs/machines/h200-8x-nvlink-ib.json \
    --global-batch-tokens 40960000 inputs/examples/gpt3-175b.json >"$SCRATCH/n10000.txt" 2>&1
RC=$?
secs=$(( $(date +%s) - start ))
check "10,000 ranks: exit 0 in ${secs}s (under 30 s), a best layout printed" \
    '[ $RC -eq 0 ] && [ $secs -lt 30 ] && grep -q "^   1 " "$SCRATCH/n10000.txt"'

"$FABULA" plan layout --gpus 8 --machine "$SCRATCH/tiny.json" --global-batch-tokens $GBT "$SCRATCH/model.json" \
    >"$SCRATCH/none.txt" 2>&1
RC=$?
check "nothing fits: exit 2 and the reason counted" \
    '[ $RC -eq 2 ] && grep -q "no layout of 8 ranks fits test-1e6 .* over device memory" "$SCRATCH/none.txt"'
"$FABULA" plan layout --gpus 7 --machine "$SCRATCH/m.json" --global-batch-tokens 1000 "$SCRATCH/model.json" \
    >"$SCRATCH/nobatch.txt" 2>&1
RC=$?
check "no layout divides the batch: exit 2, said so" \
    '[ $RC -eq 2 ] && grep -q "do not divide the global batch of 1000 tokens" "$SCRATCH/nobatch.txt"'

bad() { # bad WHAT ARGS...: exit 2 with a message
    what=$1; shift
    "$FABULA" plan layout "$@" >"$SCRATCH/bad.txt" 2>&1
    RC=$?
    check "bad input, $what: exit 2 (exit $RC)" '[ $RC -eq 2 ] && grep -q "error" "$SCRATCH/bad.txt"'
}
bad "no --gpus" --machine "$SCRATCH/m.json" "$SCRATCH/model.json"
bad "--gpus 0" --gpus 0 --machine "$SCRATCH/m.json" "$SCRATCH/model.json"
bad "no --machine" --gpus 8 "$SCRATCH/model.json"
bad "no config" --gpus 8 --machine "$SCRATCH/m.json"
bad "a missing machine file" --gpus 8 --machine "$SCRATCH/nope.json" "$SCRATCH/model.json"
bad "--headroom 1" --gpus 8 --machine "$SCRATCH/m.json" --headroom 1 "$SCRATCH/model.json"
bad "--top 0" --gpus 8 --machine "$SCRATCH/m.json" --top 0 "$SCRATCH/model.json"
bad "an unknown option" --gpus 8 --machine "$SCRATCH/m.json" --fastest "$SCRATCH/model.json"
bad "--compare of another world" --gpus 8 --machine "$SCRATCH/m.json" --global-batch-tokens $GBT \
    --compare dp=4,tp=1,pp=1 "$SCRATCH/model.json"
bad "--compare that does not divide the heads" --gpus 8 --machine "$SCRATCH/m.json" --global-batch-tokens $GBT \
    --compare dp=1,tp=8,pp=1,tokens=256,accum=64 --set model.num_attention_heads=4 --set model.num_key_value_heads=4 \
    "$SCRATCH/model.json"
"$FABULA" plan layout --help >"$SCRATCH/help.txt" 2>&1
RC=$?
check "--help exits 0 with the usage" '[ $RC -eq 0 ] && grep -q "usage: fabula plan layout" "$SCRATCH/help.txt"'

for cfg in inputs/examples/gpt3-175b.json inputs/examples/moe-355b.json; do
    $PY "$CHECKER" deepspeed "$cfg" 1024 >"$SCRATCH/ds.txt" 2>&1
    RC=$?
    sed 's/^/  /' "$SCRATCH/ds.txt"
    check "$cfg: model states agree with DeepSpeed's counts where the definitions agree (exit $RC)" '[ $RC -eq 0 ]'
done
finish
