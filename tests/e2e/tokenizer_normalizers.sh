#!/bin/sh
# tokenizer.json normalizers (each one `tokenizers` has that fabula applies)
# give the ids of the `tokenizers` Python package on the sample novels, on
# NFD and NFKD copies of them and on tricky texts; a file with several
# unsupported parts is refused listing them all; truncation and padding are
# said to be ignored, once. Skipped (77) without a Python with `tokenizers`.
. "$FB_SRCDIR/tests/e2e/lib.sh"
need_tokenizers_python
"$PY" "$FB_SRCDIR/tests/hf_normalizers.py" --fabula "$FABULA" --launcher "$MPIEXEC -n 1" \
    --corpus "$FB_SRCDIR/inputs/sample.jsonl" --workdir "$SCRATCH" \
    --base "$FB_SRCDIR/tests/data/tokenizers/gpt2/tokenizer.json"
