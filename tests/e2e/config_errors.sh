#!/bin/sh
# Config errors: every bad input exits 2 with a message naming the key (or
# the file and position), creates no run directory; an unknown key is only
# a warning.
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
RD="$SCRATCH/rundir"

# bad NAME NEEDLE ARGS...: `fabula train ARGS` exits 2, stderr contains
# NEEDLE (fixed string), and the run directory was not created.
bad() {
    name=$1; needle=$2; shift 2
    rm -rf "$RD"
    timeout 120 $MPIEXEC -n 1 "$FABULA" train --set "run.run_dir=$RD" "$@" >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
    rc=$?
    check "$name: exit 2 naming '$needle', no run directory" \
        '[ $rc -eq 2 ] && grep -qF -- "$needle" "$SCRATCH/err.txt" && [ ! -e "$RD" ]'
    [ "$rc" -eq 2 ] || { echo "  exit $rc, stderr:"; sed 's/^/  /' "$SCRATCH/err.txt"; }
}

# Wrong JSON types and bad values (docs/config.md, "Errors").
bad "string for an integer" model.hidden_size --set 'model.hidden_size="big"'
bad "number for a boolean" model.tie_word_embeddings --set model.tie_word_embeddings=3
bad "number for a section" optimizer --set optimizer=1
bad "hidden_size 0" model.hidden_size --set model.hidden_size=0
bad "negative num_hidden_layers" model.num_hidden_layers --set model.num_hidden_layers=-1
bad "intermediate_size 0" model.intermediate_size --set model.intermediate_size=0
bad "heads do not divide hidden_size" model.hidden_size --set model.hidden_size=130
bad "kv heads do not divide heads" model.num_key_value_heads --set model.num_key_value_heads=3
bad "odd head_dim" model.hidden_size --set model.hidden_size=12
bad "experts_per_tok > experts" model.num_experts_per_tok --set model.num_experts_per_tok=5
bad "experts_per_tok < 1" model.num_experts_per_tok --set model.num_experts_per_tok=0
bad "vocab too small for bytes" model.vocab_size --set model.vocab_size=268
bad "lr 0" optimizer.params.lr --set optimizer.params.lr=0
bad "warmup_max_lr 0" scheduler.params.warmup_max_lr --set scheduler.params.warmup_max_lr=0
bad "beta2 = 1" optimizer.params.betas --set 'optimizer.params.betas=[0.9,1.0]'
bad "eps 0" optimizer.params.eps --set optimizer.params.eps=0
bad "negative weight_decay" optimizer.params.weight_decay --set optimizer.params.weight_decay=-0.1
bad "negative capacity_factor" model.capacity_factor --set model.capacity_factor=-1
bad "expert_dropout 1" model.expert_dropout --set model.expert_dropout=1
bad "negative aux loss coefficient" model.router_aux_loss_coef --set model.router_aux_loss_coef=-0.01
bad "negative z loss coefficient" model.router_z_loss_coef --set model.router_z_loss_coef=-0.01
bad "rope_theta 0" model.rope_theta --set model.rope_theta=0
bad "rms_norm_eps 0" model.rms_norm_eps --set model.rms_norm_eps=0
bad "seq_len 1" data.seq_len --set data.seq_len=1
bad "overlap = seq_len" data.overlap --set data.seq_len=64 --set data.overlap=64
bad "negative overlap" data.overlap --set data.overlap=-1
bad "min_seq_len 1" data.min_seq_len --set data.min_seq_len=1
bad "min_seq_len > seq_len" data.min_seq_len --set data.seq_len=32 --set data.min_seq_len=33
bad "run.steps 0" run.steps --steps 0
bad "inconsistent batch sizes" train_batch_size --set train_batch_size=10 \
    --set train_micro_batch_size_per_gpu=4 --set gradient_accumulation_steps=2
bad "gradient_accumulation_steps alone" train_micro_batch_size_per_gpu --set gradient_accumulation_steps=4
bad "fp16 and bf16" bf16.enabled --set fp16.enabled=true --set bf16.enabled=true
bad "unknown optimizer type" optimizer.type --set optimizer.type=Lamb
bad "AMSGrad (not implemented)" optimizer.params.amsgrad --set optimizer.params.amsgrad=true
bad "Adam without bias correction (not implemented)" optimizer.params.bias_correction --set optimizer.params.bias_correction=false
bad "unknown scheduler type" scheduler.type --set scheduler.type=OneCycle
bad "nvme offload" zero_optimization.offload_optimizer.device \
    --set zero_optimization.offload_optimizer.device=nvme
bad "offload_param below stage 3" zero_optimization.offload_param.device \
    --set zero_optimization.stage=2 --set zero_optimization.offload_param.device=cpu
bad "set through a number" model.hidden_size --set model.hidden_size.x=1

# Absurd sizes: refused by the dry run naming the key (an estimate of the
# memory a rank needs against what any rank has), not by a failed allocation.
bad "vocab_size 2e9" "config key 'model.vocab_size' = 2000000000: expected a size the run can hold" \
    --dry-run --set model.vocab_size=2e9
bad "hidden_size 1e6" "config key 'model.hidden_size' = 1000000: expected a size" --dry-run --set model.hidden_size=1e6
bad "micro batch 1e9" "config key 'train_micro_batch_size_per_gpu' = 1000000000: expected a size" \
    --dry-run --set train_micro_batch_size_per_gpu=1e9
bad "hidden_size 1e12" "model.hidden_size" --dry-run --set model.hidden_size=1e12
bad "train_batch_size 1e15" "train_batch_size" --dry-run --set train_batch_size=1e15

# A long value is not echoed whole: cut to 80 characters with "...".
long=$(head -c 100000 /dev/zero | tr '\0' y)
bad "100 kB string for an integer" "model.hidden_size" --set "model.hidden_size=\"$long\""
check "100 kB value: cut in the message" 'grep -q "yyy\.\.\." "$SCRATCH/err.txt" && [ "$(wc -c <"$SCRATCH/err.txt")" -lt 1000 ]'
bad "100 kB --set through a number" "model.hidden_size" --set "model.hidden_size.x=$long"
check "100 kB --set value: cut in the message" '[ "$(wc -c <"$SCRATCH/err.txt")" -lt 1000 ]'

# Files.
bad "missing config file" "nope.json': No such file or directory" "$SCRATCH/nope.json"
printf '{\n  "model": {\n    "hidden_size": 64,,\n  }\n}\n' >"$SCRATCH/broken.json"
bad "malformed JSON" "$SCRATCH/broken.json:3:" "$SCRATCH/broken.json"
check "malformed JSON: FILE:LINE:COLUMN: message" \
    'grep -Eq "broken\.json:3:[0-9]+: [a-z]" "$SCRATCH/err.txt"'
printf '{"steps_per_print": 1,\n "optimizer": {"type": "AdamW"},\n "steps_per_print": 2}\n' >"$SCRATCH/dup.json"
mkfifo "$SCRATCH/fifo.json"
bad "a FIFO as the config file: refused at once, not read" "fifo.json: not a regular file (a FIFO)" "$SCRATCH/fifo.json"
bad "duplicate key (as DeepSpeed: refused)" "dup.json:3: duplicate key 'steps_per_print', given first on line 1" \
    "$SCRATCH/dup.json"
if [ "$(id -u)" -ne 0 ]; then
    printf '{}\n' >"$SCRATCH/locked.json"
    chmod 000 "$SCRATCH/locked.json"
    bad "unreadable config file" "locked.json': Permission denied" "$SCRATCH/locked.json"
    chmod 600 "$SCRATCH/locked.json"
else
    echo "skip: unreadable config file (running as root, which reads it anyway)"
fi

# Two ranks: the message is printed once and the job exits 2.
rm -rf "$RD"
timeout 120 $MPIEXEC -n 2 "$FABULA" train --set "run.run_dir=$RD" --set model.hidden_size=0 \
    >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
rc=$?
check "2 ranks: exit 2, one message" \
    '[ $rc -eq 2 ] && [ "$(grep -c "fabula: error:.*model.hidden_size" "$SCRATCH/err.txt")" -eq 1 ] && [ ! -e "$RD" ]'

# An unknown key is a warning naming its full path; the dry run succeeds.
printf '{"model": {"hiden_size": 64}, "optimizer": {"params": {"lr_decay": 1}}}\n' >"$SCRATCH/typo.json"
timeout 120 $MPIEXEC -n 1 "$FABULA" train --dry-run --set "run.run_dir=$RD" \
    --set "data.train=$FB_SRCDIR/inputs/sample.jsonl" "$SCRATCH/typo.json" \
    >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
rc=$?
check "unknown keys: exit 0 and one warning each" \
    '[ $rc -eq 0 ] && grep -q "warning.*model.hiden_size" "$SCRATCH/err.txt" && grep -q "warning.*optimizer.params.lr_decay" "$SCRATCH/err.txt" && [ ! -e "$RD" ]'
check "unknown keys: the nearest known key is suggested when close" \
    'grep -q "model.hiden_size.*did you mean .model.hidden_size." "$SCRATCH/err.txt"'

# --strict: the same keys are errors, all named in one run.
bad "--strict: unknown key" "unknown config key 'model.hiden_size'; did you mean 'model.hidden_size'?" \
    --strict "$SCRATCH/typo.json"
check "--strict: every unknown key reported" \
    'grep -q "error: unknown config key .optimizer.params.lr_decay." "$SCRATCH/err.txt" && grep -q "the config has 2 errors" "$SCRATCH/err.txt"'

# Every problem of a config at once (NVMe offload and other bad keys), on
# two ranks: each named once, then exit 2.
rm -rf "$RD"
printf '{"zero_optimization": {"offload_optimizer": {"device": "nvme"}}, "optimizer": {"params": {"lr": 0}}, "model": {"rope_theta": -1}}\n' \
    >"$SCRATCH/many.json"
timeout 120 $MPIEXEC -n 2 "$FABULA" train --dry-run --set "run.run_dir=$RD" "$SCRATCH/many.json" \
    >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
rc=$?
check "several bad keys: exit 2, each named once" \
    '[ $rc -eq 2 ] && for k in zero_optimization.offload_optimizer.device optimizer.params.lr model.rope_theta; do [ "$(grep -c "error:.*$k" "$SCRATCH/err.txt")" -eq 1 ] || exit 1; done'
finish
