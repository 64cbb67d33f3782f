#!/bin/sh
# `fabula plan time` against an independent reference (plan_time_ref.py:
# the parameter blocks from the config's shapes, the batch rules, the
# alpha-beta formulas of docs/plan.md) for 1, 2 and 4 ranks x ZeRO 0-3 x
# ep 1/2, with and without overlap, tp/pp/sp collective counts, on a machine file with 2 ranks a node
# (so 4 ranks cross the inter link); `plan calibrate --write-machine` under
# mpiexec writes a file plan time loads (with the measured overlap), and on
# a pilot's exported weights and the training data; --dropped/--routing-from
# take the dropped expert assignments out of the compute, a machine's
# expert_flops times the experts (and calibrate measures it or says why
# not), --routing-from adds
# the ep routing imbalance, a machine's overlap scales what overlap_comm
# hides; bad machine files and flags
# exit 2 naming the key or flag (bad metrics files 3, a missing one 4). Nothing here is timed: the calibrated figures are
# only checked for form.
. "$FB_SRCDIR/tests/e2e/lib.sh"

CFG="$FB_SRCDIR/bench/configs/plan_small.json"
REF="$FB_SRCDIR/tests/e2e/plan_time_ref.py"
PY=${PYTHON:-/usr/bin/python3}
M="$SCRATCH/machine.json"
cat >"$M" <<'JSON'
{
  "format": "fabula-machine-1",
  "name": "test-machine",
  "devices_per_node": {"value": 2, "source": "test figure"},
  "flops": {"value": 1e10, "source": "test figure"},
  "attention_flops": {"value": 4e9, "source": "test figure"},
  "memory_bandwidth": {"value": 2.8e9, "source": "test figure", "assumption": true},
  "device_memory": {"value": 8e9, "source": "test figure"},
  "host_memory": {"value": 16e9, "source": "test figure"},
  "intra": {"latency_s": {"value": 1e-5, "source": "test figure"}, "bandwidth": {"value": 1e9, "source": "test figure"}},
  "inter": {"latency_s": {"value": 3e-5, "source": "test figure"}, "bandwidth": {"value": 2e8, "source": "test figure"}}
}
JSON

# plan time and the reference on one layout: MACHINE WHAT WORLD ZERO EP
# OVERLAP REDUCE_BUCKET ALLGATHER_BUCKET
check_layout() {
    mach=$1 what=$2
    shift 2
    ov=false; [ "$4" = 1 ] && ov=true
    "$FABULA" plan time "$CFG" --world "$1" --machine "$mach" --mean-len 100 --json \
        --set zero_optimization.stage="$2" --set parallel.expert_parallel_size="$3" \
        --set zero_optimization.overlap_comm=$ov --set zero_optimization.reduce_bucket_size="$5" \
        --set zero_optimization.allgather_bucket_size="$6" >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
    rc=$?
    "$PY" "$REF" "$CFG" "$mach" "$1" "$2" "$3" "$4" "$5" "$6" 100 <"$SCRATCH/plan.json" >"$SCRATCH/ref.txt" 2>&1
    rrc=$?
    cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
    check "world $1 zero $2 ep $3 overlap $4 buckets $5/$6: $what as the reference" '[ $rc -eq 0 ] && [ $rrc -eq 0 ]'
}
for layout in "1 0 1 0 5e8 5e8" "2 0 1 0 5e8 5e8" "2 1 1 0 5e8 5e8" "2 2 1 0 5e8 5e8" "2 3 1 0 5e8 5e8" \
              "4 0 1 0 5e8 5e8" "4 1 1 0 100000 50000" "4 2 1 0 20000 5e8" "4 3 1 0 5e8 5e8" \
              "2 0 2 0 5e8 5e8" "4 1 2 0 5e8 5e8" "4 2 2 0 5e8 5e8" "4 3 2 0 5e8 5e8" \
              "2 0 1 1 100000 5e8" "4 1 2 1 30000 5e8" "4 2 2 1 5e8 5e8" "4 3 1 1 5e8 5e8"; do
    check_layout "$M" "every collective and the step" $layout
done

# offload over a host link: optimizer (a copy down and up a step) and
# parameters (ZeRO 3: the shard up for every gather)
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['host_link_bandwidth'] = {'value': 5e8, 'source': 'test figure'}; json.dump(d, open(sys.argv[2], 'w'))" "$M" "$SCRATCH/host.json"
for layout in "2 2 optimizer" "4 3 both"; do
    set -- $layout
    if [ "$3" = both ]; then sets="--set zero_optimization.offload_optimizer.device=cpu --set zero_optimization.offload_param.device=cpu"
    else sets="--set zero_optimization.offload_optimizer.device=cpu"; fi
    "$FABULA" plan time "$CFG" --world "$1" --machine "$SCRATCH/host.json" --mean-len 100 --json \
        --set zero_optimization.stage="$2" --set zero_optimization.overlap_comm=false $sets \
        >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
    rc=$?
    "$PY" "$REF" "$CFG" "$SCRATCH/host.json" "$1" "$2" 1 0 5e8 5e8 100 "$3" <"$SCRATCH/plan.json" >"$SCRATCH/ref.txt" 2>&1
    rrc=$?
    cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
    check "world $1 zero $2 offload $3 at 0.5 GB/s: the copies and the step as the reference" \
        '[ $rc -eq 0 ] && [ $rrc -eq 0 ] && grep -Eq "\"offload_s\":(0\\.0*)?[1-9]" "$SCRATCH/plan.json"'
done

# synchronisation waits and oversubscribed CPUs (docs/plan.md): a machine
# calibrated on 2 ranks lagging 3% per pass and 10% per block, at 2 ranks
# a CPU; the reference integrates the normal order statistic on its own
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['sync_wait'] = {'ranks': {'value': 2, 'source': 'test figure'}, 'per_pass': {'value': 0.03, 'source': 'test figure'}, 'per_block': {'value': 0.1, 'source': 'test figure'}}; d['ranks_per_cpu'] = {'value': 2, 'source': 'test figure'}; json.dump(d, open(sys.argv[2], 'w'))" "$M" "$SCRATCH/sync.json"
for layout in "1 0 1" "2 0 1" "2 1 1" "2 2 1" "4 3 1" "4 1 2" "4 0 2"; do
    set -- $layout
    "$FABULA" plan time "$CFG" --world "$1" --machine "$SCRATCH/sync.json" --mean-len 100 --json \
        --set zero_optimization.stage="$2" --set parallel.expert_parallel_size="$3" \
        --set zero_optimization.overlap_comm=false >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
    rc=$?
    "$PY" "$REF" "$CFG" "$SCRATCH/sync.json" "$1" "$2" "$3" 0 5e8 5e8 100 <"$SCRATCH/plan.json" >"$SCRATCH/ref.txt" 2>&1
    rrc=$?
    cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
    check "world $1 zero $2 ep $3 with sync_wait: the waits (per pass, per block, scaled to the world) as the reference" \
        '[ $rc -eq 0 ] && [ $rrc -eq 0 ]'
done
"$FABULA" plan time "$CFG" --world 2 --machine "$SCRATCH/sync.json" --set zero_optimization.stage=2 \
    >"$SCRATCH/out.txt" 2>&1
check "the table prints the synchronisation waits" 'grep -Eq "^sync waits: 0\.0*[1-9]" "$SCRATCH/out.txt"'
"$FABULA" plan time "$CFG" --layout dp=1,pp=2,accum=4 --set train_batch_size=16 --machine "$M" --json \
    >"$SCRATCH/pp1.json" 2>/dev/null
"$FABULA" plan time "$CFG" --layout dp=1,pp=2,accum=4 --set train_batch_size=16 --machine "$SCRATCH/sync.json" \
    --json >"$SCRATCH/pp2.json" 2>/dev/null
check "2 ranks a CPU: the bubble as the dedicated machine's (a yielding wait keeps its CPU share), a pipeline alone has no sync waits" \
    "\"$PY\" -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(not (a[\"bubble_s\"] > 0 and b[\"bubble_s\"] == a[\"bubble_s\"] and b[\"sync_s\"] == 0))' \"$SCRATCH/pp1.json\" \"$SCRATCH/pp2.json\""

# capacity drops (docs/plan.md, "Capacity drops"): --dropped F takes F of
# the top-k assignments' expert FLOPs out of the compute; --dropped-from
# reads the share from a run's metrics.jsonl (sum of dropped over the sum
# of tokens x top-k x MoE layers; lines without both are skipped)
for layout in "1 0 1 0.2" "2 3 1 0.35" "4 1 2 0.5"; do
    set -- $layout
    "$FABULA" plan time "$CFG" --world "$1" --machine "$M" --mean-len 100 --json --dropped "$4" \
        --set zero_optimization.stage="$2" --set parallel.expert_parallel_size="$3" \
        --set zero_optimization.overlap_comm=false >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
    rc=$?
    "$PY" "$REF" "$CFG" "$M" "$1" "$2" "$3" 0 5e8 5e8 100 none "$4" <"$SCRATCH/plan.json" >"$SCRATCH/ref.txt" 2>&1
    rrc=$?
    cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
    check "world $1 zero $2 ep $3 --dropped $4: the compute less the dropped expert FLOPs, as the reference" \
        '[ $rc -eq 0 ] && [ $rrc -eq 0 ]'
done
# the experts at their own rate (machine expert_flops): the kept
# assignments' matmuls at it, the rest of the linear part at flops; a
# dropped assignment saves its FLOPs at the experts' rate
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['expert_flops'] = {'value': 2.5e10, 'source': 'test figure'}; json.dump(d, open(sys.argv[2], 'w'))" "$M" "$SCRATCH/experts.json"
for layout in "1 0 1 0" "1 0 1 0.2" "2 3 1 0.35" "4 1 2 0.5"; do
    set -- $layout
    "$FABULA" plan time "$CFG" --world "$1" --machine "$SCRATCH/experts.json" --mean-len 100 --json --dropped "$4" \
        --set zero_optimization.stage="$2" --set parallel.expert_parallel_size="$3" \
        --set zero_optimization.overlap_comm=false >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
    rc=$?
    "$PY" "$REF" "$CFG" "$SCRATCH/experts.json" "$1" "$2" "$3" 0 5e8 5e8 100 none "$4" <"$SCRATCH/plan.json" \
        >"$SCRATCH/ref.txt" 2>&1
    rrc=$?
    cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
    check "world $1 zero $2 ep $3 --dropped $4 on a machine with expert_flops: the experts at their rate, as the reference" \
        '[ $rc -eq 0 ] && [ $rrc -eq 0 ]'
done
"$FABULA" plan time "$CFG" --world 1 --machine "$M" --mean-len 100 --json >"$SCRATCH/e0.json" 2>/dev/null
"$FABULA" plan time "$CFG" --world 1 --machine "$SCRATCH/experts.json" --mean-len 100 --json >"$SCRATCH/e1.json" 2>/dev/null
check "expert_flops above flops shortens the compute; the table names the experts' rate" \
    "\"\$PY\" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); sys.exit(not b[\"forward_s\"] < a[\"forward_s\"])' \"\$SCRATCH/e0.json\" \"\$SCRATCH/e1.json\" &&
     \"\$FABULA\" plan time \"\$CFG\" --world 1 --machine \"\$SCRATCH/experts.json\" 2>&1 | grep -q \"experts 0.025 TFLOP/s\""

# plan_small: 2 MoE layers x top-2 = 4 assignments a token; 150 + 250
# dropped of (1000 + 1500) x 4 = 10000: 0.04
printf '%s\n' '{"step":1,"dropped":150,"tokens":1000}' '{"event":"checkpoint"}' \
    '{"step":2,"loss":3.5,"dropped":250,"tokens":1500}' >"$SCRATCH/metrics.jsonl"
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --json --dropped-from "$SCRATCH/metrics.jsonl" \
    >"$SCRATCH/from.json" 2>"$SCRATCH/err.txt"
rc=$?
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --json --dropped 0.04 >"$SCRATCH/given.json" 2>/dev/null
check "--dropped-from a metrics.jsonl: the share 0.04, the same step as --dropped 0.04" \
    "[ $rc -eq 0 ] && \"$PY\" -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(not (abs(a[\"dropped\"] - 0.04) < 1e-15 and abs(a[\"step_s\"] - b[\"step_s\"]) <= 1e-15 * b[\"step_s\"]))' \"$SCRATCH/from.json\" \"$SCRATCH/given.json\""
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --dropped 0.04 >"$SCRATCH/out.txt" 2>&1
check "the table prints the dropped share" 'grep -q "expert assignments dropped 4.000%" "$SCRATCH/out.txt"'
bad_dropped() { # DESCRIPTION RC PATTERN ARGS...
    d=$1; want=$2; p=$3; shift 3
    "$FABULA" plan time "$CFG" --world 2 --machine "$M" "$@" >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "$d: exit $want naming $p" "[ $rc -eq $want ] && grep -q -- \"$p\" \"$SCRATCH/out.txt\""
}
bad_dropped "--dropped 1" 2 "--dropped" --dropped 1
bad_dropped "--dropped -0.1" 2 "--dropped" --dropped -0.1
bad_dropped "--dropped and --dropped-from" 2 "at most one" --dropped 0.1 --dropped-from "$SCRATCH/metrics.jsonl"
bad_dropped "--dropped on a dropless config" 2 "capacity_factor" --dropped 0.1 --set model.capacity_factor=0
printf '%s\n' '{"step":1,"loss":3.5}' >"$SCRATCH/nodrop.jsonl"
bad_dropped "--dropped-from a file without dropped/tokens" 3 "no line with" --dropped-from "$SCRATCH/nodrop.jsonl"
printf '%s\n' '{"step":1,"dropped":150,"tokens":1000}' 'not json' >"$SCRATCH/badline.jsonl"
bad_dropped "--dropped-from a line that is not JSON" 3 "badline.jsonl:2" --dropped-from "$SCRATCH/badline.jsonl"
printf '%s\n' '{"step":1,"dropped":-5,"tokens":1000}' >"$SCRATCH/neg.jsonl"
bad_dropped "--dropped-from a negative count" 3 "non-negative" --dropped-from "$SCRATCH/neg.jsonl"
printf '%s\n' '{"step":1,"dropped":5000,"tokens":1000}' >"$SCRATCH/over.jsonl"
bad_dropped "--dropped-from more drops than assignments" 3 "not this" --dropped-from "$SCRATCH/over.jsonl"
bad_dropped "--dropped-from a missing file" 4 "missing.jsonl" --dropped-from "$SCRATCH/missing.jsonl"

# routing imbalance (docs/plan.md): with ep > 1 each MoE layer waits for
# the ep rank whose experts the router loaded most. Two recorded steps of
# plan_small's 2 MoE layers x 4 experts; at ep 2 the layers' excesses are
# 1000/900, 1200/950, 0 and 700/500 less 1: (1/9 + 5/19 + 0 + 2/5) / 4
printf '%s\n' '{"step":1,"dropped":150,"tokens":1000,"expert_tokens":[[600,400,300,500],[900,300,100,600]]}' \
    '{"step":2,"dropped":250,"tokens":1500,"expert_tokens":[[700,700,700,700],[100,200,300,400]]}' \
    >"$SCRATCH/routing.jsonl"
# routing_ref FILE WHAT LAYOUT...: each layout "WORLD ZERO EP MACHINE" planned
# with --routing-from FILE (dropped share 0.04) agrees with the reference
routing_ref() {
    file=$1; what=$2; shift 2
    for layout in "$@"; do
        set -- $layout
        "$FABULA" plan time "$CFG" --world "$1" --machine "$4" --mean-len 100 --json --routing-from "$file" \
            --set zero_optimization.stage="$2" --set parallel.expert_parallel_size="$3" \
            --set zero_optimization.overlap_comm=false >"$SCRATCH/plan.json" 2>"$SCRATCH/err.txt"
        rc=$?
        "$PY" "$REF" "$CFG" "$4" "$1" "$2" "$3" 0 5e8 5e8 100 none 0.04 "$file" <"$SCRATCH/plan.json" \
            >"$SCRATCH/ref.txt" 2>&1
        rrc=$?
        cat "$SCRATCH/ref.txt" "$SCRATCH/err.txt"
        check "world $1 zero $2 ep $3 --routing-from $(basename "$file") ($(basename "$4")): $what and the step as the reference" \
            '[ $rc -eq 0 ] && [ $rrc -eq 0 ]'
    done
}
# (the last layout on the machine with expert_flops: the wait at the experts' rate)
routing_ref "$SCRATCH/routing.jsonl" "the routing imbalance" "4 2 2 $M" "4 3 4 $M" "2 0 2 $M" "4 1 1 $M" \
    "4 2 2 $SCRATCH/experts.json"
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --json --routing-from "$SCRATCH/routing.jsonl" \
    --set parallel.expert_parallel_size=2 >"$SCRATCH/r2.json" 2>/dev/null
check "--routing-from at ep 2: the excess (1/9 + 5/19 + 2/5) / 4 worked by hand, a positive wait" \
    "\"$PY\" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (abs(d[\"routing_excess\"] - (1/9 + 5/19 + 2/5) / 4) < 1e-12 and d[\"routing_s\"] > 0))' \"$SCRATCH/r2.json\""
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --routing-from "$SCRATCH/routing.jsonl" \
    --set parallel.expert_parallel_size=2 >"$SCRATCH/out.txt" 2>&1
check "the table prints the routing imbalance" 'grep -q "^routing imbalance: .* 19.36% more expert rows" "$SCRATCH/out.txt"'
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"expert_tokens":[[1,2,3,4]]}' >"$SCRATCH/layers.jsonl"
bad_dropped "--routing-from expert_tokens of another layer count" 3 "expert_tokens" --routing-from "$SCRATCH/layers.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"expert_tokens":[[1,2,3,4],[1,2,3]]}' >"$SCRATCH/experts.jsonl"
bad_dropped "--routing-from expert_tokens of another expert count" 3 "expert_tokens.\\[1\\]" \
    --routing-from "$SCRATCH/experts.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"expert_tokens":[[1,2,3,4],[1,-2,3,4]]}' >"$SCRATCH/negload.jsonl"
bad_dropped "--routing-from a negative expert load" 3 "non-negative" --routing-from "$SCRATCH/negload.jsonl"
bad_dropped "--routing-from and --dropped-from" 2 "once" --routing-from "$SCRATCH/routing.jsonl" \
    --dropped-from "$SCRATCH/routing.jsonl"
bad_dropped "--dropped and --routing-from" 2 "at most one of --dropped and --routing-from" --dropped 0.1 \
    --routing-from "$SCRATCH/routing.jsonl"

# routing spread (docs/plan.md): with dp > 1 and ep 1 the ranks' micro-batches
# keep different shares of their assignments at each MoE layer. Two recorded
# steps of plan_small's 2 MoE layers: relative spreads 0.1 and 0.2 over 3
# degrees of freedom each, 0.1 and 0.1 over 1 each: pooled sqrt(0.17 / 8), at
# (1000 + 1500) / (4 + 2) tokens a micro-batch
printf '%s\n' '{"step":1,"dropped":150,"tokens":1000,"moe_layers":[{"dropped":70,"microbatches":4,"kept_share_mean":0.8,"kept_share_sd":0.08},{"dropped":80,"microbatches":4,"kept_share_mean":0.9,"kept_share_sd":0.18}]}' \
    '{"step":2,"dropped":250,"tokens":1500,"moe_layers":[{"dropped":100,"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.05},{"dropped":150,"microbatches":2,"kept_share_mean":0.6,"kept_share_sd":0.06}]}' \
    >"$SCRATCH/spread.jsonl"
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --json --routing-from "$SCRATCH/spread.jsonl" \
    >"$SCRATCH/s2.json" 2>/dev/null
check "--routing-from kept shares: the spread sqrt(0.17 / 8) at 2500 / 6 tokens worked by hand, a positive wait" \
    "\"$PY\" -c 'import json,math,sys; d=json.load(open(sys.argv[1])); sys.exit(not (abs(d[\"routing_spread\"] - math.sqrt(0.17 / 8)) < 1e-12 and abs(d[\"routing_spread_tokens\"] - 2500 / 6) < 1e-9 and d[\"spread_s\"] > 0))' \"$SCRATCH/s2.json\""
# every ZeRO stage at 2 and 4 ranks, ep 2 (none: the exchange's own term),
# and a machine with expert_flops, against the reference
routing_ref "$SCRATCH/spread.jsonl" "the routing spread" "2 0 1 $M" "4 1 1 $M" "2 2 1 $M" "4 3 1 $M" "4 2 2 $M" \
    "4 2 1 $SCRATCH/experts.json"
"$FABULA" plan time "$CFG" --world 4 --machine "$M" --mean-len 100 --json --routing-from "$SCRATCH/spread.jsonl" \
    --set zero_optimization.stage=3 >"$SCRATCH/s3.json" 2>/dev/null
"$FABULA" plan time "$CFG" --world 1 --machine "$M" --mean-len 100 --json --routing-from "$SCRATCH/spread.jsonl" \
    >"$SCRATCH/s1.json" 2>/dev/null
check "the spread waits longer at ZeRO 3 on 4 ranks than at ZeRO 0 on 2; one rank waits for none" \
    "\"$PY\" -c 'import json,sys; a,b,c=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(not (b[\"spread_s\"] > a[\"spread_s\"] > 0 and c[\"spread_s\"] == 0))' \"$SCRATCH/s2.json\" \"$SCRATCH/s3.json\" \"$SCRATCH/s1.json\""
"$FABULA" plan time "$CFG" --world 2 --machine "$M" --mean-len 100 --routing-from "$SCRATCH/spread.jsonl" \
    >"$SCRATCH/out.txt" 2>&1
check "the table prints the routing spread" 'grep -q "^routing spread: .* varies by 14.58% of its mean at 417 tokens" "$SCRATCH/out.txt"'
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"moe_layers":[{"microbatches":2,"kept_share_mean":0,"kept_share_sd":0.1},{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.1}]}' >"$SCRATCH/share0.jsonl"
bad_dropped "--routing-from a kept share of 0" 3 "kept_share_mean" --routing-from "$SCRATCH/share0.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"moe_layers":[{"microbatches":2,"kept_share_mean":0.5},{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.1}]}' >"$SCRATCH/nosd.jsonl"
bad_dropped "--routing-from 2 micro-batches without kept_share_sd" 3 "kept_share_sd" --routing-from "$SCRATCH/nosd.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"moe_layers":[{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":-0.1},{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.1}]}' >"$SCRATCH/negsd.jsonl"
bad_dropped "--routing-from a negative kept_share_sd" 3 "kept_share_sd" --routing-from "$SCRATCH/negsd.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"moe_layers":[{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.1},{"microbatches":3,"kept_share_mean":0.5,"kept_share_sd":0.1}]}' >"$SCRATCH/mbs.jsonl"
bad_dropped "--routing-from layers of one line counting different micro-batches" 3 "not one run" --routing-from "$SCRATCH/mbs.jsonl"
printf '%s\n' '{"step":1,"dropped":1,"tokens":10,"moe_layers":[{"microbatches":2,"kept_share_mean":0.5,"kept_share_sd":0.1}]}' >"$SCRATCH/mlayers.jsonl"
bad_dropped "--routing-from moe_layers of another layer count" 3 "moe_layers" --routing-from "$SCRATCH/mlayers.jsonl"

# overlap (docs/plan.md): a machine whose library progresses a quarter of a
# non-blocking collective under compute hides a quarter of what the
# overlap model would
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['overlap'] = {'value': 0.25, 'source': 'test figure'}; json.dump(d, open(sys.argv[2], 'w'))" "$M" "$SCRATCH/ov.json"
for layout in "4 3 1 1 5e8 5e8" "4 1 2 1 30000 5e8" "2 0 1 1 100000 5e8"; do
    check_layout "$SCRATCH/ov.json" "on a machine with overlap 0.25, the exposed seconds" $layout
done

# --layout: the spec gives the layout --world and the config give; a
# tp x pp layout has its tp and pp rows and the 1F1B bubble
"$FABULA" plan time "$CFG" --layout dp=2,zero=2,ep=2 --machine "$M" --json >"$SCRATCH/spec.json" 2>/dev/null
rc1=$?
"$FABULA" plan time "$CFG" --world 2 --set zero_optimization.stage=2 --set parallel.expert_parallel_size=2 \
    --machine "$M" --json >"$SCRATCH/world.json" 2>/dev/null
rc2=$?
check "--layout dp=2,zero=2,ep=2 predicts what --world 2 with the config's stage 2 and ep 2 does" \
    '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$SCRATCH/spec.json" "$SCRATCH/world.json"'
"$FABULA" plan time "$CFG" --layout dp=2,tp=2,pp=2,accum=4,vpp=1 --set train_batch_size=32 --machine "$M" --json \
    >"$SCRATCH/tp.json" 2>"$SCRATCH/err.txt"
rc=$?
cat "$SCRATCH/err.txt"
check "dp=2,tp=2,pp=2, 4 micro-batches: tp and pp collectives, bubble fraction 1/5 and (pp-1) micro-batch times" \
    "[ $rc -eq 0 ] && \"$PY\" -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = d[\"comm\"]
mb = (d[\"forward_s\"] + d[\"backward_s\"]) / d[\"microbatches_per_rank\"]
# tp per micro-batch (1 layer a stage, MoE): 4 activation sums, the head
# gradient (the stage holding the head), 2 cross-entropy sums, the MoE
# layer top-k gradient
ok = c[\"tp\"][\"calls\"] == (4 * 1 + 1 + 2 + 1) * 4 and c[\"pp\"][\"calls\"] == 2 * 4 and c[\"tp\"][\"group\"] == 2
ok = ok and abs(d[\"bubble_fraction\"] - 1 / 5) < 1e-12 and abs(d[\"bubble_s\"] - mb) < 1e-12 * mb
sys.exit(not ok)' \"$SCRATCH/tp.json\""

# sequence parallelism: the tp collectives train issues (test_tp counts them
# on the model): per micro-batch and layer 4 reduce-scatters and 6
# all-gathers (6 and 8 with full recomputation), one of each for the
# embedding and the head, one of each for the head alone on the last pp
# stage; a sum per RMSNorm weight (2 a layer and the final norm), the
# cross-entropy's 2 sums and the MoE layer's top-k gradient
"$FABULA" plan time "$CFG" --layout dp=2,tp=2,pp=2,sp,accum=4,vpp=1 --set train_batch_size=32 --machine "$M" \
    --json >"$SCRATCH/sp.json" 2>"$SCRATCH/err.txt"
rc1=$?
"$FABULA" plan time "$CFG" --layout dp=2,tp=2,sp,recompute=full,accum=2 --set train_batch_size=16 --machine "$M" \
    --json >"$SCRATCH/sp1.json" 2>>"$SCRATCH/err.txt"
rc2=$?
cat "$SCRATCH/err.txt"
check "dp=2,tp=2,pp=2,sp (4 micro-batches) and dp=2,tp=2,sp,recompute=full (2): tp calls as train issues them" \
    "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && \"$PY\" -c '
import json, sys
a, b = (json.load(open(f))[\"comm\"][\"tp\"][\"calls\"] for f in sys.argv[1:3])
want_a = ((4 * 1 + 1) + (6 * 1 + 1) + (2 * 1 + 1) + 2 + 1) * 4
want_b = ((6 * 2 + 2) + (8 * 2 + 2) + (2 * 2 + 1) + 2 + 2) * 2
print(\"tp calls %s and %s, expected %d and %d\" % (a, b, want_a, want_b))
sys.exit(not (a == want_a and b == want_b))' \"$SCRATCH/sp.json\" \"$SCRATCH/sp1.json\""

# cpu16 under tp sums its 16-bit activations in fp32 on the host
# (src/model/tp.c widens them: MPI cannot add 16-bit floats), so its tp
# bytes are the fp32 run's, not half of them
"$FABULA" plan time "$CFG" --layout dp=1,tp=2 --machine "$M" --json >"$SCRATCH/tp32.json" 2>"$SCRATCH/err.txt"
rc1=$?
"$FABULA" plan time "$CFG" --layout dp=1,tp=2 --set 'run.backend="cpu16"' --set bf16.enabled=true --machine "$M" \
    --json >"$SCRATCH/tp16.json" 2>>"$SCRATCH/err.txt"
rc2=$?
check "tp 2 on cpu16 (bf16): the tp bytes of fp32 (the host sums widen)" \
    "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && \"$PY\" -c '
import json, sys
a, b = (json.load(open(f))[\"comm\"][\"tp\"][\"bytes\"] for f in sys.argv[1:3])
print(\"tp bytes fp32 %s, cpu16 %s\" % (a, b))
sys.exit(not (a == b and a > 0))' \"$SCRATCH/tp32.json\" \"$SCRATCH/tp16.json\""

# fewer kv heads than tp (replicated, docs/parallel.md): per layer and
# micro-batch the d(k) and d(v) sums over a head's sharers, [T, head_dim]
# fp32 each, on top of the tp 4 run with 4 kv heads (plan_small: 2 layers,
# head_dim 32; 16 sequences of 128 tokens on dp 1 at 4 a micro-batch: 4
# micro-batches of 512 tokens)
for kv in 4 2 1; do
    "$FABULA" plan time "$CFG" --layout dp=1,tp=4 --set model.num_key_value_heads=$kv --machine "$M" --json \
        >"$SCRATCH/kv$kv.json" 2>>"$SCRATCH/err.txt"
done
check "tp 4 with 2 and with 1 kv heads: 4 more tp calls a micro-batch, of 512 x 32 x 4 bytes, than with 4 kv heads" \
    "\"$PY\" -c '
import json, sys
a, b, c = (json.load(open(f))[\"comm\"][\"tp\"] for f in sys.argv[1:4])
print(\"tp calls %s %s %s, bytes %s %s %s\" % (a[\"calls\"], b[\"calls\"], c[\"calls\"], a[\"bytes\"], b[\"bytes\"], c[\"bytes\"]))
extra = 2 * 2 * 4 * 512 * 32 * 4
sys.exit(not all(x[\"calls\"] == a[\"calls\"] + 4 * 4 and x[\"bytes\"] == a[\"bytes\"] + extra for x in (b, c)))' \
    \"$SCRATCH/kv4.json\" \"$SCRATCH/kv2.json\" \"$SCRATCH/kv1.json\""

# the table form names every part
"$FABULA" plan time "$CFG" --world 4 --machine "$M" --set zero_optimization.stage=3 \
    --set parallel.expert_parallel_size=2 >"$SCRATCH/table.txt" 2>&1
rc=$?
check "table: exit 0 with compute, the collectives, bubble, imbalance and step" \
    '[ $rc -eq 0 ] && grep -q "^compute: " "$SCRATCH/table.txt" && grep -q "^zero3_gather .* inter " "$SCRATCH/table.txt" &&
     grep -q "^ep_alltoall " "$SCRATCH/table.txt" && grep -q "^bubble: " "$SCRATCH/table.txt" &&
     grep -q "^imbalance: " "$SCRATCH/table.txt" && grep -q "^step: .* tokens/s" "$SCRATCH/table.txt"'

# the corpus's lengths through the step plan: a 2-rank plan has an imbalance
(cd "$FB_SRCDIR" && "$FABULA" plan time "$CFG" --world 2 --machine "$M" --jsonl inputs/sample.jsonl --steps 4 \
    --json) >"$SCRATCH/corpus.json" 2>"$SCRATCH/err.txt"
rc=$?
check "--jsonl: exit 0, 2 micro-batches a rank of at most 512 tokens, the imbalance term the step plan's imbalance x compute" \
    "[ $rc -eq 0 ] && \"$PY\" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d[\"microbatches_per_rank\"] == 2 and 0 < d[\"tokens_per_microbatch\"] <= 512 and d[\"imbalance_s\"] == d[\"imbalance\"] * (d[\"forward_s\"] + d[\"backward_s\"])))' \"$SCRATCH/corpus.json\""

# calibrate --write-machine under mpiexec: a loadable file with a source
# for every figure and the measured links
(cd "$SCRATCH" && timeout 300 $MPIEXEC -n 2 "$FABULA" plan calibrate "$CFG" --short 16 --long 64 --tokens 128 \
    --repeats 1 --write-machine "$SCRATCH/cal.json" --name calibrated-here) >"$SCRATCH/cal.txt" 2>&1
rc=$?
cat "$SCRATCH/cal.txt"
check "calibrate --write-machine on 2 ranks: exit 0, the attention-cost output kept, links measured" \
    '[ $rc -eq 0 ] && grep -q "forward + backward" "$SCRATCH/cal.txt" && grep -q "MPI latency .* over 2 ranks" "$SCRATCH/cal.txt" &&
     grep -q "capacity dropped [0-9.]*% of the expert assignments" "$SCRATCH/cal.txt"'
check "calibrated file: every figure has a source, the links are measured, 2 ranks a node" \
    "\"$PY\" -c '
import json, sys
d = json.load(open(sys.argv[1]))
figs = [v for k, v in d.items() if isinstance(v, dict) and \"value\" in v]
figs += [d[l][k] for l in (\"intra\", \"inter\") for k in (\"latency_s\", \"bandwidth\")]
ok = all(f[\"source\"] for f in figs) and d[\"intra\"][\"bandwidth\"][\"source\"].startswith(\"measured\")
ok = ok and d[\"devices_per_node\"][\"value\"] == 2 and d[\"flops\"][\"value\"] > 0 and d[\"name\"] == \"calibrated-here\"
ok = ok and \"plan calibrate\" in d[\"calibrated\"]
ok = ok and 0 <= d[\"overlap\"][\"value\"] <= 1 and d[\"overlap\"][\"source\"].startswith(\"measured\")
ok = ok and \"weights initial, tokens random ids\" in d[\"flops\"][\"source\"]
sys.exit(not ok)' \"$SCRATCH/cal.json\""
# the experts' rate: written with its source (the pairs at capacity 0.5)
# or, when the tiny passes time no difference, left out saying so
# an expert rate well above the file's own matmul peak is noise (seen on a
# GPU for a launch-bound model: 1.5 PFLOP/s against 826 TFLOP/s) and left out
check "calibrated file: expert_flops from passes at capacity 0.5 and under 1.5 gemm_flops, or its absence said" \
    "\"$PY\" -c '
import json, sys
d = json.load(open(sys.argv[1]))
said = \"expert_flops left out\" in open(sys.argv[2]).read()
if \"expert_flops\" in d:
    e = d[\"expert_flops\"]
    ok = not said and e[\"value\"] > 0 and \"capacity factor 0.5\" in e[\"source\"] and \"less the kept expert\" in d[\"flops\"][\"source\"]
    ok = ok and e[\"value\"] <= 1.5 * d[\"gemm_flops\"][\"value\"]
else:
    ok = said
sys.exit(not ok)' \"$SCRATCH/cal.json\" \"$SCRATCH/cal.txt\""
"$FABULA" plan time "$CFG" --world 2 --machine "$SCRATCH/cal.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "plan time loads the calibrated file" '[ $rc -eq 0 ] && grep -q "^machine: calibrated-here" "$SCRATCH/out.txt"'

# calibrate on a trained model and the training data: model.init_from (a
# pilot's checkpoint through fabula export) gives the passes its weights,
# --data the config's samples. Until 2026-12-03 calibrate ignored
# init_from in silence: a directory without weights must now fail.
(cd "$FB_SRCDIR" && "$FABULA" train "$CFG" --steps 2 --run-dir "$SCRATCH/pilot" --set checkpoint.save_interval=2) \
    >"$SCRATCH/pilot.txt" 2>&1 &&
    "$FABULA" export --checkpoint "$SCRATCH/pilot/checkpoints/step-00000002.h5" --output "$SCRATCH/pilot-hf" -q \
        --allow-dropless-inference >>"$SCRATCH/pilot.txt" 2>&1
rc=$?
cat "$SCRATCH/pilot.txt" | tail -n 3
"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
m = c['model']
c['model'] = {k: m[k] for k in ('router_aux_loss_coef', 'router_z_loss_coef', 'capacity_factor') if k in m}
c['model']['init_from'] = sys.argv[2]
c['model']['output_router_logits'] = True
json.dump(c, open(sys.argv[3], 'w'))" "$CFG" "$SCRATCH/pilot-hf" "$SCRATCH/trained.json"
(cd "$FB_SRCDIR" && "$FABULA" plan calibrate "$SCRATCH/trained.json" --data --short 16 --long 64 --tokens 128 \
    --repeats 1 --write-machine "$SCRATCH/cal-trained.json") >"$SCRATCH/calt.txt" 2>&1
crc=$?
cat "$SCRATCH/calt.txt"
check "calibrate --data with model.init_from: exit 0, the passes' weights and tokens said in the file" \
    "[ $rc -eq 0 ] && [ $crc -eq 0 ] && grep -q 'weights from model.init_from' \"$SCRATCH/calt.txt\" &&
     grep -q 'tokens from inputs/sample.jsonl' \"$SCRATCH/calt.txt\" && \"$PY\" -c '
import json, sys
s = json.load(open(sys.argv[1]))[\"flops\"][\"source\"]
sys.exit(not (\"weights from model.init_from \" in s and \"pilot-hf\" in s and \"tokens from inputs/sample.jsonl\" in s))' \"$SCRATCH/cal-trained.json\""
mkdir -p "$SCRATCH/noweights" && cp "$SCRATCH/pilot-hf/config.json" "$SCRATCH/noweights/"
sed "s|pilot-hf|noweights|" "$SCRATCH/trained.json" >"$SCRATCH/noweights.json"
(cd "$FB_SRCDIR" && "$FABULA" plan calibrate "$SCRATCH/noweights.json" --short 16 --long 64 --tokens 128 \
    --repeats 1) >"$SCRATCH/out.txt" 2>&1
rc=$?
check "calibrate with model.init_from naming a directory without weights: fails naming it (not ignored)" \
    '[ $rc -ne 0 ] && grep -q "noweights" "$SCRATCH/out.txt"'

# --clock cpu on one rank: the passes in CPU seconds, said in the file;
# links not measured and marked as assumptions
(cd "$SCRATCH" && OMP_NUM_THREADS=1 "$FABULA" plan calibrate "$CFG" --short 16 --long 64 --tokens 128 --repeats 3 \
    --clock cpu --write-machine "$SCRATCH/cal1.json") >"$SCRATCH/cal1.txt" 2>&1
rc=$?
cat "$SCRATCH/cal1.txt"
# the long passes' spread: printed, the same figure in the file, and the
# warning exactly when it is above 15%
check "calibrate --repeats 3: the passes' spread printed and in the file, the warning iff above 15%" \
    "[ $rc -eq 0 ] && \"$PY\" -c '
import json, re, sys
out = open(sys.argv[2]).read()
p = re.search(r\"spread ([0-9.]+)% \\(slowest - fastest over the median, 3 passes\\)\", out)
f = re.search(r\"the long ones spread ([0-9.]+)%\", json.load(open(sys.argv[1]))[\"flops\"][\"source\"])
ok = p is not None and f is not None and p.group(1) == f.group(1)
ok = ok and (\"warning: the machine\" in out) == (float(p.group(1)) > 15)
sys.exit(not ok)' \"$SCRATCH/cal1.json\" \"$SCRATCH/cal1.txt\""
check "calibrate --clock cpu on one rank: exit 0, CPU seconds and unmeasured links said in the file" \
    "[ $rc -eq 0 ] && \"$PY\" -c '
import json, sys
d = json.load(open(sys.argv[1]))
ok = \"process CPU seconds\" in d[\"flops\"][\"source\"] and d[\"intra\"][\"bandwidth\"].get(\"assumption\") is True
ok = ok and d[\"intra\"][\"bandwidth\"][\"source\"].startswith(\"not measured\") and d[\"devices_per_node\"][\"value\"] == 1
sys.exit(not ok)' \"$SCRATCH/cal1.json\""
"$FABULA" plan calibrate "$CFG" --clock sundial --write-machine "$SCRATCH/x.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "calibrate --clock sundial: exit 2 naming --clock" '[ $rc -eq 2 ] && grep -q -- "--clock" "$SCRATCH/out.txt"'

# run.backend is what calibrate times on (docs/plan.md, "Calibrating a
# GPU"): cpu16 runs the 16-bit CPU ops; "cuda" where this rank sees no GPU
# (or fabula was built without CUDA) exits 2 saying so. Until 2026-12-04
# calibrate timed the fp32 CPU ops whatever run.backend said, and wrote a
# CPU's file for a config that trains on a GPU.
"$FABULA" plan calibrate "$CFG" --set run.backend=cpu16 --short 16 --long 64 --tokens 128 --repeats 1 \
    --write-machine "$SCRATCH/cal16.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "calibrate with run.backend cpu16: exit 0, a CPU machine file" \
    "[ $rc -eq 0 ] && grep -q '\"name\": \"cpu-this\"' \"$SCRATCH/cal16.json\""
if [ ! -d /proc/driver/nvidia/gpus ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    "$FABULA" plan calibrate "$CFG" --set run.backend=cuda --short 16 --long 64 --tokens 128 --repeats 1 \
        --write-machine "$SCRATCH/x.json" >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "calibrate with run.backend cuda and no GPU: exit 2 naming run.backend, no file" \
        '[ $rc -eq 2 ] && grep -q "run.backend is \"cuda\"" "$SCRATCH/out.txt" && [ ! -e "$SCRATCH/x.json" ]'
fi

# bad machine files: exit 2, the message names the key
bad_machine() { # DESCRIPTION KEY PYTHON-EDIT
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); $3; json.dump(d, open(sys.argv[2], 'w'))" \
        "$M" "$SCRATCH/bad.json"
    "$FABULA" plan time "$CFG" --world 2 --machine "$SCRATCH/bad.json" >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "$1: exit 2 naming '$2'" "[ $rc -eq 2 ] && grep -q \"'$2\" \"$SCRATCH/out.txt\""
}
bad_machine "a figure without a source" "flops.source" "del d['flops']['source']"
bad_machine "an unknown key" "flopz" "d['flopz'] = d['flops']"
bad_machine "an unknown key in a figure" "intra.bandwidth.unit" "d['intra']['bandwidth']['unit'] = 'GB/s'"
bad_machine "a bandwidth of 0" "intra.bandwidth.value" "d['intra']['bandwidth']['value'] = 0"
bad_machine "an expert rate of 0" "expert_flops.value" "d['expert_flops'] = {'value': 0, 'source': 't'}"
bad_machine "a negative latency" "inter.latency_s.value" "d['inter']['latency_s']['value'] = -1"
bad_machine "a missing link" "inter" "del d['inter']"
bad_machine "a bare number for a figure" "flops" "d['flops'] = 1e10"
bad_machine "a fractional ranks per node" "devices_per_node.value" "d['devices_per_node']['value'] = 1.5"
bad_machine "another format" "format" "d['format'] = 'fabula-machine-2'"
bad_machine "sync_wait without per_block" "sync_wait.per_block" "d['sync_wait'] = {'ranks': {'value': 2, 'source': 't'}, 'per_pass': {'value': 0.1, 'source': 't'}}"
bad_machine "an unknown key in sync_wait" "sync_wait.per_layer" "d['sync_wait'] = {'ranks': {'value': 2, 'source': 't'}, 'per_pass': {'value': 0, 'source': 't'}, 'per_block': {'value': 0, 'source': 't'}, 'per_layer': {'value': 0, 'source': 't'}}"
bad_machine "a negative lag" "sync_wait.per_pass.value" "d['sync_wait'] = {'ranks': {'value': 2, 'source': 't'}, 'per_pass': {'value': -0.1, 'source': 't'}, 'per_block': {'value': 0, 'source': 't'}}"
bad_machine "fractional sync ranks" "sync_wait.ranks.value" "d['sync_wait'] = {'ranks': {'value': 2.5, 'source': 't'}, 'per_pass': {'value': 0, 'source': 't'}, 'per_block': {'value': 0, 'source': 't'}}"
bad_machine "zero ranks per CPU" "ranks_per_cpu.value" "d['ranks_per_cpu'] = {'value': 0, 'source': 't'}"
bad_machine "an overlap above 1" "overlap.value" "d['overlap'] = {'value': 1.5, 'source': 't'}"
bad_machine "a negative overlap" "overlap.value" "d['overlap'] = {'value': -0.5, 'source': 't'}"
printf '{"format": "fabula-machine-1",' >"$SCRATCH/trunc.json"
"$FABULA" plan time "$CFG" --world 2 --machine "$SCRATCH/trunc.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "truncated JSON: exit 2 naming the file" '[ $rc -eq 2 ] && grep -q "trunc.json" "$SCRATCH/out.txt"'
"$FABULA" plan time "$CFG" --world 2 --machine "$SCRATCH/none.json" >"$SCRATCH/out.txt" 2>&1
rc=$?
check "missing machine file: exit 2 naming it" '[ $rc -eq 2 ] && grep -q "none.json" "$SCRATCH/out.txt"'

# model.recompute in the config (--world takes it): full adds the forward
# again, selective the attention's forward third, F_att / attention_flops / 3
# a micro-batch with F_att = 12 L d (sum of len^2) (docs/plan.md, "Compute")
for mode in none selective full; do
    "$FABULA" plan time "$CFG" --world 1 --machine "$M" --mean-len 100 --json --set model.recompute=$mode \
        >"$SCRATCH/rc-$mode.json" 2>"$SCRATCH/err.txt"
    rc=$?
    check "recompute $mode: the recomputation's seconds as docs/plan.md says" '[ $rc -eq 0 ] && "$PY" - "$CFG" "$M" \
        "$SCRATCH/rc-$mode.json" $mode <<PYEOF
import json, sys
cfg, mach, p, mode = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4]
L, d = cfg["model"]["num_hidden_layers"], cfg["model"]["hidden_size"]
att = 12.0 * L * d * p["sum_len_sq_per_microbatch"] / mach["attention_flops"]["value"] / 3.0
want = {"none": 0.0, "full": p["forward_s"], "selective": p["microbatches_per_rank"] * att}[mode]
print("  recompute %s: recompute_s %.9g, expected %.9g" % (mode, p["recompute_s"], want))
sys.exit(0 if abs(p["recompute_s"] - want) <= 1e-9 * max(1.0, want) else 1)
PYEOF'
done

# bad flags
bad_flags() { # DESCRIPTION PATTERN ARGS...
    d=$1; p=$2; shift 2
    "$FABULA" plan time "$CFG" "$@" >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "$d: exit 2 naming $p" "[ $rc -eq 2 ] && grep -q -- \"$p\" \"$SCRATCH/out.txt\""
}
bad_flags "no --machine" "--machine" --world 2
bad_flags "no --world" "--world" --machine "$M"
bad_flags "--world 0" "--world" --world 0 --machine "$M"
bad_flags "--mean-len with --corpus-lengths" "at most one" --world 2 --machine "$M" --mean-len 64 --corpus-lengths x
bad_flags "ep not dividing the world" "expert_parallel_size" --world 3 --machine "$M" --set train_batch_size=24 \
    --set parallel.expert_parallel_size=2
bad_flags "--layout and --world" "exactly one" --world 2 --layout dp=2 --machine "$M"
bad_flags "a bad layout part" "bogus" --layout dp=2,bogus=1 --machine "$M"
bad_flags "an unknown flag" "--bogus" --world 2 --machine "$M" --bogus
"$FABULA" plan time --help >"$SCRATCH/out.txt" 2>&1
rc=$?
check "--help: exit 0, the usage" '[ $rc -eq 0 ] && grep -q "usage: fabula plan time" "$SCRATCH/out.txt"'

echo "$CHECKS checks, $FAILS failed"
[ "$FAILS" -eq 0 ]
