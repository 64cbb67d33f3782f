#!/bin/sh
# Resume: 20 steps straight and 10 + resume + 10 give bit-identical losses
# (metrics.jsonl) and bit-identical parameters and moments (the checksums of
# the final checkpoints), at ZeRO 1 and at ZeRO 3 with offload, and with
# samples deferred across the cut; keep_last;
# `latest`; a run resumed from an older checkpoint than the last step it
# logged cuts metrics.jsonl back; run.resume "none" and PATH.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

# the tensor table of a checkpoint: dataset, shape, checksum (no offsets)
table() { "$FABULA" ckpt info "$1" | awk '/^\/(params|optimizer)/ { $NF = ""; print }'; }
same_table() { table "$1" >"$SCRATCH/ta.txt" && table "$2" >"$SCRATCH/tb.txt" && [ -s "$SCRATCH/ta.txt" ] &&
    cmp -s "$SCRATCH/ta.txt" "$SCRATCH/tb.txt"; }

for z in 1 3; do
    extra=""
    [ $z -eq 3 ] && extra="--set zero_optimization.offload_optimizer.device=cpu --set zero_optimization.offload_param.device=cpu"
    ctrain 2 straight$z --steps 20 --set zero_optimization.stage=$z $extra
    check "ZeRO $z: 20 steps straight" '[ $RC -eq 0 ] && [ "$(clatest straight$z)" = 20 ]'
    ctrain 2 cut$z --steps 10 --set zero_optimization.stage=$z --set checkpoint.save_interval=4 \
        --set checkpoint.keep_last=2 $extra
    check "ZeRO $z: first 10 steps, saves at 4, 8 and 10" '[ $RC -eq 0 ] && [ "$(clatest cut$z)" = 10 ] &&
        grep -q "saved step 4 " "$SCRATCH/cut$z.out" && grep -q "saved step 8 " "$SCRATCH/cut$z.out"'
    check "ZeRO $z: keep_last 2 keeps steps 8 and 10" \
        '[ "$(ls "$SCRATCH/cut$z/checkpoints" | tr "\n" " ")" = "latest step-00000008.h5 step-00000010.h5 " ]'
    ctrain 2 cut$z --steps 20 --set zero_optimization.stage=$z --set checkpoint.save_interval=4 \
        --set checkpoint.keep_last=2 $extra
    check "ZeRO $z: resumed from latest (step 10) and ran to 20" \
        '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000010.h5 at step 10, 5120 tokens seen" "$SCRATCH/cut$z.out" &&
        [ "$(clatest cut$z)" = 20 ]'
    closses straight$z >"$SCRATCH/straight$z.losses"
    check "ZeRO $z: losses of steps 1-20 bit-identical to the straight run" \
        'closses cut$z >"$SCRATCH/b.txt" && [ "$(wc -l <"$SCRATCH/straight$z.losses")" -eq 20 ] &&
        cmp -s "$SCRATCH/straight$z.losses" "$SCRATCH/b.txt"'
    check "ZeRO $z: final parameters and moments bit-identical (checksums)" \
        'same_table "$(ck straight$z 20)" "$(ck cut$z 20)"'
done

# micro-batches too small for the samples offered: the balancer defers
# samples to the next step, and the checkpoint must carry them
DEFER="--set data.max_tokens_per_batch=64"
ctrain 2 defer_straight --steps 10 $DEFER
ctrain 2 defer_cut --steps 5 $DEFER
"$FABULA" ckpt info "$(ck defer_cut 5)" >"$SCRATCH/defer.txt"
check "a checkpoint with samples deferred to the next step" \
    'grep -q "^data .* position [0-9]*, [1-9][0-9]* deferred" "$SCRATCH/defer.txt"'
ctrain 2 defer_cut --steps 10 $DEFER
check "deferred samples carried across the resume: losses and final tensors bit-identical" \
    '[ $RC -eq 0 ] && closses defer_straight >"$SCRATCH/a.txt" && closses defer_cut >"$SCRATCH/b.txt" &&
     [ "$(wc -l <"$SCRATCH/a.txt")" -eq 10 ] && cmp -s "$SCRATCH/a.txt" "$SCRATCH/b.txt" &&
     same_table "$(ck defer_straight 10)" "$(ck defer_cut 10)"'

# a later run that resumes from an older checkpoint (the run was lost after
# step 20 but resumes from 16): metrics.jsonl goes back to 16, then on
ctrain 2 cut1 --steps 22 --set zero_optimization.stage=1 --set "run.resume=$(ck cut1 16)" --set checkpoint.keep_last=2
check "run.resume PATH: resumed at step 16, metrics cut back to it" \
    '[ $RC -eq 0 ] && grep -q "resumed from .*step-00000016.h5 at step 16" "$SCRATCH/cut1.out" &&
     grep -q "removed 4 record(s) after step 16" "$SCRATCH/cut1.out"'
check "metrics.jsonl: steps 1-22, each once; 17-20 again bit-identical" \
    '[ "$(closses cut1 | cut -d" " -f1 | tr "\n" " ")" = "$(seq 1 22 | tr "\n" " ")" ] &&
     closses cut1 | head -n 20 | cmp -s - "$SCRATCH/straight1.losses"'
check "keep_last counts from the newest step: 20 and 22 kept, 16 removed" \
    '[ "$(ls "$SCRATCH/cut1/checkpoints" | tr "\n" " ")" = "latest step-00000020.h5 step-00000022.h5 " ]'

ctrain 1 cut1 --steps 22
check "nothing left to do: resumes at 22, trains and saves nothing" \
    '[ $RC -eq 0 ] && [ "$(tail -n 5 "$SCRATCH/cut1.out" | grep -c "saved step")" -eq 0 ] &&
     tail -n 8 "$SCRATCH/cut1.out" | grep -q "resumed from .*step-00000022.h5 at step 22"'
ctrain 1 cut1 --steps 2 --set run.resume=none
check "run.resume none: starts at step 0; metrics.jsonl starts over" \
    '[ $RC -eq 0 ] && tail -n 16 "$SCRATCH/cut1.out" | grep -q "run.resume = \"none\": starting from step 0" &&
     [ "$(closses cut1 | cut -d" " -f1 | tr "\n" " ")" = "1 2 " ]'
ctrain 1 missing --steps 2 --set run.resume=/nonexistent/step-00000001.h5
check "run.resume PATH that does not exist: exit 4 naming it" \
    '[ $RC -eq 4 ] && grep -q "run.resume = ./nonexistent/step-00000001.h5.: cannot open" "$SCRATCH/missing.out"'
finish
