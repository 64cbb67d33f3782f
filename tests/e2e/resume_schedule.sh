#!/bin/sh
# A resumed run's learning-rate schedule against its checkpoint's
# (docs/config.md, "Resuming with another schedule"): the default schedule's horizon follows
# run.steps, so resuming with another --steps moves every lr from the resume
# step on; that is a warning at start naming the change, both lrs of the
# first step and the --set that keeps the checkpoint's schedule. With that
# --set the resumed steps have the uninterrupted run's lr exactly; an
# explicit change is a note; the same steps say nothing.
. "$FB_SRCDIR/tests/e2e/lib.sh"
cd "$SCRATCH" || exit 99
ARGS="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=64 --set checkpoint.save_interval=10
      --set checkpoint.keep_last=0 --set scheduler.params.warmup_num_steps=2 --set data.train=$FB_SRCDIR/inputs/sample.jsonl"

trainrun() { # DIR ARGS...: out in DIR.out, status in RC
    d=$1; shift
    timeout 120 "$FABULA" train --run-dir "$d" $ARGS "$@" >"$d.out" 2>&1
    RC=$?
}
# cut DIR: the run directory as a run stopped after step 10 left it
cut_at_10() {
    rm -rf "$2" && cp -r "$1" "$2" && rm -f "$2"/checkpoints/step-00000020.h5 &&
        echo step-00000010.h5 >"$2/checkpoints/latest"
}
# lrs DIR FROM TO: the lr of steps FROM..TO of the metrics
lrs() { sed -n 's/.*"step":\([0-9]*\),.*"lr":\([^,]*\),.*/\1 \2/p' "$1/metrics.jsonl" | awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b'; }

trainrun full --steps 20
check "20 steps, checkpoints at 10 and 20" '[ $RC -eq 0 ] && [ -f full/checkpoints/step-00000010.h5 ]'

cut_at_10 full longer
trainrun longer --steps 40
check "resumed at step 10 with --steps 40: exit 0, a warning naming the moved horizon and the --set that keeps it" \
    '[ $RC -eq 0 ] && grep -q "warning: resuming from longer/checkpoints/step-00000010.h5 at step 10 with another learning-rate schedule than the checkpoint.s: scheduler.params.total_num_steps 20 -> 40 (it follows run.steps = 40): the lr of step 11 is .* where the checkpoint.s schedule gives .*; --set scheduler.params.total_num_steps=20 keeps the checkpoint.s schedule" longer.out' ||
    grep -E "warning|error" longer.out
check "the warning's lrs are the two runs' lr of step 11" \
    '[ "$(sed -n "s/.*the lr of step 11 is \([^ ]*\) where the checkpoint.s schedule gives \([^,]*\),.*/\1 \2/p" longer.out)" = \
       "$(printf "%.4g %.4g" "$(lrs longer 11 11 | cut -d" " -f2)" "$(lrs full 11 11 | cut -d" " -f2)")" ]'

cut_at_10 full kept
trainrun kept --steps 20 --set scheduler.params.total_num_steps=20
check "resumed with the schedule kept: no message, the lr of steps 11-20 is the uninterrupted run's" \
    '[ $RC -eq 0 ] && ! grep -q "resuming from .* learning-rate schedule" kept.out && [ "$(lrs kept 11 20)" = "$(lrs full 11 20)" ] &&
     [ "$(lrs kept 11 20 | wc -l)" -eq 10 ]'
cut_at_10 full kept40
trainrun kept40 --steps 40 --set scheduler.params.total_num_steps=20
check "--steps 40 with total_num_steps 20 given: no message, steps 11-20 as uninterrupted" \
    '[ $RC -eq 0 ] && ! grep -q "resuming from .* learning-rate schedule" kept40.out && [ "$(lrs kept40 11 20)" = "$(lrs full 11 20)" ]'

cut_at_10 full same
trainrun same --steps 20
check "resumed with the same --steps: no message" \
    '[ $RC -eq 0 ] && ! grep -q "learning-rate schedule than" same.out && [ "$(lrs same 11 20)" = "$(lrs full 11 20)" ]'

cut_at_10 full explicit
trainrun explicit --steps 20 --set scheduler.params.warmup_num_steps=5
check "an explicit schedule change: a note with what changes, no warning" \
    '[ $RC -eq 0 ] && grep -q "note: resuming from explicit/checkpoints/step-00000010.h5 at step 10 with the learning-rate schedule this config gives (scheduler.params.warmup_num_steps 2 -> 5)" explicit.out &&
     ! grep -q "warning: resuming" explicit.out'
finish
