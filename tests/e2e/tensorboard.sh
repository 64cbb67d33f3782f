#!/bin/sh
# TensorBoard event files and csv_monitor files (docs/monitoring.md,
# "TensorBoard and CSV"), read back by the real TensorBoard package
# (EventAccumulator) in tensorboard_check.py:
#  - 1 rank, ZeRO 0, then resumed from the step-2 checkpoint: every scalar
#    equals metrics.jsonl (each step once: the resumed run's SessionLog START
#    makes TensorBoard drop the first run's steps after the checkpoint), the
#    parameter histograms at steps 2 and 4 equal the checkpoints' tensors, the
#    gradient histograms add up to the logged gradient norm; the CSV files
#    equal metrics.jsonl, trimmed alike on resume;
#  - 2 ranks, ZeRO 3 (every tensor sharded) and 2 ranks, expert parallel 2 with
#    ZeRO 1 and fp16: the histograms merged from the shards are exact;
#  - 2 ranks, tensor parallel 2: the histograms merged from the tp slices
#    (replicated tensors once) equal 1 rank's;
#  - off by default; bad keys exit 2 naming them; an output folder that cannot
#    be created exits 4 naming it.
# Skips (77) without a Python that has tensorboard, h5py and numpy
# (tools/install-deps.sh installs them).
. "$FB_SRCDIR/tests/e2e/lib.sh"

PY=
for p in "${PYTHON_TENSORBOARD:-}" "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import h5py, numpy
from tensorboard.backend.event_processing import event_accumulator' >/dev/null 2>&1; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP: no Python with the 'tensorboard' package (and h5py, numpy); tools/install-deps.sh installs it:" \
        "/usr/bin/python3 -m pip install --break-system-packages --no-deps tensorboard==2.17.1 with Debian's" \
        "python3-protobuf and python3-absl"
    exit 77
fi

SMALL="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32"
TB="--set tensorboard.enabled=true --set tensorboard.histogram_interval=2 --set csv_monitor.enabled=true"
checker() { "$PY" "$FB_SRCDIR/tests/e2e/tensorboard_check.py" "$@" >"$SCRATCH/check.txt" 2>&1; CRC=$?; \
    sed 's/^/  /' "$SCRATCH/check.txt"; }

# 1 rank, with a resume that redoes step 3
R1="$SCRATCH/r1"
run_fabula 1 train --steps 3 --run-dir "$R1" $SMALL $TB --set checkpoint.save_interval=2 --set checkpoint.keep_last=0
check "1 rank: 3 steps with tensorboard and csv_monitor (exit $RC)" '[ $RC -eq 0 ]'
check "the event file is announced" 'grep -q "fabula: tensorboard: .*r1/tensorboard/fabula/events.out.tfevents." "$SCRATCH/out.txt"'
cp "$R1/checkpoints/step-00000002.h5" "$SCRATCH/step2.h5"
run_fabula 1 train --steps 4 --run-dir "$R1" $SMALL $TB --set checkpoint.save_interval=2 --set checkpoint.keep_last=0 \
    --set run.resume="$SCRATCH/step2.h5"
check "1 rank: resumed from step 2 to step 4 (exit $RC)" '[ $RC -eq 0 ]'
check "two event files in one run folder" '[ "$(ls "$R1/tensorboard/fabula" | grep -c "^events.out.tfevents.")" -eq 2 ]'
checker "$R1" "$R1/tensorboard/fabula" "$R1/csv_monitor/fabula" 2:"$SCRATCH/step2.h5" \
    4:"$R1/checkpoints/step-00000004.h5"
check "1 rank: TensorBoard and the CSV files agree with metrics.jsonl and the checkpoints" '[ $CRC -eq 0 ]'

# 2 ranks, ZeRO 3; 2 ranks, expert parallel
R2="$SCRATCH/r2"
run_fabula 2 train --steps 2 --run-dir "$R2" $SMALL $TB --set zero_optimization.stage=3 \
    --set tensorboard.output_path="$SCRATCH/tb2" --set tensorboard.job_name=z3 --set csv_monitor.enabled=false
check "2 ranks ZeRO 3 (exit $RC)" '[ $RC -eq 0 ]'
check "output_path/job_name is honoured, no CSV when csv_monitor is off" \
    '[ -d "$SCRATCH/tb2/z3" ] && ! [ -e "$R2/tensorboard" ] && ! [ -e "$R2/csv_monitor" ]'
checker "$R2" "$SCRATCH/tb2/z3" - 2:"$R2/checkpoints/step-00000002.h5"
check "2 ranks ZeRO 3: histograms merged from the shards equal the checkpoint" '[ $CRC -eq 0 ]'

R3="$SCRATCH/r3"
run_fabula 2 train --steps 2 --run-dir "$R3" $SMALL $TB --set zero_optimization.stage=1 \
    --set parallel.expert_parallel_size=2 --set fp16.enabled=true
check "2 ranks expert parallel 2, ZeRO 1, fp16 (exit $RC)" '[ $RC -eq 0 ]'
check "fp16: loss_scale and skipped are scalars too" \
    '[ -s "$R3/csv_monitor/fabula/optimizer_loss_scale.csv" ] && [ -s "$R3/csv_monitor/fabula/optimizer_skipped.csv" ]'
checker "$R3" "$R3/tensorboard/fabula" "$R3/csv_monitor/fabula" 2:"$R3/checkpoints/step-00000002.h5"
check "2 ranks ep 2: histograms of experts held on different ranks equal the checkpoint" '[ $CRC -eq 0 ]'

# an output_path written with a trailing slash, as in DeepSpeed's examples
run_fabula 1 train --steps 1 --run-dir "$SCRATCH/r6" $SMALL --set tensorboard.enabled=true \
    --set tensorboard.output_path="$SCRATCH/tb6/" --set tensorboard.job_name=j
check "output_path with a trailing '/': one separator before job_name (exit $RC)" \
    '[ $RC -eq 0 ] && grep -q "fabula: tensorboard: $SCRATCH/tb6/j/events" "$SCRATCH/out.txt"'

# off by default
R4="$SCRATCH/r4"
run_fabula 1 train --steps 1 --run-dir "$R4" $SMALL
check "off by default: no tensorboard or csv_monitor folder (exit $RC)" \
    '[ $RC -eq 0 ] && ! [ -e "$R4/tensorboard" ] && ! [ -e "$R4/csv_monitor" ]'

run_fabula 2 train --steps 2 --run-dir "$SCRATCH/r5" $SMALL --set tensorboard.enabled=true \
    --set tensorboard.output_path=/dev/null/tb
check "an output_path that cannot be created: exit 4 naming it" \
    '[ $RC -eq 4 ] && grep -q "error: /dev/null/tb/fabula: cannot create directory" "$SCRATCH/out.txt"'
# found at start-up and agreed by every rank: one message, no MPI_Abort
# (rank 0 alone aborting at its first record made mpiexec's status a race)
check "an output_path that cannot be created: found before the first step, no MPI_Abort" \
    '[ "$(grep -c "cannot create directory" "$SCRATCH/out.txt")" -eq 1 ] && ! grep -q "MPI_Abort" "$SCRATCH/out.txt" &&
     ! grep -q "^step " "$SCRATCH/out.txt"'
run_fabula 2 train --steps 2 --run-dir "$SCRATCH/r6" $SMALL --set csv_monitor.enabled=true \
    --set csv_monitor.output_path=/dev/null/csv
check "a csv_monitor output_path that cannot be created: exit 4 naming it, no MPI_Abort" \
    '[ $RC -eq 4 ] && grep -q "error: /dev/null/csv/fabula: cannot create directory" "$SCRATCH/out.txt" &&
     ! grep -q "MPI_Abort" "$SCRATCH/out.txt"'
run_fabula 2 train --steps 2 --run-dir /dev/null/run $SMALL
check "a run dir that cannot be created: exit 4 naming it, no MPI_Abort" \
    '[ $RC -eq 4 ] && grep -q "/dev/null/run" "$SCRATCH/out.txt" && ! grep -q "MPI_Abort" "$SCRATCH/out.txt"'

# 2 ranks, tensor parallel 2 (no checkpoints under tp): each tensor's
# histograms hold its elements once, the replicated norms and routers
# included, as on 1 rank; the gradients' squares add up to the norm
TPARGS="--set parallel.tensor_parallel_size=2 --set checkpoint.save_interval=-1 --set run.resume=\"none\""
run_fabula 1 train --steps 2 --run-dir "$SCRATCH/tp1" $SMALL $TB --set csv_monitor.enabled=false \
    --set checkpoint.save_interval=-1
check "1 rank, reference for tp (exit $RC)" '[ $RC -eq 0 ]'
run_fabula 2 train --steps 2 --run-dir "$SCRATCH/tp2" $SMALL $TB --set csv_monitor.enabled=false $TPARGS
check "2 ranks, tp 2 (exit $RC)" '[ $RC -eq 0 ]'
"$PY" - "$SCRATCH/tp1" "$SCRATCH/tp2" >"$SCRATCH/tpcheck.txt" 2>&1 <<'PYEOF'
import json, math, os, sys
from tensorboard.backend.event_processing import event_accumulator as ea
def load(run):
    acc = ea.EventAccumulator(os.path.join(run, "tensorboard/fabula"), size_guidance={ea.HISTOGRAMS: 0})
    acc.Reload()
    h = {t: [x for x in acc.Histograms(t) if x.step == 2][0].histogram_value for t in acc.Tags()["histograms"]}
    rec = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))][-1]
    return h, rec
(h1, r1), (h2, r2) = load(sys.argv[1]), load(sys.argv[2])
bad = [t for t in h1 if t not in h2 or h2[t].num != h1[t].num or
       not math.isclose(h2[t].sum_squares, h1[t].sum_squares, rel_tol=1e-4)]
ss = sum(v.sum_squares for t, v in h2.items() if t.startswith("grads/"))
coef = min(1.0, 1.0 / (r2["grad_norm"] + 1e-6))
ok = not bad and set(h1) == set(h2) and math.isclose(ss, (coef * r2["grad_norm"]) ** 2, rel_tol=1e-5)
print("tp 2: %d histograms, %d differ from 1 rank (%s); gradient squares %.9g vs (clipped norm)^2 %.9g"
      % (len(h2), len(bad), bad[:3], ss, (coef * r2["grad_norm"]) ** 2))
sys.exit(0 if ok else 1)
PYEOF
CRC=$?
sed 's/^/  /' "$SCRATCH/tpcheck.txt"
check "2 ranks tp 2: every histogram counts its tensor's elements once, as 1 rank" '[ $CRC -eq 0 ]'

for bad in "tensorboard.histogram_interval=-1:tensorboard.histogram_interval" \
    "tensorboard.job_name=a/b:tensorboard.job_name" "csv_monitor.enabled=3:csv_monitor.enabled"; do
    set_arg=${bad%%:*}
    key=${bad#*:}
    run_fabula 1 train --steps 1 --run-dir "$SCRATCH/bad" $SMALL --set "$set_arg"
    check "--set $set_arg: exit 2 naming $key" '[ $RC -eq 2 ] && grep -q "$key" "$SCRATCH/out.txt"'
done
finish
