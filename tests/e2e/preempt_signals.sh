#!/bin/sh
# Signals outside the steady state of tests/e2e/ckpt_preempt.sh:
#  - SIGTERM or SIGUSR1 while the run is still starting (here: blocked
#    opening its input, a FIFO that is fed only after the signal) is
#    remembered and honoured at the first step boundary: checkpoint, exit 75.
#    (The handlers used to be installed after loading and resuming: SIGTERM
#    then killed the run with 15, SIGUSR1 was lost to MPICH's own handler.)
#  - Ctrl-C (SIGINT) is a preemption like SIGTERM: checkpoint, exit 75.
#  - a second Ctrl-C ends the run at once, before any checkpoint is written.
#  - run.preempt_signals: SIGUSR2 preempts when listed; unlisted (the
#    default list), it keeps its default action and kills the run without a
#    checkpoint; a list without TERM leaves SIGTERM deadly; bad names or a
#    non-array are refused (exit 2) naming the key.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
IN="$FB_SRCDIR/inputs/sample.jsonl"

pids() { pgrep -f "^$FABULA train --run-dir $SCRATCH/$1 "; }
wait_for() { n=$(($1 * 10)); while [ $n -gt 0 ]; do eval "$2" && return 0; sleep 0.1; n=$((n - 1)); done; return 1; }

# start-up: one rank blocks opening data.train (a FIFO) until it is fed
for sig in TERM USR1; do
    d=start_$sig
    mkfifo "$SCRATCH/$d.jsonl"
    (ctrain 1 "$d" --steps 100000 --set data.train="$SCRATCH/$d.jsonl"; echo $RC >"$SCRATCH/$d.rc") &
    wait_for 60 "[ -n \"\$(pids $d)\" ]" && sleep 1
    kill -$sig $(pids $d)
    sleep 0.3
    cat "$IN" >"$SCRATCH/$d.jsonl"
    wait_for 120 "[ -s '$SCRATCH/$d.rc' ]"
    RC=$(cat "$SCRATCH/$d.rc")
    check "SIG$sig during start-up: honoured after the first step, exit 75 (got $RC)" \
        '[ "$RC" = 75 ] && grep -q "preempted (SIG$sig): checkpoint of step 1 written, exit 75" "$SCRATCH/$d.out"'
    check "... and its checkpoint verifies" \
        '"$FABULA" ckpt verify -q "$SCRATCH/$d/checkpoints/step-00000001.h5" >/dev/null'
done

# Ctrl-C: every rank gets SIGINT, as from a terminal
SLOW="--set model.hidden_size=256 --set model.intermediate_size=512 --set data.seq_len=256 --set model.num_hidden_layers=2"
(ctrain 2 int --steps 100000 $SLOW; echo $RC >"$SCRATCH/int.rc") &
wait_for 120 "[ -s '$SCRATCH/int/metrics.jsonl' ]"
kill -INT $(pids int)
wait_for 120 "[ -s '$SCRATCH/int.rc' ]"
RC=$(cat "$SCRATCH/int.rc")
s=$(clatest int)
check "SIGINT (Ctrl-C): checkpoint of the stopping step, exit 75 (got $RC)" \
    '[ "$RC" = 75 ] && [ -n "$s" ] && grep -q "preempted (SIGINT): checkpoint of step $s written, exit 75" "$SCRATCH/int.out"'

# a second Ctrl-C during the step that follows the first
(ctrain 2 int2 --steps 100000 $SLOW; echo $RC >"$SCRATCH/int2.rc") &
wait_for 120 "[ -s '$SCRATCH/int2/metrics.jsonl' ]"
kill -INT $(pids int2)
sleep 0.05
kill -INT $(pids int2) 2>/dev/null
t0=$(date +%s)
wait_for 60 "[ -s '$SCRATCH/int2.rc' ]"
RC=$(cat "$SCRATCH/int2.rc")
check "a second SIGINT ends the run at once, without a checkpoint (exit $RC, after $(($(date +%s) - t0)) s)" \
    '[ -n "$RC" ] && [ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(clatest int2)" ] && ! grep -q "checkpoint: saved" "$SCRATCH/int2.out"'
sigs_of() { python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["run"]["preempt_signals"]))' "$SCRATCH/$1/config.json"; }
# run.preempt_signals: steady state, one rank of two signalled
usr() { # DIR SIGNAL ARGS...: signal one rank once steps are logged; status in $RC
    d=$1; sig=$2; shift 2
    (ctrain 2 "$d" --steps 100000 "$@"; echo $RC >"$SCRATCH/$d.rc") &
    wait_for 120 "[ -s '$SCRATCH/$d/metrics.jsonl' ]"
    kill -"$sig" $(pids "$d" | tail -n 1)
    wait_for 120 "[ -s '$SCRATCH/$d.rc' ]"
    RC=$(cat "$SCRATCH/$d.rc")
}
usr usr2 USR2 --set 'run.preempt_signals=["USR2"]'
s=$(clatest usr2)
check "SIGUSR2 listed in run.preempt_signals: checkpoint, exit 75 (got $RC)" \
    '[ "$RC" = 75 ] && [ -n "$s" ] && grep -q "preempted (SIGUSR2): checkpoint of step $s written, exit 75" "$SCRATCH/usr2.out"'
check "... and the effective config records the list" \
    '[ "$(sigs_of usr2)" = USR2 ]'
usr usr2_default USR2
check "SIGUSR2 with the default list (USR1, TERM): default action, no checkpoint (exit $RC)" \
    '[ -n "$RC" ] && [ "$RC" != 0 ] && [ "$RC" != 75 ] && [ -z "$(clatest usr2_default)" ] && ! grep -q "preempted" "$SCRATCH/usr2_default.out"'
check "... the default list is in the effective config" \
    '[ "$(sigs_of usr2_default)" = USR1,TERM ]'
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
for d in start_TERM start_USR1 int int2 usr2 usr2_default term_unlisted; do for p in $(pids $d); do kill -KILL "$p" 2>/dev/null; done; done
finish
