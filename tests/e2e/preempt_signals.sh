#!/bin/sh
# Signals outside the steady state of tests/e2e/ckpt_preempt.sh, sent by
# tests/e2e/signal_at.py on each rank's own clock:
#  - a preemption warning at any moment of the start-up is honoured: SIGUSR1
#    0, 0.05, 0.1 and 0.5 s after the rank can catch it (its dynamic loading
#    done: 15-40 ms after exec here), SIGTERM at 0.1 s, and SIGUSR1 while the
#    run reads the checkpoint it resumes from: exit 75 and a "preempted" end
#    line in jobs.jsonl, with a checkpoint where a step was trained since,
#    "nothing new to save" where none was. (MPICH's SIGUSR1 handler,
#    installed in MPI_Init, used to swallow a warning until fabula installed
#    its own, seconds later: the run trained on and exited 0.)
#  - Ctrl-C as a terminal sends it, to mpiexec and every rank at once (each
#    rank gets it twice, directly and forwarded), at 1, 2 and 4 ranks: one
#    Ctrl-C, checkpoint, exit 75 and jobs.jsonl says preempted by SIGINT at
#    that step, whatever mpiexec's own status (the second SIGINT used to end
#    the ranks at once, without a checkpoint);
#  - a second Ctrl-C more than a second after the first ends the run at once,
#    before any checkpoint;
#  - run.preempt_signals: SIGUSR2 preempts when listed; unlisted it keeps its
#    default action and kills the run without a checkpoint; a list without
#    TERM leaves SIGTERM deadly, at start-up too; bad names or a non-array
#    are refused (exit 2) naming the key.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
AT="$PY $FB_SRCDIR/tests/e2e/signal_at.py --binary $FABULA"
SLOW="--set model.hidden_size=256 --set model.intermediate_size=512 --set data.seq_len=256 --set model.num_hidden_layers=2"

# at NAME NP SIGNAL-ARGS... -- TRAIN-ARGS...: `fabula train` on NP ranks
# into $SCRATCH/NAME, signalled by signal_at.py; its report in NAME.out,
# the launcher's status in $RC
at() {
    name=$1; np=$2; shift 2
    sigargs=
    while [ "$1" != -- ]; do sigargs="$sigargs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 $AT --ranks "$np" $sigargs -- $MPIEXEC -n "$np" "$FABULA" train \
        --run-dir "$SCRATCH/$name" "$@") >"$SCRATCH/$name.out" 2>&1
    RC=$(sed -n 's/^exit //p' "$SCRATCH/$name.out")
    grep "^signal_at" "$SCRATCH/$name.out" | sed 's/^/  /'
}
# end NAME: the end line of the job in NAME's jobs.jsonl
end() { grep '"event":"end"' "$SCRATCH/$1/jobs.jsonl" 2>/dev/null | tail -n 1; }
# preempted NAME SIG [any]: exit 75 (any: whatever the launcher's status,
# after it forwarded the signal itself), the end line says preempted by SIG,
# and either nothing new was trained or the checkpoint of the last step
# verifies
preempted() {
    e=$(end "$1")
    s=$(echo "$e" | sed -n 's/.*"step":\([0-9]*\),.*/\1/p')
    { [ "$RC" = 75 ] || [ "${3:-}" = any ]; } && echo "$e" | grep -q "\"state\":\"preempted\".*\"exit_code\":75,\"signal\":\"SIG$2\"" || return 1
    if echo "$e" | grep -q '"steps_done":0,'; then
        grep -q "preempted (SIG$2) before step $((s + 1)): nothing new to save" "$SCRATCH/$1.out"
    else
        grep -q "preempted (SIG$2): checkpoint of step $s written, exit 75" "$SCRATCH/$1.out" &&
            "$FABULA" ckpt verify -q "$SCRATCH/$1/checkpoints/step-$(printf %08d "$s").h5" >/dev/null
    fi
}

for t in 0 0.05 0.1 0.5; do
    at usr1_$t 2 --signal USR1 --after $t -- $CKPT_ARGS --steps 400
    check "SIGUSR1 $t s into the start-up (2 ranks): honoured, exit 75 (got $RC): $(end usr1_$t | cut -c 60-150)" \
        'preempted usr1_$t USR1'
done
at term_0.1 2 --signal TERM --after 0.1 -- $CKPT_ARGS --steps 400
check "SIGTERM 0.1 s into the start-up: honoured, exit 75 (got $RC)" 'preempted term_0.1 TERM'
at term_unlisted_early 1 --signal TERM --after 0.05 -- $CKPT_ARGS --steps 400 --set 'run.preempt_signals=["USR1"]'
check "SIGTERM 0.05 s into the start-up, TERM not in run.preempt_signals: its default action once the list is read" \
    '[ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(end term_unlisted_early)" ] && ! grep -q "preempted" "$SCRATCH/term_unlisted_early.out"'

# during the resume: a checkpoint large enough to be open for a while
BIG="--set model.hidden_size=512 --set model.intermediate_size=2048 --set data.seq_len=64 --set train_batch_size=4"
(cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n 2 "$FABULA" train --run-dir "$SCRATCH/resume" $BIG \
    --steps 1 --set checkpoint.save_interval=1) >"$SCRATCH/resume0.out" 2>&1
check "a first run writes the checkpoint of step 1" '[ -f "$SCRATCH/resume/checkpoints/step-00000001.h5" ]'
at resume 2 --signal USR1 --while-open checkpoints/step-00000001.h5 -- $BIG --steps 5 --set checkpoint.save_interval=1
check "SIGUSR1 while the resume reads the checkpoint: exit 75 (got $RC), the checkpoint of step 1 stands" \
    'grep -q "checkpoints/step-00000001.h5 open: yes" "$SCRATCH/resume.out" && preempted resume USR1 &&
     grep -q "resumed from .*step-00000001.h5 at step 1" "$SCRATCH/resume.out"'

# Ctrl-C as a terminal sends it: to the launcher and every rank at once
for np in 1 2 4; do
    at int$np $np --signal INT --after 0.5 --after-file "$SCRATCH/int$np/jobs.jsonl" --launcher-too -- $SLOW --steps 1000
    check "Ctrl-C to mpiexec and every rank of $np: one Ctrl-C, checkpoint, exit 75 (mpiexec: $RC)" \
        'preempted int$np INT any'
done
# more copies of one key press within the second (a rank sees the
# terminal's and the launcher's): still one Ctrl-C
at int_repeat 2 --signal INT --after 0.5 --after-file "$SCRATCH/int_repeat/jobs.jsonl" --launcher-too --again 0.3 \
    -- $SLOW --steps 1000
check "Ctrl-C to mpiexec and the ranks, the ranks again 0.3 s later: still one Ctrl-C, checkpoint, exit 75" 'preempted int_repeat INT any'
# a second Ctrl-C: its first step lasts seconds, the second comes 1.5 s later
LONG="--set model.hidden_size=512 --set model.intermediate_size=1024 --set data.seq_len=1024"
t0=$(date +%s)
at int_twice 1 --signal INT --after 0.5 --after-file "$SCRATCH/int_twice/jobs.jsonl" --again 1.5 -- $LONG --steps 1000
check "a second Ctrl-C 1.5 s after the first ends the run at once, without a checkpoint (status $RC, $(($(date +%s) - t0)) s)" \
    '[ -n "$RC" ] && [ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(clatest int_twice)" ] && [ -z "$(end int_twice)" ] &&
     ! grep -q "checkpoint: saved" "$SCRATCH/int_twice.out"'

sigs_of() { "$PY" -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["run"]["preempt_signals"]))' "$SCRATCH/$1/config.json"; }
# run.preempt_signals: steady state, one rank of two signalled
usr() { # NAME SIGNAL ARGS...
    d=$1; sig=$2; shift 2
    pids() { pgrep -f "^$FABULA train --run-dir $SCRATCH/$d "; }
    (ctrain 2 "$d" --steps 100000 "$@"; echo $RC >"$SCRATCH/$d.rc") &
    n=1200; while [ $n -gt 0 ] && [ ! -s "$SCRATCH/$d/metrics.jsonl" ]; do sleep 0.1; n=$((n - 1)); done
    kill -"$sig" $(pids | tail -n 1)
    n=1200; while [ $n -gt 0 ] && [ ! -s "$SCRATCH/$d.rc" ]; do sleep 0.1; n=$((n - 1)); done
    RC=$(cat "$SCRATCH/$d.rc")
    for p in $(pids); do kill -KILL "$p" 2>/dev/null; done
}
usr usr2 USR2 --set 'run.preempt_signals=["USR2"]'
check "SIGUSR2 listed in run.preempt_signals: checkpoint, exit 75 (got $RC)" 'preempted usr2 USR2'
check "... and the effective config records the list" '[ "$(sigs_of usr2)" = USR2 ]'
usr usr2_default USR2
check "SIGUSR2 with the default list (USR1, TERM): default action, no checkpoint (exit $RC)" \
    '[ -n "$RC" ] && [ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(clatest usr2_default)" ] && ! grep -q "preempted" "$SCRATCH/usr2_default.out"'
check "... the default list is in the effective config" '[ "$(sigs_of usr2_default)" = USR1,TERM ]'
usr term_unlisted TERM --set 'run.preempt_signals=["USR2"]'
check "SIGTERM not in the list: default action, no checkpoint (exit $RC)" \
    '[ -n "$RC" ] && [ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(clatest term_unlisted)" ]'

# bad values: exit 2 naming the key, no run dir
for v in '["KILL"]' '["usr1"]' '"USR1"' '[10]' '["USR1", 1]'; do
    rm -rf "$SCRATCH/bad"
    (cd "$FB_SRCDIR" && timeout 120 $MPIEXEC -n 1 "$FABULA" train --run-dir "$SCRATCH/bad" --set "run.preempt_signals=$v") \
        >"$SCRATCH/bad.out" 2>&1
    RC=$?
    check "run.preempt_signals=$v refused: exit 2 naming the key (got $RC)" \
        '[ "$RC" = 2 ] && grep -q "config key .run.preempt_signals." "$SCRATCH/bad.out" && [ ! -e "$SCRATCH/bad" ]'
done
finish
