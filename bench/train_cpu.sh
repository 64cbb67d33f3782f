#!/bin/sh
# CPU training throughput: fabula against the same MoE model written the
# usual way in PyTorch, same machine, same threads, same batch, equal work.
#
#   bench/train_cpu.sh [--steps N] [--threads "T..."] [--wait-policy passive|default|both]
#                      [--sweep] [--rows "ROW..."]
#
# Without --sweep: one row, bench/configs/cpu_small.json. With --sweep: the
# rows of bench/configs/cpu_bench.json (4 layers x 512 hidden x 8 experts
# top-2, seq 1024) and its variants, derived here (see ROWS below): the
# dense model of the same active FLOPs, 4/16/64/128 experts at fixed active
# and total parameters, seq 256 -> 8192 at 8192 tokens a step. --rows picks
# some of them by name. Every config is run dropless (capacity_factor 0) on
# both sides, so both do the same work whatever the routing.
#
# --threads takes one count or several ("1 2"): each row runs at each. Both
# sides report the wall clock and the CPU seconds (all threads) of a step;
# at 1 thread the CPU time is the figure other load on the machine barely
# moves, at the machine's thread count the paired wall clock is.
#
# Run from the repository top. Builds nothing: FABULA names the binary
# (default ./fabula), MPIEXEC the launcher (default mpiexec.mpich), PYTHON the
# interpreter that has torch (default /usr/bin/python3). See bench/README.md.
set -eu

STEPS=10
THREADS=$(nproc)
POLICIES="passive"
WARMUP=3
CONFIG=bench/configs/cpu_small.json
SWEEP=0
ROWS=
# --sweep rows: NAME and the overrides of bench/configs/cpu_bench.json.
# Fixed active and total parameters: top-k x width = 2048, experts x width = 8192.
SWEEP_ROWS='bench -
dense model.num_local_experts=0 model.intermediate_size=2048
e4 model.num_local_experts=4 model.num_experts_per_tok=1 model.intermediate_size=2048
e16 model.num_local_experts=16 model.num_experts_per_tok=4 model.intermediate_size=512
e64 model.num_local_experts=64 model.num_experts_per_tok=16 model.intermediate_size=128
e128 model.num_local_experts=128 model.num_experts_per_tok=32 model.intermediate_size=64
seq256 data.seq_len=256 data.min_seq_len=256 train_micro_batch_size_per_gpu=32
seq512 data.seq_len=512 data.min_seq_len=512 train_micro_batch_size_per_gpu=16
seq1024 data.seq_len=1024 data.min_seq_len=1024 train_micro_batch_size_per_gpu=8
seq2048 data.seq_len=2048 data.min_seq_len=2048 train_micro_batch_size_per_gpu=4
seq4096 data.seq_len=4096 data.min_seq_len=4096 train_micro_batch_size_per_gpu=2
seq8192 data.seq_len=8192 data.min_seq_len=8192 train_micro_batch_size_per_gpu=1'

usage() {
    echo "usage: bench/train_cpu.sh [--steps N] [--threads \"T...\"] [--wait-policy passive|default|both] [--sweep] [--rows \"ROW...\"]"
    echo "       rows of --sweep: $(echo "$SWEEP_ROWS" | awk '{printf "%s ", $1}')"
    echo "       (env: FABULA=./fabula, MPIEXEC=mpiexec.mpich, PYTHON=/usr/bin/python3)"
}

die_usage() {
    echo "bench/train_cpu.sh: $1" >&2
    usage >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --sweep) SWEEP=1; shift; continue ;;
    --steps | --threads | --wait-policy | --rows)
        [ $# -ge 2 ] || die_usage "$1 needs a value"
        opt=$1 val=$2
        shift 2
        ;;
    --steps=* | --threads=* | --wait-policy=* | --rows=*)
        opt=${1%%=*} val=${1#*=}
        shift
        ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
    case "$opt" in
    --steps) STEPS=$val ;;
    --threads) THREADS=$val ;;
    --rows) ROWS=$val ;;
    --wait-policy)
        case "$val" in
        default | passive) POLICIES=$val ;;
        both) POLICIES="default passive" ;;
        *) die_usage "--wait-policy is default, passive or both, not '$val'" ;;
        esac
        ;;
    esac
done
case "$STEPS" in '' | *[!0-9]*) die_usage "--steps wants a positive integer, not '$STEPS'" ;; esac
[ -n "$THREADS" ] || die_usage "--threads wants positive integers"
for t in $THREADS; do
    case "$t" in '' | *[!0-9]* | 0*) die_usage "--threads wants positive integers, not '$t'" ;; esac
done
[ "$STEPS" -gt "$WARMUP" ] || die_usage "--steps must exceed the $WARMUP warm-up steps"
if [ -n "$ROWS" ]; then
    [ "$SWEEP" = 1 ] || die_usage "--rows picks rows of --sweep"
    for r in $ROWS; do
        echo "$SWEEP_ROWS" | awk -v r="$r" '$1 == r {f = 1} END {exit !f}' || die_usage "no row '$r' in --sweep"
    done
fi
[ "$SWEEP" = 1 ] && CONFIG=bench/configs/cpu_bench.json

FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
PYTHON=${PYTHON:-/usr/bin/python3}

[ -f "$CONFIG" ] || { echo "bench/train_cpu.sh: $CONFIG not found: run from the repository top" >&2; exit 2; }
[ -x "$FABULA" ] || { echo "bench/train_cpu.sh: no fabula binary at '$FABULA' (set FABULA=path)" >&2; exit 2; }
command -v "$MPIEXEC" >/dev/null 2>&1 || { echo "bench/train_cpu.sh: launcher '$MPIEXEC' not found (set MPIEXEC)" >&2; exit 2; }
TORCH_VERSION=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    { echo "bench/train_cpu.sh: $PYTHON cannot import torch (set PYTHON)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fabula-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# Both programs get T threads: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
# torch.set_num_threads. fabula runs BLAS on one thread inside its own
# OpenMP team (docs/cpu-threads.md); PyTorch threads its own kernels with
# OpenMP and its matmuls with OpenBLAS's pool, whose spinning libgomp's
# idle workers fight under the default wait policy. So the default here is
# OMP_WAIT_POLICY=passive for both (--wait-policy default|both for the
# other), and each side's CPU time (user + sys, whole run) is printed too:
# on a machine shared with other load it is the fairer figure.
[ -x /usr/bin/time ] || { echo "bench/train_cpu.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

# derive BASE OUT KEY=VALUE...: OUT is BASE with the dotted keys set, and
# capacity_factor 0 (dropless: both sides do the same work)
derive() {
    "$PYTHON" - "$@" <<'PYEOF'
import json, sys
base, out, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
cfg = json.load(open(base))
cfg["model"]["capacity_factor"] = 0.0
for kv in sets:
    if kv == "-":
        continue
    key, val = kv.split("=", 1)
    node = cfg
    *path, last = key.split(".")
    for k in path:
        node = node[k]
    node[last] = json.loads(val)
json.dump(cfg, open(out, "w"), indent=1)
PYEOF
}

cpu_of() { awk '/^CPU/ {printf "%.1f", $2 + $3}' "$1"; }

# Medians of tokens_per_s and step_time (ms) after the warm-up, first and
# last loss, last step's dropped assignments, fastest step (ms), median
# step_cpu_time (ms), from a metrics.jsonl.
METRICS_PY='
import json, statistics, sys
path, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if l.strip()]
if len(rows) != steps:
    sys.exit("%s: %d lines, expected %d" % (path, len(rows), steps))
timed = rows[warmup:]
# the last two: the median MFU against the sgemm peak fabula measured at
# start-up (threads alike), and the step at that peak (model_flops / peak)
print("%.1f %.2f %.4f %.4f %s %.2f %.2f %.1f %.2f" % (statistics.median(r["tokens_per_s"] for r in timed),
                                           1e3 * statistics.median(r["step_time"] for r in timed),
                                           rows[0]["loss"], rows[-1]["loss"], rows[-1].get("dropped", "?"),
                                           1e3 * min(r["step_time"] for r in timed),
                                           1e3 * statistics.median(r["step_cpu_time"] for r in timed),
                                           100 * statistics.median(r["mfu"] for r in timed),
                                           1e3 * statistics.median(r["step_time"] * r["mfu"] for r in timed)))
'

blas_of() {
    lib=$(ldd "$1" 2>/dev/null | awk '/blas/ {print $3; exit}')
    if [ -n "$lib" ]; then readlink -f "$lib"; else echo "none found by ldd"; fi
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

set_policy() {
    if [ "$1" = passive ]; then export OMP_WAIT_POLICY=passive; else unset OMP_WAIT_POLICY; fi
}

# run_fabula POLICY CONFIG: sets FAB_TPS, FAB_MS, FAB_BEST, FAB_CPU and
# FAB_CPU_MS. Both programs' stdin is /dev/null: mpiexec forwards its stdin
# to rank 0 and would read the rest of the row list.
run_fabula() {
    set_policy "$1"
    echo "-- fabula, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, load average $(loadavg)"
    rm -rf "$WORK/run"
    if ! /usr/bin/time -f "CPU %U %S" -o "$WORK/fabula.time" "$MPIEXEC" -n 1 "$FABULA" train --steps "$STEPS" \
        --run-dir "$WORK/run" "$2" >"$WORK/fabula.log" 2>&1 </dev/null; then
        tail -n 30 "$WORK/fabula.log"
        echo "bench/train_cpu.sh: fabula failed (log above)" >&2
        exit 1
    fi
    grep -E '^fabula: (data|model|run):' "$WORK/fabula.log" || true
    fab=$("$PYTHON" -c "$METRICS_PY" "$WORK/run/metrics.jsonl" "$WARMUP" "$STEPS") || exit 1
    FAB_TPS=$(echo "$fab" | awk '{print $1}')
    FAB_MS=$(echo "$fab" | awk '{print $2}')
    FAB_BEST=$(echo "$fab" | awk '{print $6}')
    FAB_CPU=$(cpu_of "$WORK/fabula.time")
    FAB_CPU_MS=$(echo "$fab" | awk '{print $7}')
    FAB_MFU=$(echo "$fab" | awk '{print $8}')
    FAB_FLOOR_MS=$(echo "$fab" | awk '{print $9}')
    echo "fabula: loss $(echo "$fab" | awk '{print $3 " -> " $4 ", last step dropped " $5 " assignments"}')"
}

# run_torch POLICY CONFIG: sets TORCH_TPS, TORCH_MS, TORCH_BEST, TORCH_CPU
# and TORCH_CPU_MS.
run_torch() {
    set_policy "$1"
    echo "-- PyTorch, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, load average $(loadavg)"
    if ! /usr/bin/time -f "CPU %U %S" -o "$WORK/torch.time" "$PYTHON" bench/torch_moe.py --config "$2" \
        --steps "$STEPS" --threads "$OMP_NUM_THREADS" --warmup "$WARMUP" >"$WORK/torch.log" 2>&1 </dev/null; then
        tail -n 30 "$WORK/torch.log"
        echo "bench/train_cpu.sh: the PyTorch side failed (log above)" >&2
        exit 1
    fi
    grep -v -e '^torch: step' -e '^RESULT' "$WORK/torch.log" || true
    grep -E "^torch: step (1|$STEPS)/" "$WORK/torch.log" || true
    res=$(grep '^RESULT ' "$WORK/torch.log") ||
        { echo "bench/train_cpu.sh: no RESULT line from the PyTorch side" >&2; exit 1; }
    TORCH_TPS=$(echo "$res" | awk '{print $3}')
    TORCH_MS=$(echo "$res" | awk '{print $5}')
    TORCH_BEST=$(echo "$res" | awk '{print $7}')
    TORCH_CPU=$(cpu_of "$WORK/torch.time")
    TORCH_CPU_MS=$(echo "$res" | awk '{print $13}')
}

echo "== fabula CPU training benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) core(s) online"
echo "threads:  $THREADS (each: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = torch.set_num_threads)"
echo "fabula:   $FABULA, BLAS $(blas_of "$FABULA")"
echo "torch:    $TORCH_VERSION ($PYTHON)"
echo "config:   $CONFIG (capacity_factor 0 on both sides), $STEPS steps, medians over the steps after the first $WARMUP"

if [ "$SWEEP" = 1 ]; then
    rows=$(echo "$SWEEP_ROWS" | awk -v pick=" $ROWS " 'pick == "  " || index(pick, " " $1 " ")')
else
    rows="$(basename "$CONFIG" .json) -"
fi

: >"$WORK/table"
echo "$rows" | while read -r row sets; do
    # shellcheck disable=SC2086
    derive "$CONFIG" "$WORK/$row.json" $sets </dev/null
    for threads in $THREADS; do
        export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
        for policy in $POLICIES; do
            echo
            echo "== row $row ($sets), $threads thread(s), policy $policy"
            run_fabula "$policy" "$WORK/$row.json"
            run_torch "$policy" "$WORK/$row.json"
            ratio=$(awk -v a="$FAB_TPS" -v b="$TORCH_TPS" 'BEGIN{printf "%.2f", a / b}')
            cratio=$(awk -v a="$FAB_CPU_MS" -v b="$TORCH_CPU_MS" 'BEGIN{printf "%.2f", b / a}')
            ceil=$(awk -v a="$FAB_FLOOR_MS" -v b="$TORCH_MS" 'BEGIN{printf "%.2f", b / a}')
            # each row also on stdout as it comes (a long sweep stopped early keeps its rows)
            printf '%-8s %3s %-8s %-18s %9.0f %9.1f %9.1f %9.1f %8s %8sx %8sx %6s %6sx\n' "$row" "$threads" \
                "$policy" "fabula" "$FAB_TPS" "$FAB_MS" "$FAB_BEST" "$FAB_CPU_MS" "$FAB_CPU" "$ratio" "$cratio" \
                "$FAB_MFU" "$ceil" | tee -a "$WORK/table"
            printf '%-8s %3s %-8s %-18s %9.0f %9.1f %9.1f %9.1f %8s %8sx %8sx\n' "$row" "$threads" "$policy" \
                "PyTorch $TORCH_VERSION" "$TORCH_TPS" "$TORCH_MS" "$TORCH_BEST" "$TORCH_CPU_MS" "$TORCH_CPU" "1.00" \
                "1.00" | tee -a "$WORK/table"
        done
    done
done
echo
echo "thr = OMP_NUM_THREADS; policy = OMP_WAIT_POLICY (default: unset); tokens/s, ms/step and CPU ms (all"
echo "threads' CPU time in the step) are medians after the warm-up, best = fastest step; run CPU = user + sys"
echo "of the whole run in s; wall x = tokens/s over PyTorch's, cpu x = PyTorch's CPU ms over fabula's;"
echo "MFU = fabula's model FLOP/s over the sgemm peak it measured at start-up (same threads), ceil x ="
echo "PyTorch's ms/step over fabula's FLOPs at that peak: the most any implementation of fabula's FLOPs"
echo "could lead PyTorch by at this sgemm rate"
printf '%-8s %3s %-8s %-18s %9s %9s %9s %9s %8s %9s %9s %6s %7s\n' row thr policy implementation tokens/s ms/step \
    "best ms" "CPU ms" "run CPU" "wall x" "cpu x" "MFU %" "ceil x"
cat "$WORK/table"
