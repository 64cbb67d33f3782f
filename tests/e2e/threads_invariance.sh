#!/bin/sh
# Thread count: the same training run at OMP_NUM_THREADS (and
# OPENBLAS_NUM_THREADS) 1 and 2 gives bit-identical losses, gradient norms
# and tokens per expert, step by step. The model is big enough that each
# kernel takes its threaded path at 2 threads (GEMMs cut into blocks, the
# elementwise loops over CPU_PAR_MIN_ELEMS, column-blocked reductions of
# RMSNorm and the embedding, the global norm's fixed blocks) and the
# grouped expert matmuls share experts out among threads: 4 experts, 64
# experts (a few rows each), expert dropout on; and the bf16 backend
# (cpu16: the fp32<->16-bit conversions); and the 4-expert case again on
# each of OpenBLAS's Prescott and (where the CPU has AVX2) Haswell kernel
# sets. Every launch runs under a timeout.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ep_lib.sh"
STEPS=3
SAME="grad_norm expert_tokens dropped layer_dropped"

# run THREADS NAME ARGS...: one rank, THREADS threads for OpenMP and BLAS
run() {
    t=$1; name=$2; shift 2
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t
    export OMP_NUM_THREADS OPENBLAS_NUM_THREADS
    (cd "$FB_SRCDIR" && timeout 300 $MPIEXEC -n 1 "$FABULA" train --steps $STEPS --run-dir "$SCRATCH/$name" \
        --set checkpoint.save_interval=-1 --set train_batch_size=4 --set train_micro_batch_size_per_gpu=4 \
        --set data.seq_len=128 --set model.hidden_size=256 --set model.intermediate_size=512 \
        --set model.expert_dropout=0.1 "$@") >"$SCRATCH/$name.out" 2>&1
    RC=$?
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    [ $RC -eq 0 ] || { echo "--- $name failed ($RC):"; tail -n 20 "$SCRATCH/$name.out"; }
}

# pair NAME ARGS...: runs at 1 and 2 threads and compares them bit for bit
# (run sets name: this one keeps its own)
pair() {
    case_=$1; shift
    run 1 "$case_-t1" "$@"
    rc1=$RC
    run 2 "$case_-t2" "$@"
    check "$case_: 1 and 2 threads give bit-identical losses, grad norms and tokens per expert" \
        "[ $rc1 -eq 0 ] && [ $RC -eq 0 ] && compare $case_-t1 $case_-t2 0 $SAME"
}

pair fp32-e4 --set model.num_local_experts=4
pair fp32-e64 --set model.num_local_experts=64 --set model.num_experts_per_tok=4
pair bf16-e16 --set model.num_local_experts=16 --set run.backend=cpu16

# OpenBLAS picks its kernels by CPU (Prescott on one of this project's VMs,
# Haswell on another), and their edge kernels round differently: a GEMM
# cut into blocks at multiples of 64 gave the uncut GEMM's bits on one set
# and not on the other, so 1 and 2 threads gave other losses there
# (docs/cpu-threads.md). The 4-expert case runs again on each kernel set
# this CPU can execute (OPENBLAS_CORETYPE, which a DYNAMIC_ARCH OpenBLAS
# obeys), so either machine catches that.
blas=$(ldd "$FABULA" 2>/dev/null | awk '/blas/ {print $3; exit}')
if [ -n "$blas" ] && readlink -f "$blas" | grep -q openblas && [ "$(uname -m)" = x86_64 ]; then
    cores=Prescott
    grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && cores="$cores Haswell"
    for core in $cores; do
        OPENBLAS_CORETYPE=$core
        export OPENBLAS_CORETYPE
        pair "fp32-e4-$core" --set model.num_local_experts=4
        unset OPENBLAS_CORETYPE
    done
else
    echo "note: not an x86-64 OpenBLAS ($blas): no kernel-set variants"
fi
finish
