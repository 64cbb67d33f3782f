#!/bin/sh
# CPU training throughput: fabula against the same MoE model written the
# usual way in PyTorch, same machine, same threads, same batch, one run.
#
#   bench/train_cpu.sh [--steps N] [--threads T] [--wait-policy default|passive|both]
#
# Run from the repository top. Builds nothing: FABULA names the binary
# (default ./fabula), MPIEXEC the launcher (default mpiexec.mpich), PYTHON the
# interpreter that has torch (default /usr/bin/python3). See bench/README.md.
set -eu

STEPS=10
THREADS=$(nproc)
POLICIES="default passive"
WARMUP=3
CONFIG=bench/configs/cpu_small.json

usage() {
    echo "usage: bench/train_cpu.sh [--steps N] [--threads T] [--wait-policy default|passive|both]"
    echo "       (env: FABULA=./fabula, MPIEXEC=mpiexec.mpich, PYTHON=/usr/bin/python3)"
}

die_usage() {
    echo "bench/train_cpu.sh: $1" >&2
    usage >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --steps | --threads | --wait-policy)
        [ $# -ge 2 ] || die_usage "$1 needs a value"
        opt=$1 val=$2
        shift 2
        ;;
    --steps=* | --threads=* | --wait-policy=*)
        opt=${1%%=*} val=${1#*=}
        shift
        ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
    case "$opt" in
    --steps) STEPS=$val ;;
    --threads) THREADS=$val ;;
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
case "$THREADS" in '' | *[!0-9]* | 0) die_usage "--threads wants a positive integer, not '$THREADS'" ;; esac
[ "$STEPS" -gt "$WARMUP" ] || die_usage "--steps must exceed the $WARMUP warm-up steps"

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

# Both programs: OpenMP and OpenBLAS (Debian's pthreads build, the same
# library for both) get T threads each. Neither calls BLAS from inside an
# OpenMP region, but with OMP_WAIT_POLICY unset idle libgomp workers spin
# after every parallel region and take cores from the OpenBLAS threads. So
# each comparison runs under libgomp's default and under
# OMP_WAIT_POLICY=passive, the same setting for both programs each time.
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"

# Medians of tokens_per_s and step_time (ms) after the warm-up, first and
# last loss, last step's dropped assignments, fastest step (ms), from a
# metrics.jsonl.
METRICS_PY='
import json, statistics, sys
path, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if l.strip()]
if len(rows) != steps:
    sys.exit("%s: %d lines, expected %d" % (path, len(rows), steps))
timed = rows[warmup:]
print("%.1f %.2f %.4f %.4f %s %.2f" % (statistics.median(r["tokens_per_s"] for r in timed),
                                      1e3 * statistics.median(r["step_time"] for r in timed),
                                      rows[0]["loss"], rows[-1]["loss"], rows[-1].get("dropped", "?"),
                                      1e3 * min(r["step_time"] for r in timed)))
'

blas_of() {
    lib=$(ldd "$1" 2>/dev/null | awk '/blas/ {print $3; exit}')
    if [ -n "$lib" ]; then readlink -f "$lib"; else echo "none found by ldd"; fi
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

set_policy() {
    if [ "$1" = passive ]; then export OMP_WAIT_POLICY=passive; else unset OMP_WAIT_POLICY; fi
}

# run_fabula POLICY: sets FAB_TPS, FAB_MS and FAB_BEST.
run_fabula() {
    set_policy "$1"
    echo "-- fabula, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, load average $(loadavg)"
    rm -rf "$WORK/run"
    if ! "$MPIEXEC" -n 1 "$FABULA" train --steps "$STEPS" --run-dir "$WORK/run" "$CONFIG" \
        >"$WORK/fabula.log" 2>&1; then
        tail -n 30 "$WORK/fabula.log"
        echo "bench/train_cpu.sh: fabula failed (log above)" >&2
        exit 1
    fi
    grep -E '^fabula: (data|model|run):' "$WORK/fabula.log" || true
    fab=$("$PYTHON" -c "$METRICS_PY" "$WORK/run/metrics.jsonl" "$WARMUP" "$STEPS") || exit 1
    FAB_TPS=$(echo "$fab" | awk '{print $1}')
    FAB_MS=$(echo "$fab" | awk '{print $2}')
    FAB_BEST=$(echo "$fab" | awk '{print $6}')
    echo "fabula: loss $(echo "$fab" | awk '{print $3 " -> " $4 ", last step dropped " $5 " assignments"}')"
}

# run_torch POLICY: sets TORCH_TPS, TORCH_MS and TORCH_BEST.
run_torch() {
    set_policy "$1"
    echo "-- PyTorch, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, load average $(loadavg)"
    if ! "$PYTHON" bench/torch_moe.py --config "$CONFIG" --steps "$STEPS" --threads "$THREADS" \
        --warmup "$WARMUP" >"$WORK/torch.log" 2>&1; then
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
}

echo "== fabula CPU training benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) core(s) online"
echo "threads:  $THREADS (OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = torch.set_num_threads)"
echo "fabula:   $FABULA, BLAS $(blas_of "$FABULA")"
echo "torch:    $TORCH_VERSION ($PYTHON)"
echo "config:   $CONFIG, $STEPS steps, medians over the steps after the first $WARMUP"

: >"$WORK/table"
for policy in $POLICIES; do
    echo
    run_fabula "$policy"
    run_torch "$policy"
    ratio=$(awk -v a="$FAB_TPS" -v b="$TORCH_TPS" 'BEGIN{printf "%.2f", a / b}')
    printf '%-8s %-18s %9.0f %9.1f %9.1f %8sx\n' "$policy" "fabula" "$FAB_TPS" "$FAB_MS" "$FAB_BEST" \
        "$ratio" >>"$WORK/table"
    printf '%-8s %-18s %9.0f %9.1f %9.1f %8sx\n' "$policy" "PyTorch $TORCH_VERSION" "$TORCH_TPS" "$TORCH_MS" \
        "$TORCH_BEST" "1.00" >>"$WORK/table"
done

echo
echo "policy = OMP_WAIT_POLICY (default: unset); tokens/s and ms/step are medians, best = fastest step;"
echo "vs torch = tokens/s over PyTorch's under the same policy"
printf '%-8s %-18s %9s %9s %9s %9s\n' policy implementation tokens/s ms/step "best ms" "vs torch"
cat "$WORK/table"
