#!/bin/sh
# Generation speed on the CPU: `fabula generate` (KV cache, greedy, batch 1)
# against transformers' generate on the same weights, same threads, side by
# side in one run, for the default config's small MoE model and a ~100M
# dense one (weights: one training step from the initialisation; speed does
# not depend on their values).
#
#   bench/generate.sh [--threads T] [--new-tokens N] [--only small|100m]
#                     [--wait-policy default|passive|both]
#
# Both sides are OpenMP programs (libgomp); on a machine other jobs load,
# spinning threads (the default OMP_WAIT_POLICY) can cost more than the work
# of a decode step, so each side runs under each policy asked for, and the
# table says which.
#
# Run from the repository top. FABULA names the binary (default ./fabula),
# HF_PYTHON the interpreter with transformers (default
# /opt/fabula-hf/bin/python). Scratch (checkpoints, ~1.3 GB for 100m) goes to
# WORK (default a new directory under /tmp, removed at the end; a WORK you
# name is kept, and a second run in it reuses its checkpoints).
# See bench/README.md "Generation".
set -eu

THREADS=$(nproc)
NEW=256
ONLY="small 100m"
POLICIES="default passive"
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --new-tokens) NEW=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --wait-policy)
        case "$2" in default | passive) POLICIES=$2 ;; both) POLICIES="default passive" ;;
        *) echo "bench/generate.sh: --wait-policy is default, passive or both" >&2; exit 2 ;; esac
        shift 2 ;;
    -h | --help) echo "usage: bench/generate.sh [--threads T] [--new-tokens N] [--only small|100m] [--wait-policy default|passive|both]"; exit 0 ;;
    *) echo "bench/generate.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case "$THREADS$NEW" in *[!0-9]*) echo "bench/generate.sh: --threads and --new-tokens want integers" >&2; exit 2 ;; esac
FABULA=${FABULA:-./fabula}
HF_PYTHON=${HF_PYTHON:-/opt/fabula-hf/bin/python}
[ -x "$FABULA" ] || { echo "bench/generate.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
"$HF_PYTHON" -c 'import transformers, h5py' 2>/dev/null ||
    { echo "bench/generate.sh: $HF_PYTHON lacks transformers or h5py (set HF_PYTHON)" >&2; exit 2; }
OWN_WORK=
if [ -z "${WORK:-}" ]; then WORK=$(mktemp -d /tmp/fabula-bench-generate.XXXXXX); OWN_WORK=1; fi
mkdir -p "$WORK"
trap '[ -n "$OWN_WORK" ] && rm -rf "$WORK"' EXIT

PROMPT="此開卷"
PIDS="261 $("$HF_PYTHON" -c "import sys; print(' '.join(str(b) for b in sys.argv[1].encode()))" "$PROMPT")"
echo "bench/generate.sh: $THREADS thread(s), $NEW new tokens, prompt <|genre_romance|>$PROMPT ($(echo $PIDS | wc -w) tokens)"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
printf '| model | params | OMP_WAIT_POLICY | fabula prefill tok/s | fabula decode tok/s | transformers prefill tok/s | transformers decode tok/s | decode speedup | checks |\n'
printf '|---|---:|---|---:|---:|---:|---:|---:|---|\n'
for name in $ONLY; do
    case "$name" in
    small) SETS="" ;;
    100m) SETS="--set model.hidden_size=768 --set model.intermediate_size=3072 --set model.num_hidden_layers=12
                --set model.num_attention_heads=12 --set model.num_key_value_heads=4 --set model.num_local_experts=0" ;;
    *) echo "bench/generate.sh: --only small or 100m, not '$name'" >&2; exit 2 ;;
    esac
    ck="$WORK/$name/checkpoints/step-00000001.h5"
    # a WORK given again keeps its checkpoints (reruns skip the training)
    [ -f "$ck" ] || OMP_NUM_THREADS=$THREADS "$FABULA" train --steps 1 --run-dir "$WORK/$name" --set data.seq_len=64 \
        --set checkpoint.save_interval=1 --set checkpoint.keep_last=1 $SETS >"$WORK/$name.train" 2>&1 ||
        { tail -n 20 "$WORK/$name.train"; exit 1; }
    params=$("$HF_PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r').attrs['num_parameters'])" "$ck")
    for pol in $POLICIES; do
        PENV=
        [ "$pol" = default ] || PENV="OMP_WAIT_POLICY=$pol"
        env $PENV OMP_NUM_THREADS=$THREADS "$FABULA" generate --checkpoint "$ck" --genre romance --prompt "$PROMPT" \
            --max-new-tokens "$NEW" --stop-at none --ids-out "$WORK/$name.ids" >/dev/null 2>"$WORK/$name.err" ||
            { cat "$WORK/$name.err"; exit 1; }
        fpre=$(sed -n 's/.*prefill [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' "$WORK/$name.err")
        fdec=$(sed -n 's/.*decode [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' "$WORK/$name.err")
        env $PENV OMP_NUM_THREADS=$THREADS "$HF_PYTHON" bench/generate_hf.py "$ck" "$WORK/$name.ids" "$NEW" "$THREADS" $PIDS \
            >"$WORK/$name.hf" 2>&1 || { tail -n 20 "$WORK/$name.hf"; exit 1; }
        line=$(grep '^hf ' "$WORK/$name.hf")
        get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        hpre=$(get prefill_tps)
        hdec=$(get decode_tps)
        speed=$(awk -v a="$fdec" -v b="$hdec" 'BEGIN { printf "%.2fx", a / b }')
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | logits vs float64 ref %s; greedy: teacher-forced %s, same prefix %s |\n' \
            "$name" "$params" "$pol" "$fpre" "$fdec" "$hpre" "$hdec" "$speed" "$(get logit_diff_vs_ref)" \
            "$(get teacher_forced_agree)" "$(get same_greedy_prefix)"
    done
done
echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
