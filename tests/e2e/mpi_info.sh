#!/bin/sh
# checkpoint.mpi_info and prep.mpi_info (docs/config.md): the hints reach
# MPI-IO, as MPICH's ROMIO reports them when it opens a file
# (ROMIO_PRINT_HINTS=1 prints the open file's hints, defaults included), at
# 1 and 2 ranks, for the checkpoint written, the checkpoint read on resume,
# the corpus `fabula prep --mpi-info` writes and the corpus training reads;
# a run resumed from a checkpoint written with hints gives the uninterrupted
# run's losses; a value that is not a string is refused naming the key.
. "$FB_SRCDIR/tests/e2e/lib.sh"

losses() { sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$1"; }
SMALL="--set model.hidden_size=64 --set model.intermediate_size=128 --set data.seq_len=64 --set train_batch_size=4
 --set train_micro_batch_size_per_gpu=2 --set scheduler.params.total_num_steps=6 --set run.resume=auto"
HINTS='{"romio_cb_write":"enable","romio_ds_write":"disable","cb_buffer_size":"1048576"}'
# hint KEY VALUE: ROMIO printed hint KEY with VALUE in out.txt
hint() { grep -Eq "^key = $1 +value = $2 *$" "$SCRATCH/out.txt"; }

# Check the probe: ROMIO prints its hints here, and without ours they differ.
export ROMIO_PRINT_HINTS=1
run_fabula 1 train --steps 2 --run-dir "$SCRATCH/plain" $SMALL --set checkpoint.save_interval=1
if ! grep -q "^key = cb_buffer_size" "$SCRATCH/out.txt"; then
    tail -n 5 "$SCRATCH/out.txt"
    echo "SKIP: this MPI does not print MPI-IO hints with ROMIO_PRINT_HINTS=1 (not MPICH/ROMIO)"
    exit 77
fi
check "without hints, ROMIO's defaults (cb_buffer_size not 1048576, romio_ds_write not disable)" \
    '[ $RC -eq 0 ] && ! hint cb_buffer_size 1048576 && ! hint romio_ds_write disable'

for np in 1 2; do
    D="$SCRATCH/hints$np"
    run_fabula $np train --steps 3 --run-dir "$D" $SMALL --set checkpoint.save_interval=3 \
        --set "checkpoint.mpi_info=$HINTS"
    check "$np rank(s): checkpoint written with the hints (cb_buffer_size 1048576, romio_cb_write enable, romio_ds_write disable)" \
        '[ $RC -eq 0 ] && [ -s "$D/checkpoints/step-00000003.h5" ] && hint cb_buffer_size 1048576 &&
         hint romio_cb_write enable && hint romio_ds_write disable'
    run_fabula $np train --steps 6 --run-dir "$D" $SMALL --set checkpoint.save_interval=3 \
        --set "checkpoint.mpi_info=$HINTS"
    check "$np rank(s): resumed from step 3, the checkpoint read and written with the hints" \
        '[ $RC -eq 0 ] && grep -q "resum.*step 3" "$SCRATCH/out.txt" && hint cb_buffer_size 1048576 &&
         [ "$(grep -c "^key = cb_buffer_size *value = 1048576" "$SCRATCH/out.txt")" -ge 2 ]'
    U="$SCRATCH/whole$np"
    run_fabula $np train --steps 6 --run-dir "$U" $SMALL --set checkpoint.save_interval=0
    check "$np rank(s): the resumed run's losses equal the uninterrupted run's" \
        '[ "$(losses "$D/metrics.jsonl")" = "$(losses "$U/metrics.jsonl")" ] && [ "$(losses "$U/metrics.jsonl" | wc -l)" -eq 6 ]'
done

for np in 1 2; do
    C="$SCRATCH/corpus$np.h5"
    (cd "$FB_SRCDIR" && timeout 600 $MPIEXEC -n $np "$FABULA" prep -q --max-seq-len 64 --overlap 16 --min-seq-len 16 \
        --mpi-info '{"cb_buffer_size":"2097152","romio_cb_write":"enable"}' --output "$C" inputs/sample.jsonl) \
        >"$SCRATCH/out.txt" 2>&1
    RC=$?
    check "$np rank(s): fabula prep --mpi-info: the corpus written with the hints" \
        '[ $RC -eq 0 ] && [ -s "$C" ] && hint cb_buffer_size 2097152 && hint romio_cb_write enable'
    run_fabula $np train --steps 2 --run-dir "$SCRATCH/oncorpus$np" $SMALL --set "data.corpus=$C" \
        --set checkpoint.save_interval=-1 --set 'prep.mpi_info={"cb_buffer_size":"3145728"}'
    check "$np rank(s): training opens the corpus with prep.mpi_info" '[ $RC -eq 0 ] && hint cb_buffer_size 3145728'
done
unset ROMIO_PRINT_HINTS

# refused values: exit 2 naming the key
refused() { # WHAT EXPECTED-MESSAGE ARGS...
    what=$1; msg=$2; shift 2
    run_fabula 1 "$@"
    check "$what: exit 2 naming the key" '[ $RC -eq 2 ] && grep -q "$msg" "$SCRATCH/out.txt"'
    grep "error" "$SCRATCH/out.txt" | head -n 2
}
refused "checkpoint.mpi_info with a number" "config key 'checkpoint.mpi_info.cb_nodes' = 4: expected a string" \
    train --dry-run --set 'checkpoint.mpi_info={"romio_cb_write":"enable","cb_nodes":4}'
refused "checkpoint.mpi_info not an object" "'checkpoint.mpi_info': expected a JSON object" \
    train --dry-run --set 'checkpoint.mpi_info=enable'
refused "prep.mpi_info with a boolean" "'prep.mpi_info.romio_cb_read' = true: expected a string" \
    train --dry-run --set 'prep.mpi_info={"romio_cb_read":true}'
refused "fabula prep --mpi-info with a number" "'--mpi-info.striping_factor' = 8: expected a string" \
    prep --mpi-info '{"striping_factor":8}' --output "$SCRATCH/never.h5" inputs/sample.jsonl
check "... and no corpus written" '[ ! -e "$SCRATCH/never.h5" ]'
refused "fabula prep --mpi-info not JSON" "'--mpi-info': not JSON" \
    prep --mpi-info 'cb_nodes=4' --output "$SCRATCH/never.h5" inputs/sample.jsonl
finish
