#!/bin/sh
# Hugging Face equivalence: fabula's ids equal those of the `tokenizers`
# Python package on every novel of the sample, for tokenizers trained by
# that package (GPT-2 ByteLevel, Qwen2-style Split + ByteLevel, Llama-3 with
# ignore_merges, every Split behavior) and for the real GPT-2, MiniMind and
# Falcon (Punctuation, Digits/Split after ByteLevel, 28 bytes missing from
# its vocab) tokenizer.json files in tests/data/tokenizers. Needs a Python with
# `tokenizers` (tools/install-deps.sh installs it); skipped (77) without.
. "$FB_SRCDIR/tests/e2e/lib.sh"
need_tokenizers_python
echo "using $PY (tokenizers $("$PY" -c 'import tokenizers; print(tokenizers.__version__)'))"
D="$FB_SRCDIR/tests/data/tokenizers"
"$PY" "$FB_SRCDIR/tests/hf_equivalence.py" --fabula "$FABULA" --launcher "$MPIEXEC -n 1" \
    --corpus "$FB_SRCDIR/inputs/sample.jsonl" --workdir "$SCRATCH" \
    --tokenizer-json "$D/gpt2/tokenizer.json" --tokenizer-json "$D/minimind/tokenizer.json" \
    --tokenizer-json "$D/falcon/tokenizer.json"
