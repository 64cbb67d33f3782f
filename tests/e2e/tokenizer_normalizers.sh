#!/bin/sh
# tokenizer.json normalizers (each one `tokenizers` has that fabula applies)
# give the ids of the `tokenizers` Python package on the sample novels, on
# NFD and NFKD copies of them and on tricky texts; a file with several
# unsupported parts is refused listing them all; truncation and padding are
# said to be ignored, once. Skipped (77) without a Python with `tokenizers`.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=
for p in "${PYTHON_TOKENIZERS:-}" "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import tokenizers' >/dev/null 2>&1; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP: no Python with the 'tokenizers' package (tried \$PYTHON_TOKENIZERS, \$PYTHON, /usr/bin/python3," \
        "python3); install it: /usr/bin/python3 -m pip install --break-system-packages tokenizers"
    exit 77
fi
"$PY" "$FB_SRCDIR/tests/hf_normalizers.py" --fabula "$FABULA" --launcher "$MPIEXEC -n 1" \
    --corpus "$FB_SRCDIR/inputs/sample.jsonl" --workdir "$SCRATCH" \
    --base "$FB_SRCDIR/tests/data/tokenizers/gpt2/tokenizer.json"
