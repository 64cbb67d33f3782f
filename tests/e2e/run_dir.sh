#!/bin/sh
# The run directory is never reused silently.
#  - One job per run directory: while a training job runs, a second job on
#    the same --run-dir exits 2 naming the first's host and pid, and leaves
#    the first's metrics and config untouched; once the first is killed
#    (SIGKILL, no chance to clean up) the lock is gone and a new job runs.
#  - A finished run without checkpoints is not started over by
#    run.resume "auto" (its metrics would be wiped): exit 2, metrics kept;
#    "none" starts it over on purpose.
#  - The shipped quick-start config resumes ("auto"), so a requeued job
#    continues instead of restarting at step 0.
. "$FB_SRCDIR/tests/e2e/lib.sh"

RUN="$SCRATCH/run"
ARGS="--set checkpoint.save_interval=-1 --set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32"
(cd "$FB_SRCDIR" && exec timeout 300 $MPIEXEC -n 2 "$FABULA" train --steps 100000 --run-dir "$RUN" $ARGS) \
    >"$SCRATCH/a.txt" 2>&1 &
A=$!
# wait for the first job's first steps
i=0
while [ $i -lt 600 ] && ! [ -s "$RUN/metrics.jsonl" ]; do sleep 0.1; i=$((i + 1)); done
check "the first job is training" '[ -s "$RUN/metrics.jsonl" ] && [ -s "$RUN/.lock" ]'
HOLDER=$(sed -n 's/^host \(.*\) pid \([0-9]*\)$/\2/p' "$RUN/.lock")
cp "$RUN/config.json" "$SCRATCH/config.before"

run_fabula 1 train --steps 5 --run-dir "$RUN" $ARGS --set run.seed=99
cat "$SCRATCH/out.txt"
check "a second job on the same run dir exits 2" '[ $RC -eq 2 ]'
check "its message names the run dir and the holder's host and pid $HOLDER" \
    'grep -q "run directory .*run is in use by another fabula job (host .* pid $HOLDER" "$SCRATCH/out.txt"'
check "no MPI abort noise after the clean error" '! grep -q "Abort(" "$SCRATCH/out.txt"'
check "the first job's config.json is untouched" 'cmp -s "$RUN/config.json" "$SCRATCH/config.before"'
n1=$(wc -l <"$RUN/metrics.jsonl"); sleep 1; n2=$(wc -l <"$RUN/metrics.jsonl")
check "the first job's metrics still grow ($n1 -> $n2 lines)" '[ "$n2" -gt "$n1" ]'

kill -KILL "$HOLDER" 2>/dev/null
wait $A 2>/dev/null
run_fabula 1 train --steps 3 --run-dir "$RUN" $ARGS --set run.resume=none
check "after the holder was killed a new job takes the run dir (exit $RC)" '[ $RC -eq 0 ]'

# a finished run without checkpoints, run again with "auto"
run_fabula 1 train --steps 3 --run-dir "$SCRATCH/done" $ARGS --set run.resume=auto
check "a 3-step run without checkpoints finishes" '[ $RC -eq 0 ] && [ "$(wc -l <"$SCRATCH/done/metrics.jsonl")" -eq 3 ]'
cp "$SCRATCH/done/metrics.jsonl" "$SCRATCH/done.metrics"
run_fabula 1 train --steps 3 --run-dir "$SCRATCH/done" $ARGS --set run.resume=auto
check "run again with resume auto: exit 2, naming the finished run and run.resume" \
    '[ $RC -eq 2 ] && grep -q "records a finished run (3 steps" "$SCRATCH/out.txt" && grep -q "run.resume" "$SCRATCH/out.txt"'
check "... and its metrics are kept" 'cmp -s "$SCRATCH/done/metrics.jsonl" "$SCRATCH/done.metrics"'
run_fabula 1 train --steps 2 --run-dir "$SCRATCH/done" $ARGS --set run.resume=none
check "resume none starts it over on purpose" '[ $RC -eq 0 ] && [ "$(wc -l <"$SCRATCH/done/metrics.jsonl")" -eq 2 ]'
check "the quick-start config resumes when requeued" \
    'grep -q "\"resume\": *\"auto\"" "$FB_SRCDIR/inputs/quickstart.json"'
# a FIFO in a run directory's place of metrics.jsonl or checkpoints/latest:
# refused (exit 3) naming it, never a resume blocked reading it
for f in metrics.jsonl checkpoints/latest; do
    rm -rf "$SCRATCH/fifo"
    mkdir -p "$SCRATCH/fifo/checkpoints"
    mkfifo "$SCRATCH/fifo/$f"
    (cd "$FB_SRCDIR" && timeout -k 5 60 $MPIEXEC -n 1 "$FABULA" train --run-dir "$SCRATCH/fifo" --steps 2) \
        >"$SCRATCH/fifo.out" 2>&1
    RC=$?
    check "a FIFO as $f: exit 3 naming it (got $RC)" \
        '[ $RC -eq 3 ] && grep -q "error: $SCRATCH/fifo/$f: not a regular file (a FIFO)" "$SCRATCH/fifo.out"'
done
finish
