#!/bin/sh
# DeepSpeed configs as users write them (tests/data/ds_configs, see its
# SOURCES.md) run unchanged under `fabula train --dry-run`, or are refused
# with exit 2 naming the key. The effective config must hold the batch triple
# that DeepSpeed's rule gives: train_batch_size = micro * gas * world size.
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
DS="$FB_SRCDIR/tests/data/ds_configs"
RD="$SCRATCH/rundir"

# dry NP [OPTIONS...] [CONFIG]: dry run on NP ranks, output in out.txt/err.txt
# (options before the config files: `fabula train` stops at the first file).
dry() {
    np=$1; shift
    timeout 120 $MPIEXEC -n "$np" "$FABULA" train --dry-run --set "run.run_dir=$RD" \
        --set "data.train=$FB_SRCDIR/inputs/sample.jsonl" "$@" \
        >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
    RC=$?
}

# The value of a top-level integer key in the effective config (printed
# after 'fabula: effective config:', indented by 2 at the top level).
eff() {
    sed -n '/^fabula: effective config:/,$p' "$SCRATCH/out.txt" | sed -n "s/^  \"$1\": \([0-9][0-9]*\),\{0,1\}\$/\1/p"
}

# The integer a config file gives for a key ("" when absent or "auto").
given() {
    sed -n "s/.*\"$2\": *\([0-9][0-9]*\).*/\1/p" "$1" | head -n 1
}

# expect_triple NAME TBS MICRO GAS NP: exit 0, the triple, and the identity.
expect_triple() {
    t=$(eff train_batch_size); m=$(eff train_micro_batch_size_per_gpu); g=$(eff gradient_accumulation_steps)
    wt=$2; wm=$3; wg=$4; wn=$5
    check "$1: exit 0, batch ($2, $3, $4) on $5 rank(s)" \
        '[ $RC -eq 0 ] && [ "$t" = "$wt" ] && [ "$m" = "$wm" ] && [ "$g" = "$wg" ] && [ $((m * g * wn)) -eq "$t" ]'
    [ "$RC" -eq 0 ] || sed 's/^/  /' "$SCRATCH/err.txt"
}

# The default's micro batch and gas: what all-"auto" batch keys resolve to.
dry 1
DM=$(eff train_micro_batch_size_per_gpu); DG=$(eff gradient_accumulation_steps)
check "default config: exit 0 with a micro batch" '[ $RC -eq 0 ] && [ -n "$DM" ] && [ -n "$DG" ]'

# train_batch_size (and gas 1) given: micro = tbs / (gas * world).
for f in deepspeedai__DeepSpeedExamples__ds_fp16_z1_config microsoft__DeepSpeedExamples__ds_config; do
    tbs=$(given "$DS/$f.json" train_batch_size)
    for np in 1 2; do
        dry "$np" "$DS/$f.json"
        expect_triple "$f" "$tbs" $((tbs / np)) 1 "$np"
    done
    check "$f: fp16 enabled as the file says" 'grep -q "\"enabled\": true" "$SCRATCH/out.txt"'
done
check "no-effect keys are noted, not warned" \
    'grep -q "note: accepted without effect.*prescale_gradients" "$SCRATCH/err.txt" && ! grep -q "warning.*prescale" "$SCRATCH/err.txt"'

# All batch keys "auto" (or absent): the default's micro batch and gas.
for f in hiyouga__LLaMA-Factory__ds_z0_config lm-sys__FastChat__deepspeed_config_s2 modelscope__ms-swift__zero1; do
    dry 1 "$DS/$f.json"
    expect_triple "$f" $((DM * DG)) "$DM" "$DG" 1
    check "$f: \"auto\" resolutions are noted" 'grep -q "note: resolved from \"auto\":.*train_micro_batch_size_per_gpu=" "$SCRATCH/err.txt"'
done
dry 2 "$DS/lm-sys__FastChat__deepspeed_config_s2.json"
expect_triple "FastChat on 2 ranks" $((DM * DG * 2)) "$DM" "$DG" 2
check "FastChat: ZeRO 2 with optimizer offload to the CPU" \
    'grep -q "\"stage\": 2" "$SCRATCH/out.txt" && grep -q "\"device\": \"cpu\"" "$SCRATCH/out.txt"'

# accelerate's file gives gradient_accumulation_steps = 1 with the other two
# "auto": fabula is the trainer that fills them in (docs/config.md, "auto"):
# micro = the default's micro batch, or data.max_tokens_per_batch / seq_len
# when that budget is given; train_batch_size = micro * gas * world. The file
# runs unchanged, every "auto" named in the note.
f=huggingface__accelerate__ds_config_zero2
gas=$(given "$DS/$f.json" gradient_accumulation_steps)
for np in 1 2; do
    dry "$np" "$DS/$f.json"
    expect_triple "$f unchanged" $((DM * gas * np)) "$DM" "$gas" "$np"
done
for k in train_batch_size train_micro_batch_size_per_gpu optimizer.params.lr optimizer.params.weight_decay \
    scheduler.params.warmup_min_lr scheduler.params.warmup_max_lr scheduler.params.warmup_num_steps \
    fp16.enabled bf16.enabled gradient_clipping zero_optimization.reduce_bucket_size; do
    check "$f: \"auto\" $k is resolved and noted" 'grep -q "note: resolved from \"auto\":.* $k=" "$SCRATCH/err.txt"'
done
check "$f: no warning" '! grep -q warning "$SCRATCH/err.txt"'
# Its ZeRO-3 sibling adds "auto" stage3_prefetch_bucket_size,
# stage3_param_persistence_threshold and stage3_gather_16bit_weights_on_model_save
# (no effect in fabula: named in the no-effect note).
f3=huggingface__accelerate__ds_config_zero3
dry 2 "$DS/$f3.json"
expect_triple "$f3 unchanged" $((DM * 2)) "$DM" 1 2
for k in stage3_prefetch_bucket_size stage3_param_persistence_threshold stage3_gather_16bit_weights_on_model_save; do
    check "$f3: \"auto\" $k accepted without effect" \
        'grep -q "note: accepted without effect.*zero_optimization.$k" "$SCRATCH/err.txt" && ! grep -q warning "$SCRATCH/err.txt"'
done
check "$f3: ZeRO 3 with optimizer and parameter offload" \
    'grep -q "\"stage\": 3" "$SCRATCH/out.txt" && [ "$(grep -c "\"device\": \"cpu\"" "$SCRATCH/out.txt")" -eq 2 ]'
dry 2 --set data.max_tokens_per_batch=4096 --set data.seq_len=128 "$DS/$f.json"
expect_triple "$f with a 4096-token budget" $((32 * gas * 2)) 32 "$gas" 2
dry 2 --set train_micro_batch_size_per_gpu=4 "$DS/$f.json"
expect_triple "$f + micro 4" $((4 * gas * 2)) 4 "$gas" 2
check "$f: WarmupLR with warmup_max_lr \"auto\" = the optimizer's lr" \
    'grep -q "WarmupLR" "$SCRATCH/out.txt" && grep -q "note: resolved from \"auto\":.*scheduler.params.warmup_max_lr=" "$SCRATCH/err.txt"'
check "dry runs create no run directory" '[ ! -e "$RD" ]'
finish
