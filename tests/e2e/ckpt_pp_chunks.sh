#!/bin/sh
# Checkpoints of the pipeline layouts whose stages hold more than one run
# of layers or a second copy of a tensor (docs/checkpoint.md, "Tensor and
# pipeline parallelism"): a 4-layer model with tied embeddings, where the
# last stage keeps its own copy of model.embed_tokens.weight as its head,
# and interleaved 1F1B, where stage s holds chunks s and s + pp. One
# uninterrupted 1-rank run of 10 steps is the reference; each layout's
# step-5 checkpoint holds its tensors (parameters and both Adam moments)
# within 1e-5 and verifies, and each resumes on another layout with the
# reference's losses within 1e-5:
#   tied embeddings: pp 2 (ZeRO 1) -> 1 rank; 1 rank -> pp 2 x tp 2
#   interleaved: pp 2 x 2 chunks (dense) -> pp 4; pp 4 -> pp 2 x 2 chunks
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PP=parallel.pipeline_parallel_size
VPP=parallel.virtual_pipeline_stages
CKPT_ARGS="$CKPT_ARGS --set model.num_hidden_layers=4 --set checkpoint.keep_last=0 --set checkpoint.save_interval=5"
# resume_from SRC DST NP ARGS...: DST starts as a copy of SRC's step-5 state
resume_from() {
    src=$1; dst=$2; shift 2
    mkdir -p "$SCRATCH/$dst/checkpoints"
    cp "$(ck "$src" 5)" "$SCRATCH/$dst/checkpoints/" && echo "step-00000005.h5" >"$SCRATCH/$dst/checkpoints/latest"
    ctrain "$@"
}

TIED="--set model.tie_word_embeddings=true --set model.num_local_experts=0"
ctrain 1 tref --steps 10 $TIED
check "tied embeddings: the 1-rank reference run, checkpoints at 5 and 10" '[ $RC -eq 0 ] && [ -f "$(ck tref 10)" ]'
ctrain 2 tpp --steps 5 $TIED --set $PP=2 --set zero_optimization.stage=1
check "tied, pp 2 (the last stage's copy of the embedding): its step-5 checkpoint is the 1-rank one's, verified" \
    '[ $RC -eq 0 ] && same_ckpt tref tpp 5'
check "... the file holds model.embed_tokens.weight once and no lm_head" \
    '"$FABULA" ckpt info "$(ck tpp 5)" | grep -c "^/params/model.embed_tokens.weight " | grep -qx 1 &&
     ! "$FABULA" ckpt info "$(ck tpp 5)" | grep -q "lm_head"'
resume_from tpp t1 1 t1 --steps 10 $TIED
check "tied: pp 2's checkpoint resumed on 1 rank continues the reference's losses" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/t1.out" && cprefix tref t1 1e-5 &&
     same_ckpt tref t1 10'
resume_from tref ttp 4 ttp --steps 10 $TIED --set $PP=2 --set parallel.tensor_parallel_size=2
check "tied: the 1-rank checkpoint resumed at pp 2 x tp 2 (both stages read the embedding) continues the losses" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/ttp.out" && cprefix tref ttp 1e-5 &&
     same_ckpt tref ttp 10'

DENSE="--set model.num_local_experts=0"
ctrain 1 iref --steps 10 $DENSE
check "interleaved: the 1-rank reference run" '[ $RC -eq 0 ] && [ -f "$(ck iref 10)" ]'
ctrain 2 ivp --steps 5 $DENSE --set $PP=2 --set $VPP=2
check "pp 2 x 2 chunks (stage 0: layers 0 and 2): its step-5 checkpoint is the 1-rank one's, verified" \
    '[ $RC -eq 0 ] && same_ckpt iref ivp 5'
resume_from ivp ip4 4 ip4 --steps 10 $DENSE --set $PP=4
check "... resumed at pp 4: the reference's losses" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/ip4.out" && cprefix iref ip4 1e-5 &&
     same_ckpt iref ip4 10'
resume_from iref ivp2 2 ivp2 --steps 10 $DENSE --set $PP=2 --set $VPP=2
check "the 1-rank checkpoint resumed at pp 2 x 2 chunks: the reference's losses" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000005.h5 at step 5" "$SCRATCH/ivp2.out" && cprefix iref ivp2 1e-5 &&
     same_ckpt iref ivp2 10'
finish
