#!/bin/sh
# slurm/scaling.sh and pbs/scaling.sh without a scheduler (--local), both
# running the sweep code they share (tools/scaling_sweep.sh): a strong and a
# weak sweep on 1 and 2 ranks each write their points and print two tables
# of two rows; --report alone prints the same tables again from the run
# dirs; bad options and values (--repeats 0 or without a value, a machine
# file that cannot be read) exit 2 with a message naming them; a point
# directory that already exists is refused. The numbers in the table are
# checked by report_scaling.sh; here, that the scripts drive it.
. "$FB_SRCDIR/tests/e2e/lib.sh"
export FABULA MPIEXEC

ARGS="--set model.hidden_size=32 --set model.intermediate_size=64 --set data.seq_len=32"
for sched in slurm pbs; do
    OUT="$SCRATCH/$sched"
    # the default config's relative corpus path points into the source tree
    (cd "$FB_SRCDIR" && timeout 600 "$sched/scaling.sh" --local --ranks "1 2" --steps 3 --out "$OUT" -- $ARGS) \
        >"$SCRATCH/$sched.md" 2>"$SCRATCH/$sched.err"
    RC=$?
    cat "$SCRATCH/$sched.md"
    [ $RC -eq 0 ] || tail -n 20 "$SCRATCH/$sched.err"
    check "$sched/scaling.sh --local: exit 0 (exit $RC)" '[ $RC -eq 0 ]'
    check "$sched: a strong and a weak table, two rows of one run each, the smallest point's efficiency 1.000" \
        '[ "$(grep -c "^## strong scaling" "$SCRATCH/$sched.md")" -eq 1 ] &&
         [ "$(grep -c "^## weak scaling" "$SCRATCH/$sched.md")" -eq 1 ] &&
         [ "$(grep -c "^| [12] | 1 | " "$SCRATCH/$sched.md")" -eq 4 ] &&
         [ "$(grep -c "^| 1 | 1 | [0-9.]* | [0-9.-]* | [0-9.]* | [0-9.]* | 1.000 |" "$SCRATCH/$sched.md")" -eq 2 ]'
    check "$sched: every point ran its 3 steps in its own run dir" \
        'for p in strong-n1 strong-n2 weak-n1 weak-n2; do
             [ "$(wc -l <"$OUT/$p/metrics.jsonl")" -eq 3 ] || exit 1; done'
    check "$sched: the strong points share the global batch, the weak ones 2 samples per rank" \
        'grep -q "\"train_batch_size\": 4," "$OUT/strong-n1/config.json" &&
         grep -q "\"train_batch_size\": 4," "$OUT/strong-n2/config.json" &&
         grep -q "\"train_batch_size\": 2," "$OUT/weak-n1/config.json" &&
         grep -q "\"train_batch_size\": 4," "$OUT/weak-n2/config.json"'
    (cd "$FB_SRCDIR" && "$sched/scaling.sh" --report --ranks "1 2" --steps 3 --out "$OUT") >"$SCRATCH/again.md" 2>/dev/null
    check "$sched: --report prints the same tables from the run dirs" \
        'cmp -s "$SCRATCH/again.md" "$SCRATCH/$sched.md"'
    (cd "$FB_SRCDIR" && "$sched/scaling.sh" --local --ranks "1 2" --steps 3 --out "$OUT") >/dev/null 2>"$SCRATCH/err.txt"
    RC=$?
    check "$sched: an existing point is refused (exit 2, names it)" \
        '[ $RC -eq 2 ] && grep -q "strong-n1 exists" "$SCRATCH/err.txt"'
    for bad in "--bogus:unknown option" "--ranks 0:is not a positive rank count" \
        "--sweep sideways:--sweep must be" "--global-batch 3 --ranks 2:not a multiple" \
        "--local -- --set train_batch_size=8:the sweep sets the batch sizes" \
        "--repeats 0:--repeats: '0' is not a positive count" \
        "--local --machine $SCRATCH/no-such-machine.json:cannot read the machine file"; do
        opts=${bad%%:*}; msg=${bad#*:}
        # shellcheck disable=SC2086
        (cd "$FB_SRCDIR" && "$sched/scaling.sh" $opts --out "$SCRATCH/bad") >/dev/null 2>"$SCRATCH/err.txt"
        RC=$?
        check "$sched: $opts: exit 2 saying \"$msg\"" '[ $RC -eq 2 ] && grep -qF -- "$msg" "$SCRATCH/err.txt"'
    done
done
(cd "$FB_SRCDIR" && pbs/scaling.sh --ncpus) >/dev/null 2>"$SCRATCH/err.txt"
RC=$?
check "pbs: --ncpus without a value: exit 2 saying so" '[ $RC -eq 2 ] && grep -q "ncpus needs a value" "$SCRATCH/err.txt"'
(cd "$FB_SRCDIR" && slurm/scaling.sh --repeats) >/dev/null 2>"$SCRATCH/err.txt"
RC=$?
check "--repeats without a value: exit 2 saying so" '[ $RC -eq 2 ] && grep -q "repeats needs a value" "$SCRATCH/err.txt"'
(cd "$FB_SRCDIR" && slurm/scaling.sh --ncpus 4) >/dev/null 2>"$SCRATCH/err.txt"
RC=$?
check "slurm: --ncpus is PBS's option, unknown here (exit 2)" '[ $RC -eq 2 ] && grep -q "unknown option" "$SCRATCH/err.txt"'
finish
