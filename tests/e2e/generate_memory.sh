#!/bin/sh
# `fabula generate --checkpoint` reads the weights alone (ckpt_read_weights
# into a forward-only model): on a model of 56 MB of fp32 parameters, its
# peak resident memory is within 1.2x of `generate --model` on the export
# of the same checkpoint, and the two write the same text. A reader that
# builds the training state (parameters, gradients, two Adam moments)
# peaks near 4x the weights and fails this (bench/results/
# 2026-12-05-generate-peak-memory.md has the numbers of both).
. "$FB_SRCDIR/tests/e2e/lib.sh"
PEAK="$FB_SRCDIR/tests/e2e/peak_rss.py"

# 4 layers of hidden 512 and FFN 1536: 13.9 M parameters, 56 MB in fp32,
# against a process of some 30 MB without them
run_fabula 1 train --steps 2 --run-dir "$SCRATCH/run" --set model.num_local_experts=0 \
    --set model.hidden_size=512 --set model.intermediate_size=1536 --set model.num_hidden_layers=4 \
    --set model.num_attention_heads=8 --set model.num_key_value_heads=8 --set data.seq_len=64 \
    --set checkpoint.save_interval=2
check "a 13.9 M-parameter dense model trained 2 steps (exit $RC)" '[ $RC -eq 0 ]'
[ $RC -eq 0 ] || { tail -n 15 "$SCRATCH/out.txt"; finish; }
CK="$SCRATCH/run/checkpoints/step-00000002.h5"
(cd "$FB_SRCDIR" && "$FABULA" export --checkpoint "$CK" --output "$SCRATCH/hf" -q) >"$SCRATCH/export.out" 2>&1
RC=$?
check "fabula export of the checkpoint (exit $RC)" '[ $RC -eq 0 ]'
[ $RC -eq 0 ] || { cat "$SCRATCH/export.out"; finish; }

# peak NAME SOURCE...: greedy generate, its text in $SCRATCH/NAME.txt, its
# peak RSS (KiB) in $NAME_KB
peak() {
    name=$1; shift
    kb=$(cd "$FB_SRCDIR" && timeout 300 "$PEAK" "$SCRATCH/$name.txt" "$FABULA" generate "$@" --prompt "此開卷" \
        --max-new-tokens 32 --stop-at none 2>"$SCRATCH/$name.err")
    RC=$?
    [ $RC -eq 0 ] || cat "$SCRATCH/$name.err"
    eval "${name}_KB=\${kb:-0}"
}
peak ckpt --checkpoint "$CK"
check "generate --checkpoint exits 0 (exit $RC)" '[ $RC -eq 0 ]'
peak hf --model "$SCRATCH/hf"
check "generate --model EXPORT exits 0 (exit $RC)" '[ $RC -eq 0 ]'
echo "peak RSS: generate --checkpoint $ckpt_KB KiB, generate --model $hf_KB KiB"
check "the same text from the checkpoint and from its export" \
    '[ -s "$SCRATCH/ckpt.txt" ] && cmp -s "$SCRATCH/ckpt.txt" "$SCRATCH/hf.txt"'
check "the checkpoint's peak RSS ($ckpt_KB KiB) is within 1.2x of the export's ($hf_KB KiB)" \
    '[ "$hf_KB" -gt 0 ] && [ $((ckpt_KB * 5)) -le $((hf_KB * 6)) ]'
finish
