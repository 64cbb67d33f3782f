#!/bin/sh
# `fabula train --dry-run [--world N]` is a pre-flight of the whole job on
# one process, before any compute (docs/config.md, "Pre-flight"):
#  - the effective config and the layout for N ranks, the memory of a rank
#    equal to `fabula plan memory`'s for that world;
#  - the corpus and the tokenizer opened and matched: a missing one is exit
#    4 naming its key, a corpus from another tokenizer exit 3;
#  - samples a step against the corpus, data.seq_len against prep's windows;
#  - the warnings the run prints at start (the config's, the data's), the
#    CPU backend's fp32 with bf16 asked for, where the run resumes;
#  - --world goes with --dry-run on one process (else exit 2).
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
SAMPLE="$FB_SRCDIR/inputs/sample.jsonl"

pre() { # ARGS...: the dry run on one process, from the scratch directory
    timeout 120 "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" "$@" >out.txt 2>err.txt
    RC=$?
}
show() { sed 's/^/  | /' err.txt | head -n 8; }
eff() { sed -n '/^fabula: effective config:/,$p' out.txt | sed -n "s/^  \"$1\": \([0-9.e+-]*\),\{0,1\}\$/\1/p"; }

# ---- the layout and memory of 8 ranks, on one process
pre --world 8 --set "data.train=$SAMPLE" --set parallel.expert_parallel_size=2 --set zero_optimization.stage=1
check "--world 8 on one process: exit 0, the layout of 8 ranks" \
    '[ $RC -eq 0 ] && grep -q "^fabula: pre-flight for 8 rank(s), nothing trained:" out.txt &&
     grep -q "layout: world 8 = pp 1 x dp 8 x tp 1; ep 2 (the experts of each MoE layer over 2 ranks, 4 copies of each); ZeRO stage 1" out.txt' || show
MICRO=$(eff train_micro_batch_size_per_gpu)
check "the effective config is for 8 ranks: train_batch_size = 8 x micro" \
    '[ -n "$MICRO" ] && [ "$(eff train_batch_size)" = "$((8 * ${MICRO:-0}))" ]'
"$FABULA" plan memory --world 8 --set parallel.expert_parallel_size=2 --set zero_optimization.stage=1 >plan.txt 2>&1
PLAN=$(awk '$1 == "total" {print $2}' plan.txt)
MINE=$(sed -n 's/.*at peak; \([0-9.]*\) MiB device.*/\1/p' out.txt)
check "the memory of a rank is fabula plan memory's ($MINE MiB against $PLAN)" '[ -n "$PLAN" ] && [ "$MINE" = "$PLAN" ]'
check "samples a step against the corpus's windows" \
    'grep -q "step: train_batch_size 64 = 8 a micro-batch x 1 accumulation step(s) x 8 data-parallel rank(s): 64 of [0-9]* samples a step, an epoch every" out.txt'
pre --world 8 --set "data.train=$SAMPLE" --set tensor_parallel.autotp_size=3
check "a layout 8 ranks cannot build: exit 2 naming the key" \
    '[ $RC -eq 2 ] && grep -q "tensor_parallel.autotp_size" err.txt'

# ---- --world with a real run, or under mpiexec
timeout 60 "$FABULA" train --world 4 >out.txt 2>err.txt
RC=$?
check "--world without --dry-run: exit 2" '[ $RC -eq 2 ] && grep -q "world N plans a run of N ranks: it goes with --dry-run" err.txt'
timeout 60 $MPIEXEC -n 2 "$FABULA" train --dry-run --world 4 --set "data.train=$SAMPLE" >out.txt 2>err.txt
RC=$?
check "--world under mpiexec -n 2: exit 2, one message" \
    '[ $RC -eq 2 ] && [ "$(grep -c "fabula: error:" err.txt)" -eq 1 ] && grep -q "start it without mpiexec" err.txt'

# ---- missing inputs are errors here, named
pre --set data.corpus=missing.h5
check "a missing data.corpus: exit 4 naming it" \
    '[ $RC -eq 4 ] && grep -q "error: data.corpus = .missing.h5.: No such file or directory" err.txt' || show
pre --set "data.train=$SAMPLE" --set data.tokenizer=missing.json
check "a missing data.tokenizer: exit 4 naming it" \
    '[ $RC -eq 4 ] && grep -q "error: data.tokenizer = .missing.json.: No such file or directory" err.txt' || show
pre
check "the default config away from the source tree: exit 4 naming data.train" \
    '[ $RC -eq 4 ] && grep -q "error: data.train = .inputs/sample.jsonl.: No such file or directory: the built-in default" err.txt' || show

# ---- a prepared corpus: tokenizer matched, lengths against prep's windows
"$FABULA" tokenizer train --input "$SAMPLE" --output tok.json --vocab-size 300 >tok.out 2>&1 || { cat tok.out; exit 99; }
"$FABULA" prep -q -t tok.json --max-seq-len 64 --overlap 8 --min-seq-len 16 -o corpus.h5 "$SAMPLE" >prep.out 2>&1 ||
    { cat prep.out; exit 99; }
C="--set data.corpus=corpus.h5 --set data.tokenizer=tok.json --set model.vocab_size=320"
pre $C --set data.seq_len=128
check "corpus and tokenizer matched: exit 0, the tokenizer is the corpus's" \
    '[ $RC -eq 0 ] && grep -q "tokenizer: tok.json, the one the corpus was made with (fabula-bpe, 300 ids" out.txt' || show
check "data.seq_len 128 against prep's windows of 64: said" \
    'grep -q "data: corpus.h5: [0-9]* training samples, .*prep.s windows up to 64 tokens, data.seq_len 128 (no sample is longer than prep.s windows)" out.txt'
pre $C --set data.seq_len=32
check "data.seq_len 32 under prep's 64: the run's warning about cut samples, in the dry run" \
    '[ $RC -eq 0 ] && grep -q "warning: corpus.h5: [0-9]* samples are longer than data.seq_len = 32 and are cut to it" err.txt' || show
N=$(sed -n 's/.*data: corpus.h5: \([0-9]*\) training samples.*/\1/p' out.txt)
pre $C --set data.seq_len=64 --set train_micro_batch_size_per_gpu=$N --set gradient_accumulation_steps=2
check "train_batch_size twice the corpus: each sample about 2 times a step" \
    '[ $RC -eq 0 ] && grep -q "$((N * 2)) samples a step from $N, each sample about 2.0 times a step" out.txt' || show
pre --set data.corpus=corpus.h5 --set data.tokenizer=bytes
check "a corpus from another tokenizer: exit 3 naming both" \
    '[ $RC -eq 3 ] && grep -q "corpus.h5 was made with another tokenizer" err.txt' || show

# ---- the warnings the run prints at start, and where it resumes
pre --set "data.train=$SAMPLE" --set train_batch_size=16 --set gradient_accumulation_steps=2 --set bf16.enabled=true
check "the config's warnings and the CPU backend's fp32 with bf16 asked for" \
    '[ $RC -eq 0 ] && grep -q "warning: train_batch_size 16 with gradient_accumulation_steps leaves the micro-batch to the rank count" err.txt &&
     grep -q "note: bf16.enabled, but the CPU backend computes in fp32" out.txt' || show
check "no checkpoint: the run starts at step 0" 'grep -q "resume: none (run.resume \"auto\"): the run starts at step 0" out.txt'
(cd "$FB_SRCDIR" && timeout 120 "$FABULA" train --steps 2 --run-dir "$SCRATCH/rd" --set model.hidden_size=32 \
    --set model.intermediate_size=64 --set data.seq_len=64) >train.out 2>&1 || { tail -5 train.out; exit 99; }
pre --set "data.train=$SAMPLE" --set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=64 \
    --steps 2
check "after 2 steps: the dry run names the checkpoint it resumes from" \
    '[ $RC -eq 0 ] && grep -q "resume: from .*rd/checkpoints/step-00000002.h5 at step 2 (run.resume \"auto\")" out.txt' || show
check "the dry run wrote nothing in the run directory" '[ "$(wc -l <rd/metrics.jsonl)" -eq 2 ]'
finish
