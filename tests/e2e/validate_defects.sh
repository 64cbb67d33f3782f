#!/bin/sh
# `fabula validate` catches bugs (issue: "proof that it catches bugs"): one
# small defect per feature family, injected through the test-only switch
# FABULA_TEST_DEFECT (docs/testing.md "Injected defects"), makes the
# --quick run of the job that covers the family fail with exit 6, its row
# naming the job and a quantity that the defect changes, while the same run
# without the switch passes (validate.sh runs the clean suite):
#   zero_shard_offset     ZeRO 3 then 2 on 2 ranks    corpus-zero3-ep
#   ep_route_off_by_one   ep 2                        expert-dropout
#   tp_reduce_group       tp 2 with sp                tp-pp (2 ranks)
#   pp_microbatch_order   tp 2 x pp 2                 tp-pp (4 ranks)
#   loss_scale_rule       fp16's dynamic scaler       fp16 (1 rank)
#   resume_data_position  the resume at step 12       corpus-zero3-ep (1 rank)
. "$FB_SRCDIR/tests/e2e/lib.sh"

# defect NAME NP JOB QUANTITIES: the job's row names one of QUANTITIES
defect() {
    name=$1 np=$2 job=$3 qs=$4
    (cd "$FB_SRCDIR" && FABULA_TEST_DEFECT=$name timeout 600 $MPIEXEC -n "$np" "$FABULA" validate --quick \
        --job "$job" --run-dir "$SCRATCH/$name") >"$SCRATCH/$name.txt" 2>&1
    RC=$?
    row=$(grep "^$job  " "$SCRATCH/$name.txt" | tail -n 1)
    echo "$name on $np rank(s): $row"
    check "$name: $job on $np rank(s) FAILs, exit 6, naming one of: $qs" \
        '[ $RC -eq 6 ] && echo "$row" | grep -q " FAIL (" && q=$(echo "$row" | sed "s/.* FAIL (\([a-z_]*\) .*/\1/") &&
         echo " $qs " | grep -q " $q " && grep -q "^fabula validate: FAIL" "$SCRATCH/$name.txt"'
}
defect zero_shard_offset 2 corpus-zero3-ep "loss lm_loss aux_loss z_loss grad_norm"
defect ep_route_off_by_one 2 expert-dropout "loss lm_loss aux_loss z_loss grad_norm dropped tokens_per_expert"
defect tp_reduce_group 2 tp-pp "loss lm_loss aux_loss z_loss grad_norm dropped tokens_per_expert"
defect pp_microbatch_order 4 tp-pp "loss lm_loss aux_loss z_loss grad_norm dropped tokens_per_expert"
defect loss_scale_rule 1 fp16 "loss lm_loss grad_norm loss_scale"
defect resume_data_position 1 corpus-zero3-ep "loss lm_loss aux_loss z_loss grad_norm dropped tokens_per_expert valid_lm_loss"
finish
