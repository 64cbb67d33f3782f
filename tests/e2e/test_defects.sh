#!/bin/sh
# The test-only defects (docs/testing.md, "Injected defects"): each switch of
# FABULA_TEST_DEFECT really changes what training computes, on the smallest
# layout that exercises it, so that a test proving `fabula validate` catches
# it is not proving that it catches a no-op. 6 steps of a tiny model each,
# clean and switched:
#   zero_shard_offset     2 ranks, ZeRO 1, 2 and 3: losses change
#   ep_route_off_by_one   2 ranks, ep 2: losses change; ep 1 (dp 2): the same
#   tp_reduce_group       2 ranks, tp 2, without and with sequence
#                         parallelism: losses change
#   pp_microbatch_order   2 ranks, pp 2, 4 micro-batches a step: losses change
#   loss_scale_rule       1 rank, fp16 on cpu16, window 3, 12 steps: the
#                         recorded loss_scale changes
#   resume_data_position  1 rank, 4 steps + resume to 8: steps 5-8 change;
#                         the uninterrupted 8 steps are the same
# and all six at once leave a 1-rank ZeRO-3 run (no ep, tp, pp, fp16 or
# resume) the same, loss and gradient norm at every step as written. An
# unknown name exits 2 naming it and listing the known ones, one message; a
# valid setting (spaces and empty items allowed) prints its warning once,
# on 2 ranks too.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1
unset FABULA_TEST_DEFECT
STEPS=6
# the tiny MoE of the invariance tests; a schedule that does not depend on
# run.steps, so that a run cut in two follows the same lr
TINY="--set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 --set data.seq_len=64 \
 --set model.hidden_size=64 --set model.intermediate_size=128 --set scheduler.params.total_num_steps=40"

# run NP NAME DEFECTS ARGS...: STEPS steps into $SCRATCH/NAME with
# FABULA_TEST_DEFECT=DEFECTS ("" leaves it unset), no checkpoints unless ARGS
# ask; output in $SCRATCH/NAME.out (appended), status in $RC
run() {
    np=$1; name=$2; defects=$3; shift 3
    echo "=== FABULA_TEST_DEFECT=$defects mpiexec -n $np fabula train $*" >>"$SCRATCH/$name.out"
    # shellcheck disable=SC2086
    (cd "$FB_SRCDIR" && { [ -z "$defects" ] || export FABULA_TEST_DEFECT="$defects"; } &&
        timeout 120 $MPIEXEC -n "$np" "$FABULA" train --steps "$STEPS" --run-dir "$SCRATCH/$name" \
            --set checkpoint.save_interval=-1 --set 'run.resume="none"' $TINY "$@") >>"$SCRATCH/$name.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}

# differ A B KEY [FROM]: exit 0 when runs A and B record KEY differently at
# some step (from step FROM on; the steps before it must be the same), 1
# when every step's is the same as written in metrics.jsonl, 2 when the
# runs are not comparable; says where and by how much
differ() {
    "$PY" - "$SCRATCH/$1/metrics.jsonl" "$SCRATCH/$2/metrics.jsonl" "$3" "${4:-1}" <<'EOF'
import json, sys
def steps(path):
    try:
        rows = [json.loads(l) for l in open(path)]
    except (OSError, ValueError) as e:
        print("  %s: %s" % (path, e)); sys.exit(2)
    return [r for r in rows if "step" in r and key in r]
key, start = sys.argv[3], int(sys.argv[4])
a, b = steps(sys.argv[1]), steps(sys.argv[2])
if not a or [r["step"] for r in a] != [r["step"] for r in b]:
    print("  %s: steps %s vs %s" % (key, [r["step"] for r in a], [r["step"] for r in b])); sys.exit(2)
diff = [(x["step"], x[key], y[key]) for x, y in zip(a, b) if x[key] != y[key]]
if not diff:
    print("  %s: the same at all %d steps" % (key, len(a))); sys.exit(1)
if diff[0][0] < start:
    print("  %s: differs at step %d, before step %d: %s vs %s" % ((key, start) + diff[0][:1] + diff[0][1:]))
    sys.exit(2)
s, u, v = diff[0]
rel = [abs(x - y) / abs(x) for _, x, y in diff if isinstance(x, float) and x != 0]
print("  %s: first differs at step %d (%s vs %s); %d of %d steps differ%s" %
      (key, s, u, v, len(diff), len(a), ", largest relative difference %.2e" % max(rel) if rel else ""))
EOF
}
same() { differ "$@"; [ $? -eq 1 ]; }
changes() { differ "$@"; [ $? -eq 0 ]; }

# ---- the variable itself
expect_exit2 "unknown defect" "zero_shard_ofset" "resume_data_position" 2 \
    env FABULA_TEST_DEFECT=zero_shard_ofset "$FABULA" --version
expect_exit2 "unknown defect beside a known one" "bogus" "known: zero_shard_offset" 2 \
    env FABULA_TEST_DEFECT="ep_route_off_by_one,bogus" "$FABULA" train --dry-run

(cd "$FB_SRCDIR" && FABULA_TEST_DEFECT=" loss_scale_rule, ,tp_reduce_group ," timeout 60 $MPIEXEC -n 1 "$FABULA" --version) \
    >"$SCRATCH/list.out" 2>&1
rc=$?
check "a list with spaces and empty items is accepted, and said once" \
    '[ $rc -eq 0 ] && [ "$(grep -c "injects a defect on purpose" "$SCRATCH/list.out")" -eq 1 ]'

# ---- none touches a layout without its feature
run 1 plain "" --set zero_optimization.stage=3
run 1 plain-all "zero_shard_offset,ep_route_off_by_one,tp_reduce_group,pp_microbatch_order,loss_scale_rule,resume_data_position" \
    --set zero_optimization.stage=3
check "all six on 1 rank, ZeRO 3: losses and gradient norms the same" \
    '[ $RC -eq 0 ] && same plain plain-all loss && same plain plain-all grad_norm'

# ---- zero_shard_offset
for z in 1 2 3; do
    run 2 zero$z "" --set zero_optimization.stage=$z
    run 2 zero$z-d zero_shard_offset --set zero_optimization.stage=$z
    check "zero_shard_offset, 2 ranks ZeRO $z: losses change" '[ $RC -eq 0 ] && changes zero$z zero$z-d loss'
done

# ---- ep_route_off_by_one (and the warning, printed once on 2 ranks)
EP=parallel.expert_parallel_size
run 2 ep2 "" --set $EP=2
run 2 ep2-d ep_route_off_by_one --set $EP=2
check "ep_route_off_by_one, ep 2: losses change" '[ $RC -eq 0 ] && changes ep2 ep2-d loss'
differ ep2 ep2-d expert_tokens
WARN="warning: FABULA_TEST_DEFECT=ep_route_off_by_one injects a defect on purpose: for fabula's own tests only"
check "the warning, once on 2 ranks" '[ "$(grep -cF "$WARN" "$SCRATCH/ep2-d.out")" -eq 1 ]'
check "no warning without the variable" '! grep -q "injects a defect" "$SCRATCH/ep2.out"'
run 2 ep1 "" --set $EP=1 --set zero_optimization.stage=1
run 2 ep1-d ep_route_off_by_one --set $EP=1 --set zero_optimization.stage=1
check "ep_route_off_by_one, ep 1 (dp 2): losses and tokens per expert the same" \
    '[ $RC -eq 0 ] && same ep1 ep1-d loss && same ep1 ep1-d expert_tokens'

# ---- tp_reduce_group
run 2 tp2 "" --set parallel.tensor_parallel_size=2
run 2 tp2-d tp_reduce_group --set parallel.tensor_parallel_size=2
check "tp_reduce_group, tp 2: losses change" '[ $RC -eq 0 ] && changes tp2 tp2-d loss'
SP="--set parallel.tensor_parallel_size=2 --set parallel.sequence_parallel=true"
run 2 sp2 "" $SP
run 2 sp2-d tp_reduce_group $SP
check "tp_reduce_group, tp 2 with sequence parallelism: losses change" '[ $RC -eq 0 ] && changes sp2 sp2-d loss'

# ---- pp_microbatch_order: 4 micro-batches a step (8 samples, 2 a micro-batch)
PP="--set model.num_hidden_layers=4 --set parallel.pipeline_parallel_size=2"
run 2 pp2 "" $PP
run 2 pp2-d pp_microbatch_order $PP
check "pp_microbatch_order, pp 2: losses change" '[ $RC -eq 0 ] && changes pp2 pp2-d loss'

# ---- loss_scale_rule: no overflow, so the scale doubles every window
FP16="--set run.backend=\"cpu16\" --set fp16.enabled=true --set fp16.initial_scale_power=8 --set fp16.loss_scale_window=3"
STEPS=12
run 1 fp16 "" $FP16
run 1 fp16-d loss_scale_rule $FP16
check "loss_scale_rule, fp16 on cpu16: the recorded loss_scale changes" \
    '[ $RC -eq 0 ] && changes fp16 fp16-d loss_scale'

# ---- resume_data_position: 8 steps straight against 4 + resume to 8
STEPS=8
CK="--set checkpoint.save_interval=4"
run 1 straight "" $CK
run 1 straight-d resume_data_position $CK
check "resume_data_position: an uninterrupted run the same" '[ $RC -eq 0 ] && same straight straight-d loss'
STEPS=4
run 1 cut "" $CK
run 1 cut-d resume_data_position $CK
STEPS=8
run 1 cut "" $CK --set 'run.resume="auto"'
check "clean: 4 steps + resume to 8 the same as straight" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000004.h5" "$SCRATCH/cut.out" && same straight cut loss'
run 1 cut-d resume_data_position $CK --set 'run.resume="auto"'
check "resume_data_position: 4 steps + resume to 8 changes steps 5-8" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000004.h5" "$SCRATCH/cut-d.out" && changes straight cut-d loss 5'
finish
