#!/bin/sh
# Encode throughput per core: fabula against the Hugging Face `tokenizers`
# package, same tokenizer.json, same novels, one core each, one run.
#
#   bench/tokenizer_encode.sh [CORPUS] [WORKDIR]
#
# CORPUS defaults to ../shared/corpus/novels.jsonl (relative to the
# repository top), WORKDIR to /tmp/fabula-bench-tokenizer. Environment:
# FABULA (default ./fabula), MPIEXEC (default mpiexec.mpich), PYTHON (a
# Python with `tokenizers`, default /usr/bin/python3), VOCAB (default 32000),
# REPEAT (runs per side, best kept; default 3).
#
# 1. trains a byte-level BPE tokenizer.json with `tokenizers` (ByteLevel,
#    vocab VOCAB) on the corpus, once;
# 2. encodes every novel with `tokenizers` (RAYON_NUM_THREADS=1,
#    TOKENIZERS_PARALLELISM=false; tok.encode per novel; only the encode
#    calls are timed) and with `fabula tokenizer encode` on one rank with
#    OMP_NUM_THREADS=1 (it times only its encode loop), REPEAT times each,
#    each run a fresh process (cold caches on both sides);
# 3. checks that both produced the same ids, and prints MB/s per core side
#    by side, plus fabula with its own tokenizer trained on the same corpus.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${1:-$top/../shared/corpus/novels.jsonl}
WORK=${2:-/tmp/fabula-bench-tokenizer}
FABULA=${FABULA:-./fabula}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
PYTHON=${PYTHON:-/usr/bin/python3}
VOCAB=${VOCAB:-32000}
REPEAT=${REPEAT:-3}

[ -r "$CORPUS" ] || { echo "bench/tokenizer_encode.sh: cannot read corpus $CORPUS" >&2; exit 2; }
[ -x "$FABULA" ] || { echo "bench/tokenizer_encode.sh: no fabula binary at $FABULA (set FABULA)" >&2; exit 2; }
"$PYTHON" -c 'import tokenizers' 2>/dev/null ||
    { echo "bench/tokenizer_encode.sh: $PYTHON has no 'tokenizers' package (tools/install-deps.sh)" >&2; exit 2; }
mkdir -p "$WORK"
HF_JSON="$WORK/hf_bytelevel_$VOCAB.json"
FB_JSON="$WORK/fabula_$VOCAB.json"

echo "corpus: $CORPUS ($(wc -c <"$CORPUS") bytes, $(grep -c . "$CORPUS") novels)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tokenizers $("$PYTHON" -c 'import tokenizers; print(tokenizers.__version__)'), $("$FABULA" --version | head -1)"
if [ ! -s "$HF_JSON" ]; then
    "$PYTHON" "$top/bench/tokenizer_encode.py" train "$CORPUS" "$HF_JSON" --vocab-size "$VOCAB"
fi
if [ ! -s "$FB_JSON" ]; then
    $MPIEXEC -n 1 "$FABULA" tokenizer train --input "$CORPUS" --output "$FB_JSON" --vocab-size "$VOCAB" |
        grep -E "wrote|learning"
fi

best_hf=0 best_fb=0 best_own=0
i=0
while [ $i -lt "$REPEAT" ]; do
    i=$((i + 1))
    line=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
        "$PYTHON" "$top/bench/tokenizer_encode.py" encode "$HF_JSON" "$CORPUS" "$WORK/hf_ids.bin")
    hf=$(echo "$line" | awk '{printf "%.2f", $2 / $4 / 1e6}')
    fb=$(OMP_NUM_THREADS=1 $MPIEXEC -n 1 "$FABULA" tokenizer encode --tokenizer "$HF_JSON" --input "$CORPUS" \
        --output "$WORK/fabula_ids.bin" --force | sed -n 's/.* = \([0-9.]*\) MB\/s per thread/\1/p')
    own=$(OMP_NUM_THREADS=1 $MPIEXEC -n 1 "$FABULA" tokenizer encode --tokenizer "$FB_JSON" --input "$CORPUS" \
        --output "$WORK/fabula_own_ids.bin" --force | sed -n 's/.* = \([0-9.]*\) MB\/s per thread/\1/p')
    echo "run $i: tokenizers $hf MB/s, fabula $fb MB/s, fabula (own tokenizer) $own MB/s"
    best_hf=$(echo "$best_hf $hf" | awk '{print ($2 > $1) ? $2 : $1}')
    best_fb=$(echo "$best_fb $fb" | awk '{print ($2 > $1) ? $2 : $1}')
    best_own=$(echo "$best_own $own" | awk '{print ($2 > $1) ? $2 : $1}')
done
if cmp -s "$WORK/hf_ids.bin" "$WORK/fabula_ids.bin"; then same="identical"; else same="DIFFERENT"; fi
tok_hf=$(echo "$line" | awk '{print $3}')
echo
echo "ids of fabula and tokenizers on the whole corpus: $same ($tok_hf tokens)"
printf '%-52s %12s %10s\n' "encoder (1 core, best of $REPEAT)" "MB/s/core" "vs HF"
printf '%-52s %12s %10s\n' "tokenizers (Rust, HF tokenizer.json, vocab $VOCAB)" "$best_hf" "1.00x"
printf '%-52s %12s %10s\n' "fabula (C, same tokenizer.json)" "$best_fb" \
    "$(echo "$best_fb $best_hf" | awk '{printf "%.2fx", $1 / $2}')"
printf '%-52s %12s %10s\n' "fabula (own fabula-bpe file, vocab $VOCAB)" "$best_own" \
    "$(echo "$best_own $best_hf" | awk '{printf "%.2fx", $1 / $2}')"
[ "$same" = identical ]
