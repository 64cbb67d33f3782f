#!/bin/sh
# `fabula generate` (docs/generate.md) on tiny dense and MoE models trained
# a few steps (and an MoE one saved from 2 ranks, ep 2, ZeRO 3): greedy output equals the float64 reference model's greedy
# decode (validation/reference_model.py, full forward every step, weights
# from the checkpoint by h5py) token for token, with and without --genre and
# with a repetition penalty; a seeded sampling run is the same run to run
# and with 1 or 2 threads, and another seed differs; --stop-at chapter ends
# samples at <|chapter_sep|>, the default only at <|eos|>; stdout is valid
# UTF-8 and equals the decode of --ids-out; bad input gets a message and the
# documented exit code. Skipped without a Python with torch and h5py.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import torch, h5py' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no Python with torch and h5py"; exit 77; }
REF="$FB_SRCDIR/tests/e2e/generate_ref.py"

# a learning rate without warmup, so that 40 steps give a model whose
# greedy choices are clear of float32 rounding (the margins are printed)
train() { # NAME ARGS... (NP=2 for two ranks)
    name=$1; shift
    run_fabula "${NP:-1}" train --steps 40 --run-dir "$SCRATCH/$name" --set model.hidden_size=32 \
        --set model.intermediate_size=64 --set data.seq_len=64 --set optimizer.params.lr=0.01 \
        --set scheduler.params.warmup_num_steps=1 --set checkpoint.save_interval=40 "$@"
    [ $RC -eq 0 ] || tail -n 15 "$SCRATCH/out.txt"
}
gen() { # OUT ARGS...: stdout in $SCRATCH/OUT, stderr in $SCRATCH/OUT.err
    out=$1; shift
    (cd "$FB_SRCDIR" && timeout 300 "$FABULA" generate "$@") >"$SCRATCH/$out" 2>"$SCRATCH/$out.err"
    RC=$?
    [ $RC -eq 0 ] || cat "$SCRATCH/$out.err"
}
PROMPT="此開卷"
PIDS=$("$PY" -c "import sys; print(' '.join(str(b) for b in sys.argv[1].encode()))" "$PROMPT")
ROMANCE=261

train dense --set model.num_local_experts=0
check "a tiny dense model trained" '[ $RC -eq 0 ]'
train moe --set model.num_local_experts=4 --set model.num_experts_per_tok=2 --set model.num_key_value_heads=1
check "a tiny MoE model (4 experts, top-2, GQA 4/1) trained" '[ $RC -eq 0 ]'
NP=2 train moe_ep2 --set model.num_local_experts=4 --set model.num_experts_per_tok=2 \
    --set parallel.expert_parallel_size=2 --set zero_optimization.stage=3
check "the MoE model on 2 ranks, ep 2, ZeRO 3 (sharded checkpoint) trained" '[ $RC -eq 0 ]'

# greedy NAME LABEL PENALTY GENRE_ID ARGS...
greedy() {
    name=$1; label=$2; pen=$3; gid=$4; shift 4
    ck="$SCRATCH/$name/checkpoints/step-00000040.h5"
    gen "$label.txt" --checkpoint "$ck" --prompt "$PROMPT" --max-new-tokens 64 --ids-out "$SCRATCH/$label.ids" \
        --repetition-penalty "$pen" "$@"
    check "$label: fabula generate exits 0" '[ $RC -eq 0 ]'
    timeout 600 "$PY" "$REF" greedy "$ck" 64 "$pen" $gid $PIDS >"$SCRATCH/$label.ref" 2>&1
    echo "$label: fabula    $(cat "$SCRATCH/$label.ids")"
    echo "$label: reference $(head -n 1 "$SCRATCH/$label.ref") ($(tail -n 1 "$SCRATCH/$label.ref"))"
    check "$label: 64 greedy tokens equal the float64 reference's" \
        '[ "$(cat "$SCRATCH/$label.ids")" = "$(head -n 1 "$SCRATCH/$label.ref")" ] && [ "$(wc -w <"$SCRATCH/$label.ids")" -eq 64 ]'
    check "$label: stdout is valid UTF-8 and the decode of the ids" \
        '"$PY" "$REF" decode "$SCRATCH/$label.ids" "$SCRATCH/$label.txt" 258'
}
for m in dense moe; do
    greedy $m $m-plain 1 ""
    greedy $m $m-genre 1 $ROMANCE --genre romance
    greedy $m $m-penalty 1.3 $ROMANCE --genre Romance
done
# a checkpoint saved sharded is read whole on the one process
greedy moe_ep2 moe_ep2-genre 1 $ROMANCE --genre romance
# the genre token and the prompt's 9 bytes
check "the speed is reported on stderr" \
    'grep -Eq "^fabula generate: prefill 10 tokens in .* tokens/s\); decode 64 tokens in .* tokens/s\), 1 sample\(s\)(; decode steps on [0-9]+ threads: [0-9]+, on 1: [0-9]+.*)?$" "$SCRATCH/moe-genre.txt.err"'

CK="$SCRATCH/moe/checkpoints/step-00000040.h5"
SAMPLE="--checkpoint $CK --genre romance --prompt $PROMPT --max-new-tokens 48 --num-samples 3 --temperature 0.9 --top-k 40 --top-p 0.95 --repetition-penalty 1.1"
OMP_NUM_THREADS=1 gen s1.txt $SAMPLE --seed 7 --ids-out "$SCRATCH/s1.ids"
check "sampling, seed 7, 1 thread" '[ $RC -eq 0 ] && [ "$(wc -l <"$SCRATCH/s1.ids")" -eq 3 ]'
OMP_NUM_THREADS=1 gen s1b.txt $SAMPLE --seed 7 --ids-out "$SCRATCH/s1b.ids"
OMP_NUM_THREADS=2 gen s2.txt $SAMPLE --seed 7 --ids-out "$SCRATCH/s2.ids"
check "the same seed again, and with 2 threads: the same ids and text" \
    'cmp -s "$SCRATCH/s1.ids" "$SCRATCH/s1b.ids" && cmp -s "$SCRATCH/s1.ids" "$SCRATCH/s2.ids" &&
     cmp -s "$SCRATCH/s1.txt" "$SCRATCH/s2.txt"'
check "the 3 samples differ from each other" \
    '[ "$(sort -u "$SCRATCH/s1.ids" | wc -l)" -eq 3 ]'
gen s8.txt $SAMPLE --seed 8 --ids-out "$SCRATCH/s8.ids"
check "another seed: other samples" '[ $RC -eq 0 ] && ! cmp -s "$SCRATCH/s1.ids" "$SCRATCH/s8.ids"'
check "sampled stdout is valid UTF-8 and the decode of the ids" '"$PY" "$REF" decode "$SCRATCH/s1.ids" "$SCRATCH/s1.txt" 258'

# Near-uniform draws (temperature 100) reach <|chapter_sep|> (259) within
# 128 tokens in some of 16 samples; the draws of a sample depend on (seed,
# sample, step) only, so both runs agree up to the stop.
STOPS="--checkpoint $CK --prompt $PROMPT --max-new-tokens 128 --num-samples 16 --temperature 100 --seed 3"
gen chap.txt $STOPS --stop-at chapter --ids-out "$SCRATCH/chap.ids"
check "--stop-at chapter runs" '[ $RC -eq 0 ]'
gen eos.txt $STOPS --ids-out "$SCRATCH/eos.ids"
check "the default (eos) runs" '[ $RC -eq 0 ]'
gen none.txt $STOPS --stop-at none --ids-out "$SCRATCH/none.ids"
check "--stop-at none runs" '[ $RC -eq 0 ]'
"$PY" - "$SCRATCH/chap.ids" "$SCRATCH/eos.ids" "$SCRATCH/none.ids" >"$SCRATCH/stops.txt" <<'PYEOF'
import sys
chap = [[int(x) for x in l.split()] for l in open(sys.argv[1])]
eos = [[int(x) for x in l.split()] for l in open(sys.argv[2])]
none = [[int(x) for x in l.split()] for l in open(sys.argv[3])]
ok = len(chap) == len(eos) == len(none) == 16
# none: 128 tokens always, the eos run its prefix, and it runs past an eos
ok &= all(len(n) == 128 and n[:len(e)] == e for e, n in zip(eos, none)) and any(258 in n[:-1] for n in none)
stopped = 0
for c, e in zip(chap, eos):
    # chapter: a sample ends at its first 258 or 259, else runs 128 tokens
    first = next((i for i, t in enumerate(c) if t in (258, 259)), None)
    ok &= (first == len(c) - 1) if first is not None else len(c) == 128
    stopped += first is not None and c[-1] == 259
    # eos only: ends at its first 258; the chapter run is its prefix
    f2 = next((i for i, t in enumerate(e) if t == 258), None)
    ok &= (f2 == len(e) - 1) if f2 is not None else len(e) == 128
    ok &= e[:len(c)] == c
print("samples stopped at <|chapter_sep|>: %d of 16; eos-only lengths %s" % (stopped, [len(e) for e in eos]))
sys.exit(0 if ok and stopped > 0 and any(259 in e[:-1] for e in eos) else 1)
PYEOF
SR=$?
cat "$SCRATCH/stops.txt"
check "--stop-at chapter stops at <|chapter_sep|>, the default runs past it, none past <|eos|>; all agree up to the stop" '[ $SR -eq 0 ]'
check "stopped samples: stdout is the decode of the ids without the stop token" \
    '"$PY" "$REF" decode "$SCRATCH/chap.ids" "$SCRATCH/chap.txt" 258 259'

# bad input
gen bad.txt --checkpoint "$SCRATCH/none.h5" --prompt x
check "a missing checkpoint: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "none.h5" "$SCRATCH/bad.txt.err"'
echo "not a checkpoint" >"$SCRATCH/fake.h5"
gen bad.txt --checkpoint "$SCRATCH/fake.h5" --prompt x
check "not a checkpoint: exit 3" '[ $RC -eq 3 ] && grep -q "fake.h5" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --genre elvish
check "an unknown genre: exit 2 listing the valid ones" \
    '[ $RC -eq 2 ] && grep -q "genre .elvish.: not a genre of the tokenizer; valid: fantasy, romance, urban, scifi, historical, wuxia, mystery, other, unknown" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --temperature 1 --top-p 0
check "--top-p 0: exit 2" '[ $RC -eq 2 ] && grep -q "top-p 0: expected a number in (0, 1]" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --temperature 1 --top-p 1.5
check "--top-p 1.5: exit 2" '[ $RC -eq 2 ] && grep -q "top-p" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --top-k 5
check "--top-k without --temperature: exit 2 saying so" '[ $RC -eq 2 ] && grep -q "top-k applies to sampling only" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt ""
check "an empty prompt and no genre: exit 2" '[ $RC -eq 2 ] && grep -q "nothing to continue" "$SCRATCH/bad.txt.err"'
gen empty.txt --checkpoint "$CK" --genre wuxia --max-new-tokens 4 --ids-out "$SCRATCH/empty.ids"
check "an empty prompt with a genre: 4 tokens" '[ $RC -eq 0 ] && [ "$(wc -w <"$SCRATCH/empty.ids")" -eq 4 ]'
: >"$SCRATCH/empty_prompt.txt"
gen bad.txt --checkpoint "$CK" --prompt-file "$SCRATCH/empty_prompt.txt"
check "an empty --prompt-file and no genre: exit 2" '[ $RC -eq 2 ] && grep -q "nothing to continue" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt-file "$SCRATCH/nowhere.txt"
check "a missing --prompt-file: exit 4" '[ $RC -eq 4 ] && grep -q "nowhere.txt" "$SCRATCH/bad.txt.err"'
printf '%s' "$PROMPT" >"$SCRATCH/prompt.txt"
gen pf.txt --checkpoint "$SCRATCH/dense/checkpoints/step-00000040.h5" --prompt-file "$SCRATCH/prompt.txt" \
    --max-new-tokens 64 --ids-out "$SCRATCH/pf.ids"
check "--prompt-file: the same ids as --prompt" '[ $RC -eq 0 ] && cmp -s "$SCRATCH/pf.ids" "$SCRATCH/dense-plain.ids"'
gen bad.txt --checkpoint "$CK" --prompt x --stop-at page
check "--stop-at page: exit 2" '[ $RC -eq 2 ] && grep -q "expected eos, chapter or none" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --tokenizer "$SCRATCH/gone.json"
check "a tokenizer that is gone: exit 4 naming it" '[ $RC -eq 4 ] && grep -q "gone.json" "$SCRATCH/bad.txt.err"'
gen bad.txt --checkpoint "$CK" --prompt x --max-new-tokens 0
check "--max-new-tokens 0: exit 2" '[ $RC -eq 2 ]'
gen bad.txt --prompt x
check "neither --checkpoint nor --model: exit 2" '[ $RC -eq 2 ] && grep -q "give one of --checkpoint CKPT and --model DIR" "$SCRATCH/bad.txt.err"'
run_fabula 2 generate --checkpoint "$CK" --prompt x
check "under mpiexec -n 2: exit 2, one process only" '[ $RC -eq 2 ] && grep -q "runs on one process" "$SCRATCH/out.txt"'
gen help.txt --help
check "--help: exit 0, the usage" '[ $RC -eq 0 ] && grep -q "usage: fabula generate (--checkpoint CKPT | --model DIR)" "$SCRATCH/help.txt"'
finish
