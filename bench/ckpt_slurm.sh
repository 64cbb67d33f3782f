#!/bin/sh
# Checkpoint write and resume read under Slurm, beside dd (bench/ckpt.sh run
# inside a batch job), for each way slurm/train.sbatch launches the ranks:
#
#   unbound   mpiexec -n N with OMP_PROC_BIND=close and nothing binding the
#             ranks: train.sbatch up to 2026-12-05 (every rank's thread
#             bound to the node's first core)
#   hydra     mpiexec -n N -bind-to core:T: train.sbatch now
#   srun      srun --mpi=pmi2 --cpu-bind=cores: FABULA_LAUNCHER=srun (binds
#             only where the cluster runs task/affinity or task/cgroup)
#
#   FABULA=/path/to/fabula bench/ckpt_slurm.sh [OUT_DIR]
#
# Needs a working Slurm (sbatch on PATH, SLURM_CONF if not the default).
# Environment: RANKS (default "1 2 4"; the jobs overcommit the allocation
# with -O where N exceeds the node's CPUs), MODEL (bench/ckpt.sh's), LAUNCHES (default "unbound
# hydra srun"), REPEAT (pairs per row, default 1), PARTITION (sbatch -p).
# Each row is one job; its table is bench/ckpt.sh's (MB/s, fabula / dd).
set -eu
: "${FABULA:?set FABULA to the fabula binary}"
RANKS=${RANKS:-"1 2 4"}
LAUNCHES=${LAUNCHES:-"unbound hydra srun"}
REPEAT=${REPEAT:-1}
top=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$PWD/bench-ckpt-slurm}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
command -v sbatch >/dev/null || { echo "ckpt_slurm.sh: no sbatch here" >&2; exit 2; }

echo "fabula checkpoint write/read under Slurm, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(sbatch --version)"
for launch in $LAUNCHES; do
    case $launch in
    unbound) mpi="mpiexec" ;;
    hydra) mpi="mpiexec -bind-to core:1" ;;
    srun) mpi="srun --mpi=pmi2 --cpu-bind=cores" ;;
    *) echo "ckpt_slurm.sh: unknown launch '$launch'" >&2; exit 2 ;;
    esac
    for np in $RANKS; do
        log="$OUT/$launch-$np.log"
        # shellcheck disable=SC2016
        # -O only past the node's CPUs: an overcommitted job gets one CPU
        over=
        [ "$np" -gt "$(nproc)" ] && over=-O
        sbatch --wait $over -n "$np" ${PARTITION:+-p "$PARTITION"} -J "ckpt-$launch-$np" -o "$log" --wrap \
            "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_PROC_BIND=close
             FABULA='$FABULA' MPIEXEC='$mpi' ${MODEL+MODEL='$MODEL'} RANKS=$np REPEAT=$REPEAT sh '$top/bench/ckpt.sh' '$OUT/$launch-$np'" \
            >/dev/null || { echo "job $launch-$np failed:"; tail -n 20 "$log"; exit 1; }
        row=$(grep -E "^$np +shared" "$log" | head -n 1)
        echo "$launch $row"
    done
done
echo "(columns after the launch: ranks, collective, MB, fabula write, dd write, ratio, fabula read, dd read, ratio, page cache)"
