#!/bin/sh
# The step-time model against measurement (docs/plan.md, "Validation"):
# for each rank count and layout (ZeRO 0-3, ep 1 and 2; tp 2, pp 2 and
# their combinations with dp),
# `fabula plan calibrate --write-machine` on that many ranks right before a
# real training run of bench/configs/plan_validate.json (so both see the same
# load on a shared machine; --calibrate-once: one calibration per rank
# count), then `fabula plan time` of the same layout on the calibrated
# machine file, over the same corpus and steps, with the share of expert
# assignments capacity drops, the experts' loads (the routing imbalance
# of ep > 1) and the spread of the kept share over micro-batches (the
# routing spread of dp > 1) taken from a 1-rank pilot run (--routing-from). The config is a 4-layer MoE
# of hidden 256 whose step takes about a second on one 2-core VM: with
# plan_small's 0.07 s steps, scheduler noise and fixed per-step costs
# weighed as much as the model (docs/plan.md, "Validation").
#
# --clock cpu (for a machine shared with other jobs): one thread a rank,
# calibrate times its passes in process CPU seconds, and a layout's
# measured step is the CPU seconds per rank of a step: the CPU time of a
# run of --steps steps less that of a run of 3 (start-up cancels), over
# the steps between and the ranks. On an idle machine with a core a rank
# that is the wall time; on a loaded one it leaves out the time other jobs
# held the cores.
# --rounds R (default 3): the whole sweep R times, rounds outermost so that
# a change of the machine's load hits every layout alike. Prints one table
# row per layout: the median over rounds of the measured step time (each
# round's: the median step after 3 warm-up steps) with the rounds' range,
# the median prediction, and the error: the median over rounds of each
# round's (predicted - measured) / measured, the prediction from the
# calibration run just before that round's training (a machine whose speed
# drifts moves both alike), then how many rows are within 15%, then (wall
# clock) each row's forward + backward and waits, measured and predicted. Timings on
# a shared machine vary: the highest load average seen is printed per row.
# --keep DIR: the calibrations, training logs (their time splits) and
# predictions stay in DIR (else a temporary directory, removed at the end).
# --set K=V (repeatable; no spaces in K=V): a config override for every
# run, calibration and prediction, e.g. --set run.backend=cuda to validate
# on GPUs (docs/plan.md, "Validation on a GPU").
#
# --cal-repeats N (default 9): calibrate's timed passes per length; with
# 5 a 1-rank calibration moved by 30% from round to round on the 2-core VM.
# --cal-model trained: calibrate on the pilot's last weights (its
# checkpoint through `fabula export`, as model.init_from) and the training
# samples (--data), so the timed passes route and drop as a trained router
# does; initial (default): train's initial weights on random token ids.
#
# usage: bench/plan_validate.sh [--steps N] [--ranks "1 2 4"] [--rounds R] [--config FILE] [--calibrate-once]
#                               [--cal-repeats N] [--cal-model initial|trained] [--clock wall|cpu] [--keep DIR]
#                               [--set K=V ...]
#        (from the repository top)
# env:   FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich)
set -eu
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
STEPS=10
RANKS="1 2 4"
CFG=bench/configs/plan_validate.json
ONCE=0
ROUNDS=3
CAL_REPEATS=9
CAL_MODEL=initial
CLOCK=wall
KEEP=
SETS=
PY=${PYTHON:-python3}
while [ $# -gt 0 ]; do
    case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --config) CFG=$2; shift 2 ;;
    --calibrate-once) ONCE=1; shift ;;
    --cal-repeats) CAL_REPEATS=$2; shift 2 ;;
    --cal-model) CAL_MODEL=$2; shift 2 ;;
    --clock) CLOCK=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --set)
        case $2 in *=*) ;; *) echo "$0: --set expects K=V" >&2; exit 2 ;; esac
        case $2 in *[[:space:]]*) echo "$0: --set $2: no spaces" >&2; exit 2 ;; esac
        SETS="$SETS --set $2"; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--ranks \"1 2 4\"] [--rounds R] [--config FILE] [--calibrate-once] [--cal-repeats N] [--cal-model initial|trained] [--clock wall|cpu] [--keep DIR] [--set K=V ...]" >&2
       exit 2 ;;
    esac
done
case $CAL_MODEL in
initial | trained) ;;
*) echo "$0: --cal-model expects initial or trained" >&2; exit 2 ;;
esac
case $CLOCK in
wall) ;;
cpu) OMP_NUM_THREADS=1; OMP_WAIT_POLICY=passive; export OMP_NUM_THREADS OMP_WAIT_POLICY ;;
*) echo "$0: --clock expects wall or cpu" >&2; exit 2 ;;
esac
if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP" || exit 2
    OUT=$KEEP
else
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi

median() { # numbers, one a line -> their median
    sort -g | awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
median_step_time() { # metrics.jsonl -> median step_time (s) after 3 warm-up steps
    sed -n 's/.*"step_time": *\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +4 | median
}

echo "fabula plan time vs measured ($CLOCK clock): $CFG, $STEPS steps x $ROUNDS rounds," \
     "$(getconf _NPROCESSORS_ONLN) cores, $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -n 1)," \
     "$(date -u '+%Y-%m-%d %H:%M UTC')"
cpu_seconds() { # COMMAND... -> user + system seconds of it and every process it waited for
    "$PY" -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime + u.ru_stime) if r.returncode == 0 else sys.exit(r.returncode)' "$@"
}

CAL_CFG=$CFG CAL_DATA=
calibrate() { # NP
    $MPIEXEC -n "$1" "$FABULA" plan calibrate "$CAL_CFG" $CAL_DATA $SETS --repeats "$CAL_REPEATS" --clock "$CLOCK" --write-machine "$OUT/m$1.json" \
        >"$OUT/cal$1.log" 2>&1 || { cat "$OUT/cal$1.log"; exit 1; }
}
# layouts NP: one line per layout on NP ranks, "ZERO EP TP PP": ZeRO 0-3 at
# ep 1 and 2, then tensor (tp 2) and pipeline (pp 2) parallelism
layouts() {
    for ep in 1 2; do
        [ "$ep" -gt "$1" ] && continue
        for zero in 0 1 2 3; do
            [ "$1" -eq 1 ] && [ "$zero" -gt 0 ] && continue
            echo "$zero $ep 1 1"
        done
    done
    if [ "$1" -ge 2 ]; then
        echo "0 1 2 1"
        echo "0 1 1 2"
    fi
    if [ "$1" -ge 4 ]; then
        echo "1 1 2 1"
        echo "1 1 1 2"
        echo "0 1 2 2"
    fi
}
# The share of expert assignments capacity drops: from a 1-rank pilot run
# of the same steps (the steps after the warm-up, as the measured median).
# It is every layout's share: fabula routes and drops a micro-batch's
# tokens the same way in any layout, up to rounding's effect on later
# steps (within 0.7% here; docs/plan.md, "Capacity drops").
# Only --cal-model trained reads the pilot's checkpoint (a GPU-sized
# model's optimizer state is gigabytes).
PILOT_SAVE=-1
[ "$CAL_MODEL" = trained ] && PILOT_SAVE=$STEPS
$MPIEXEC -n 1 "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$OUT/pilot" $SETS --set checkpoint.save_interval="$PILOT_SAVE" \
    >"$OUT/pilot.log" 2>&1 </dev/null || { cat "$OUT/pilot.log"; exit 1; }
tail -n +4 "$OUT/pilot/metrics.jsonl" >"$OUT/pilot.jsonl"
# a dense model's metrics carry no "dropped": nothing to take from them
ROUTING=0
grep -q '"dropped"' "$OUT/pilot.jsonl" && ROUTING=1
if [ "$CAL_MODEL" = trained ]; then
    # the pilot's weights as a Hugging Face directory, and the config with
    # model.init_from naming it (the training keys kept beside it)
    rm -rf "$OUT/pilot-hf"
    "$FABULA" export --checkpoint "$(ls "$OUT"/pilot/checkpoints/step-*.h5 | tail -n 1)" --output "$OUT/pilot-hf" -q \
        --allow-dropless-inference >>"$OUT/pilot.log" 2>&1 || { cat "$OUT/pilot.log"; exit 1; }
    "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
m = c["model"]
keep = ("router_aux_loss_coef", "router_z_loss_coef", "router_aux_loss_scope", "capacity_factor", "expert_dropout")
c["model"] = {k: m[k] for k in keep if k in m}
c["model"]["init_from"] = sys.argv[2]
c["model"]["output_router_logits"] = m.get("output_router_logits", True)
json.dump(c, open(sys.argv[3], "w"), indent=1)' "$CFG" "$OUT/pilot-hf" "$OUT/trained.json"
    CAL_CFG=$OUT/trained.json CAL_DATA=--data
fi
rm -rf "${OUT:?}/pilot"
for round in $(seq "$ROUNDS"); do
    for np in $RANKS; do
        [ "$ONCE" -eq 1 ] && calibrate "$np"
        layouts "$np" >"$OUT/list$np"
        while read -r zero ep tp pp; do
            name="np${np}_z${zero}_ep${ep}_tp${tp}_pp${pp}"
            [ "$ONCE" -eq 0 ] && calibrate "$np"
            # shellcheck disable=SC2086  # SETS is a word list by design
            set -- $SETS --set zero_optimization.stage="$zero" --set parallel.expert_parallel_size="$ep" \
                --set parallel.tensor_parallel_size="$tp" --set parallel.pipeline_parallel_size="$pp"
            # tensor and pipeline parallelism write no checkpoints yet
            [ "$tp" -gt 1 ] || [ "$pp" -gt 1 ] && set -- "$@" --set checkpoint.save_interval=-1 --set 'run.resume="none"'
            if [ "$CLOCK" = cpu ]; then
                c1=$(cpu_seconds $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps 3 --run-dir "$OUT/${name}_3" "$@" </dev/null)
                c2=$(cpu_seconds $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$OUT/${name}_n" "$@" </dev/null)
                meas=$(awk -v a="$c1" -v b="$c2" -v s="$STEPS" -v n="$np" 'BEGIN{print (b - a) / (s - 3) / n}')
            else
                $MPIEXEC -n "$np" "$FABULA" train "$CFG" --steps "$STEPS" --run-dir "$OUT/$name" "$@" \
                    >"$OUT/$name.r$round.log" 2>&1 </dev/null || { cat "$OUT/$name.r$round.log"; exit 1; }
                meas=$(median_step_time "$OUT/$name/metrics.jsonl")
                cp "$OUT/$name/metrics.jsonl" "$OUT/$name.r$round.jsonl"
            fi
            # the next round's run starts afresh, not as a resume
            rm -rf "${OUT:?}/$name" "${OUT:?}/${name}_3" "${OUT:?}/${name}_n"
            [ "$ROUTING" = 1 ] && set -- --routing-from "$OUT/pilot.jsonl" "$@"
            "$FABULA" plan time "$CFG" --world "$np" --machine "$OUT/m$np.json" --jsonl "$(sed -n \
                's/.*"train": *"\([^"]*\)".*/\1/p' "$CFG" | head -n 1)" --steps "$STEPS" --json "$@" \
                >"$OUT/$name.json" 2>"$OUT/$name.err" </dev/null || { cat "$OUT/$name.err"; exit 1; }
            pred=$(sed -n 's/.*"step_s": *\([0-9.e+-]*\).*/\1/p' "$OUT/$name.json")
            cp "$OUT/$name.json" "$OUT/$name.r$round.json"
            echo "$meas" >>"$OUT/$name.meas"
            echo "$pred" >>"$OUT/$name.pred"
            awk -v p="$pred" -v m="$meas" 'BEGIN{print 100 * (p - m) / m}' >>"$OUT/$name.perr"
            cut -d' ' -f1 /proc/loadavg >>"$OUT/$name.load"
            [ "$round" -eq 1 ] && echo "$np $zero $ep $tp $pp $name" >>"$OUT/layouts"
        done <"$OUT/list$np"
    done
done
echo "| ranks | ZeRO | ep | tp | pp | measured s/step (median; range over rounds) | predicted s/step (median) | error (median over rounds; range) | max load avg |"
echo "|---|---|---|---|---|---|---|---|---|"
rows=0 within=0
while read -r np zero ep tp pp name; do
    meas=$(median <"$OUT/$name.meas")
    pred=$(median <"$OUT/$name.pred")
    err=$(median <"$OUT/$name.perr")
    printf '| %d | %d | %d | %d | %d | %.4f (%.4f-%.4f) | %.4f | %+.1f%% (%+.1f%% to %+.1f%%) | %s |\n' "$np" "$zero" "$ep" "$tp" \
        "$pp" "$meas" "$(sort -g "$OUT/$name.meas" | head -n 1)" "$(sort -g "$OUT/$name.meas" | tail -n 1)" "$pred" "$err" \
        "$(sort -g "$OUT/$name.perr" | head -n 1)" "$(sort -g "$OUT/$name.perr" | tail -n 1)" "$(sort -g "$OUT/$name.load" | tail -n 1)"
    rows=$((rows + 1))
    awk -v e="$err" 'BEGIN{exit !(e <= 15 && e >= -15)}' && within=$((within + 1))
done <"$OUT/layouts"
echo
echo "$within of $rows rows within 15%"
[ "$CLOCK" = wall ] || exit 0
# Where each row's error comes from: train's own split of the step
# (metrics.jsonl "time": forward + backward, and the waits: comm_wait +
# imbalance) against the prediction's (forward + backward + recompute;
# exposed communication + bubble + sync + imbalance + routing imbalance and
# spread), medians over the
# rounds' steps after the warm-up and over the rounds' predictions.
echo
echo "| ranks | ZeRO | ep | tp | pp | forward + backward s, measured / predicted | waits s, measured / predicted |"
echo "|---|---|---|---|---|---|---|"
"$PY" - "$OUT" <<'PYEOF'
import glob, json, statistics, sys
out = sys.argv[1]
for line in open(out + "/layouts"):
    np_, zero, ep, tp, pp, name = line.split()
    fb, wait, pfb, pwait = [], [], [], []
    for f in sorted(glob.glob(f"{out}/{name}.r*.jsonl")):
        for row in map(json.loads, open(f)):
            t = row.get("time")
            if row.get("step", 0) <= 3 or not t:
                continue
            fb.append(t["forward"] + t["backward"])
            wait.append(t["comm_wait"] + t.get("imbalance", 0.0))
    for f in sorted(glob.glob(f"{out}/{name}.r*.json")):
        p = json.load(open(f))
        pfb.append(p["forward_s"] + p["backward_s"] + p["recompute_s"])
        pwait.append(p["comm_exposed_s"] + p["bubble_s"] + p["sync_s"] + p["imbalance_s"] + p.get("routing_s", 0.0)
                     + p.get("spread_s", 0.0))
    if not fb or not pfb:
        continue
    m = statistics.median
    print(f"| {np_} | {zero} | {ep} | {tp} | {pp} | {m(fb):.4f} / {m(pfb):.4f} | {m(wait):.4f} / {m(pwait):.4f} |")
PYEOF
