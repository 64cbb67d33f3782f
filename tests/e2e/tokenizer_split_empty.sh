#!/bin/sh
# A Split pre-tokenizer whose matches can be empty (an empty Regex or
# String pattern, x*, \s*, a lookahead) gives the ids of the `tokenizers`
# Python package, for every behavior fabula reads and both invert values,
# before and after ByteLevel (tests/hf_split_empty.py); Removed is refused.
# Skipped (77) without a Python with `tokenizers`.
. "$FB_SRCDIR/tests/e2e/lib.sh"
need_tokenizers_python
"$PY" "$FB_SRCDIR/tests/hf_split_empty.py" --fabula "$FABULA" --launcher "$MPIEXEC -n 1" \
    --base "$FB_SRCDIR/tests/data/tokenizers/gpt2/tokenizer.json" --workdir "$SCRATCH"
