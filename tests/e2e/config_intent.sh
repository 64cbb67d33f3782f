#!/bin/sh
# A config means what its writer meant (issue 46), each case with its exit
# code and message:
#  - a DeepSpeed file without gradient_clipping (FastChat's, real) does not
#    clip, as DeepSpeed runs it, and says so; given or "auto" it is kept;
#    a config without DeepSpeed keys keeps fabula's 1.0;
#  - tensor_parallel.autotp_size is what the effective config and the run's
#    config.json record as parallel.tensor_parallel_size;
#  - a micro-batch left to the rank count (train_batch_size with or without
#    gradient_accumulation_steps) with an MoE's capacity or aux loss is a
#    warning at start, and not with a micro-batch given or a dense model;
#  - one bad value is one error (data.seq_len, run.steps, lr, batch keys,
#    scheduler.type);
#  - a refused Hugging Face architecture is one error that says why, with no
#    warning about its other keys;
#  - an unknown key: the same name in another section is suggested before a
#    near name in its own; other trainers' names (Megatron-LM, DeepSpeed-MoE,
#    llm.c, the HF Trainer) are refused with fabula's key;
#  - an unknown option of any command names the nearest option, or for a
#    command with --set the config key; an unknown command the nearest one;
#  - `fabula train` with no config away from the source tree names the
#    default's data.train and how to give data.
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
DS="$FB_SRCDIR/../shared/compat/ds_configs"
[ -d "$DS" ] || DS="$FB_SRCDIR/tests/data/ds_configs"
DATA="--set data.train=$FB_SRCDIR/inputs/sample.jsonl"

# dry NP ARGS...: `fabula train --dry-run` from the scratch directory
dry() {
    np=$1; shift
    timeout 120 $MPIEXEC -n "$np" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" $DATA "$@" \
        >out.txt 2>err.txt
    RC=$?
}
# eff KEY: a top-level number of the effective config (the last JSON printed)
eff() { sed -n '/^fabula: effective config:/,$p' out.txt | sed -n "s/^  \"$1\": \([0-9.e+-]*\),\{0,1\}\$/\1/p"; }
errors() { grep -c "fabula: error:" err.txt; }
show() { sed 's/^/  | /' err.txt | head -n 8; }

# ---- gradient clipping: DeepSpeed's default in DeepSpeed's files
dry 1 "$DS/lm-sys__FastChat__deepspeed_config_s2.json"
check "FastChat's file (no gradient_clipping): exit 0, effective gradient_clipping 0" \
    '[ $RC -eq 0 ] && [ "$(eff gradient_clipping)" = "0.0" ]' || show
check "FastChat's file: a note says it does not clip, as DeepSpeed runs it, and how to clip" \
    'grep -q "note: gradient_clipping: not given by .*FastChat.*a DeepSpeed config: no clipping, as DeepSpeed runs it.*--set gradient_clipping=1.0" err.txt'
dry 1 --set gradient_clipping=0.5 "$DS/lm-sys__FastChat__deepspeed_config_s2.json"
check "FastChat's file with --set gradient_clipping=0.5: 0.5, no note" \
    '[ $RC -eq 0 ] && [ "$(eff gradient_clipping)" = "0.5" ] && ! grep -q "note: gradient_clipping" err.txt'
dry 1 "$DS/huggingface__accelerate__ds_config_zero2.json"
check "accelerate's \"auto\" gradient_clipping: the Trainer's max_grad_norm default, 1.0" \
    '[ $RC -eq 0 ] && [ "$(eff gradient_clipping)" = "1.0" ] && ! grep -q "note: gradient_clipping" err.txt'
printf '{"model": {"hidden_size": 64, "intermediate_size": 128}, "run": {"steps": 5}}\n' >fabula_only.json
dry 1 fabula_only.json
check "a config without DeepSpeed keys: fabula's default clipping 1.0" \
    '[ $RC -eq 0 ] && [ "$(eff gradient_clipping)" = "1.0" ] && ! grep -q "note: gradient_clipping" err.txt'

# ---- autotp_size is what runs, and what config.json says
dry 2 --set tensor_parallel.autotp_size=2
check "autotp_size 2 on 2 ranks: the effective config's parallel.tensor_parallel_size is 2" \
    '[ $RC -eq 0 ] && sed -n "/^fabula: effective config:/,\$p" out.txt | grep -q "\"tensor_parallel_size\": 2"'
rm -rf tp_run
(cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n 2 "$FABULA" train --steps 1 --run-dir "$SCRATCH/tp_run" \
    --set tensor_parallel.autotp_size=2 --set checkpoint.save_interval=-1) >tp.out 2>&1
RC=$?
check "autotp_size 2: trains, and the run's config.json records tensor_parallel_size 2 (exit $RC)" \
    '[ $RC -eq 0 ] && grep -q "\"tensor_parallel_size\": 2" tp_run/config.json && grep -q "layout: tp 2" tp.out'

# ---- the micro-batch left to the rank count, with an MoE's capacity or aux loss
dry 2 --set train_batch_size=32 --set gradient_accumulation_steps=2
check "train_batch_size + gradient_accumulation_steps, MoE: a warning naming the inferred micro-batch and the key to give" \
    '[ $RC -eq 0 ] && grep -q "warning: train_batch_size 32 with gradient_accumulation_steps leaves the micro-batch to the rank count (train_micro_batch_size_per_gpu = 32 / (2 data-parallel rank(s) x 2 accumulation step(s)) = 8 here): this MoE.s expert capacity and load-balancing loss act per micro-batch.*give train_micro_batch_size_per_gpu" err.txt' || show
dry 1 "$DS/microsoft__DeepSpeedExamples__ds_config.json"
check "DeepSpeedExamples' file (train_batch_size alone), default MoE: the same warning" \
    '[ $RC -eq 0 ] && grep -q "warning: train_batch_size 16 leaves the micro-batch to the rank count" err.txt'
dry 2 --set train_batch_size=32 --set train_micro_batch_size_per_gpu=8
check "micro-batch given: no warning" '[ $RC -eq 0 ] && ! grep -q "leaves the micro-batch" err.txt'
dry 2 --set train_batch_size=32 --set gradient_accumulation_steps=2 --set model.num_local_experts=0
check "dense model: no warning" '[ $RC -eq 0 ] && ! grep -q "leaves the micro-batch" err.txt'
dry 2 --set train_batch_size=32 --set gradient_accumulation_steps=2 --set model.capacity_factor=0 \
    --set model.router_aux_loss_scope=global_batch
check "dropless with the global-batch aux loss: no warning" '[ $RC -eq 0 ] && ! grep -q "leaves the micro-batch" err.txt'

# ---- one bad value, one error (and no warning about the keys it stood for)
one_error() { # NAME NEEDLE ARGS...
    name=$1; needle=$2; shift 2
    dry 1 "$@"
    check "$name: exit 2, one error naming it, no warning" \
        '[ $RC -eq 2 ] && [ "$(errors)" -eq 1 ] && grep -qF -- "$needle" err.txt && ! grep -q warning err.txt' || show
}
one_error "data.seq_len 1" "config key 'data.seq_len' = 1" --set data.seq_len=1
one_error "run.steps -5" "config key 'run.steps' = -5" --steps -5
one_error "optimizer.params.lr 0" "config key 'optimizer.params.lr' = 0" --set optimizer.params.lr=0
one_error "train_batch_size -0.5" "config key 'train_batch_size' = -0.5" --set train_batch_size=-0.5
one_error "gradient_accumulation_steps 1e12" "config key 'gradient_accumulation_steps' = 1000000000000" \
    --set gradient_accumulation_steps=1e12
one_error "scheduler.params.total_num_steps 0" "config key 'scheduler.params.total_num_steps' = 0" \
    --set scheduler.params.total_num_steps=0
one_error "scheduler.type OneCycle" "config key 'scheduler.type' = \"OneCycle\"" --set scheduler.type=OneCycle

# ---- a refused Hugging Face architecture: one error with the reason, nothing else
mkdir -p qwen3moe
printf '%s\n' '{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,' \
    '"intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,' \
    '"decoder_sparse_step": 1, "norm_topk_prob": true, "mlp_only_layers": [], "num_hidden_layers": 2,' \
    '"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1024,' \
    '"output_router_logits": false, "router_aux_loss_coef": 0.001, "use_sliding_window": false}' >qwen3moe/config.json
dry 1 --set model.init_from=qwen3moe
check "qwen3_moe: exit 2, one error giving the reason (qk-norm), no warning or note about its keys" \
    '[ $RC -eq 2 ] && [ "$(errors)" -eq 1 ] && grep -q "model.model_type.*qwen3_moe.*qk-norm" err.txt &&
     ! grep -q warning err.txt && ! grep -q output_router_logits err.txt' || show
sed 's/qwen3_moe/frobnet/' qwen3moe/config.json >qwen3moe/other.json && mkdir -p frob && mv qwen3moe/other.json frob/config.json
dry 1 --set model.init_from=frob
check "an architecture without a known reason: one error saying what fabula computes" \
    '[ $RC -eq 2 ] && [ "$(errors)" -eq 1 ] && grep -q "fabula computes Llama.s and Mixtral.s decoder only" err.txt &&
     ! grep -q warning err.txt' || show

# ---- unknown keys: across sections, other trainers' names
dry 1 --set run.save_interval=5
check "run.save_interval: exit 2, fabula's key is checkpoint.save_interval (not run.eval_interval)" \
    '[ $RC -eq 2 ] && grep -q "error: config key .run.save_interval. is not read there: fabula.s key is .checkpoint.save_interval." err.txt && ! grep -q eval_interval err.txt' || show
dry 1 --set data.max_seq_len=64
check "data.max_seq_len: exit 2, give data.seq_len (not data.min_seq_len)" \
    '[ $RC -eq 2 ] && grep -q "config key .data.max_seq_len.: max_seq_len is torchtune.s name, not fabula.s: give .data.seq_len." err.txt && ! grep -q min_seq_len err.txt' || show
alias_refused() { # KEY ORIGIN FABULA_KEY
    dry 1 --set "$1=1"
    origin=$2; want="give '$3'"
    check "$1 ($2): exit 2 naming fabula's $3" \
        '[ $RC -eq 2 ] && [ "$(errors)" -eq 1 ] && grep -qF -- "$origin" err.txt && grep -qF -- "$want" err.txt' || show
}
alias_refused max_steps "the Hugging Face Trainer" run.steps
alias_refused num_layers "Megatron-LM" model.num_hidden_layers
alias_refused model.num_experts "Megatron-LM and DeepSpeed-MoE" model.num_local_experts
alias_refused moe_loss_coeff "DeepSpeed-MoE" model.router_aux_loss_coef
alias_refused num_iterations "llm.c" run.steps
alias_refused per_device_train_batch_size "the Hugging Face Trainer" train_micro_batch_size_per_gpu
alias_refused total_batch_size "llm.c" train_batch_size
dry 1 --set noisy_gate_policy=RSample
check "noisy_gate_policy (DeepSpeed-MoE): exit 2, fabula has no such setting, why" \
    '[ $RC -eq 2 ] && grep -q "noisy_gate_policy is DeepSpeed-MoE.s setting, which fabula does not have: fabula.s router adds no noise" err.txt' || show
dry 1 --set run.savee_interval=5
check "a typo of another section's key: a warning suggesting it, exit 0" \
    '[ $RC -eq 0 ] && grep -q "unknown config key .run.savee_interval. (ignored; did you mean .checkpoint.save_interval.?)" err.txt'

# ---- unknown options and commands
opt() { # NAME NEEDLE ARGS...: fabula ARGS exits 2 with NEEDLE on stderr
    name=$1; needle=$2; shift 2
    (cd "$FB_SRCDIR" && timeout 60 "$FABULA" "$@") >out.txt 2>err.txt
    RC=$?
    check "$name: exit 2, '$needle'" '[ $RC -eq 2 ] && grep -qF -- "$needle" err.txt' || show
}
opt "train --lr" "unknown option '--lr'; did you mean '--set optimizer.params.lr=VALUE'?" train --lr 1e-3
opt "train --step" "unknown option '--step'; did you mean '--steps'?" train --step 5
opt "train --max-steps" "unknown option '--max-steps'; did you mean '--steps N'?" train --max-steps 5
opt "train --expert-parallel-size" "did you mean '--set parallel.expert_parallel_size=VALUE'?" \
    train --expert-parallel-size 2
opt "train --deepspeed_config" "unknown option '--deepspeed_config': give the config files as arguments" \
    train --deepspeed_config ds.json
opt "generate --temprature" "unknown option '--temprature'; did you mean '--temperature'?" generate --temprature 1
opt "plan memory --wrld" "unknown option '--wrld'; did you mean '--world'?" plan memory --wrld 2
opt "plan memory --num-experts" "did you mean '--set model.num_local_experts=VALUE'?" plan memory --num-experts 8
opt "export --dtpye" "unknown option '--dtpye'; did you mean '--dtype'?" export --dtpye bf16
opt "fabula trian" "unknown command 'trian'; did you mean 'train'?" trian
opt "plan memroy" "unknown plan 'memroy'; did you mean 'memory'?" plan memroy
opt "tokenizer enocde" "unknown command 'enocde'; did you mean 'encode'?" tokenizer enocde
opt "ckpt inf" "unknown subcommand 'inf'; did you mean 'info'?" ckpt inf

# ---- no config, away from the source tree
timeout 60 $MPIEXEC -n 1 "$FABULA" train --steps 1 --run-dir "$SCRATCH/nowhere" >out.txt 2>err.txt
RC=$?
check "train with no config outside the source tree: exit 4 naming data.train, the directory and what to do" \
    '[ $RC -eq 4 ] && [ "$(errors)" -eq 1 ] && grep -q "data.train = .inputs/sample.jsonl.: No such file or directory: the built-in default config.s sample" err.txt &&
     grep -qF "$SCRATCH" err.txt && grep -q "Run from the top of fabula.s source tree" err.txt && grep -q -- "--set data.train=" err.txt && [ ! -e nowhere ]' || show
finish
