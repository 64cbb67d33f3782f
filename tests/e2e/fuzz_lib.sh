# Shared by the fuzz tests (sourced after lib.sh): each case runs under a
# bound on memory (ulimit -v, 2 GiB) and time (timeout), one OpenMP thread,
# from $SCRATCH. A hostile file may be refused (2 usage/config, 3 input
# data) or accepted (0); an internal error (1), an I/O error (4), a kill by
# the memory bound (an allocation failing is exit 1), a timeout (124, or
# 137 after 5 more seconds: a training run takes SIGTERM as a preemption
# request and may be blocked where it cannot act on it) or a signal is a
# failure, and the case's input is kept as $SCRATCH/bad-N. Commands run as
# one process, without mpiexec, so that the kill reaches them.
FUZZ_VMEM_KB=${FB_FUZZ_VMEM_KB:-2097152}
FUZZ_TIMEOUT=${FB_FUZZ_TIMEOUT:-20}
FUZZ_TOOL="${FB_BUILDDIR:-.}/tests/e2e/fuzz_tool"
[ -x "$FUZZ_TOOL" ] || { echo "no $FUZZ_TOOL (make check builds it)"; exit 99; }
fuzz_cases=0; fuzz_bad=0; fuzz_ok=0; fuzz_refused=0

# bounded CMD...: CMD under the memory and time bounds, from $FUZZ_DIR
# ($SCRATCH unless set), output in $SCRATCH/run.out, status in $RC
bounded() {
    (cd "${FUZZ_DIR:-$SCRATCH}" && ulimit -v "$FUZZ_VMEM_KB" && OMP_NUM_THREADS=1 exec timeout -k 5 "$FUZZ_TIMEOUT" "$@") \
        >"$SCRATCH/run.out" 2>&1 </dev/null
    RC=$?
}

# fuzz_case LABEL KEEP CMD...: one random case; KEEP (a file or directory)
# is copied aside when the exit status is not 0, 2 or 3
fuzz_case() {
    label=$1; keep=$2; shift 2
    fuzz_cases=$((fuzz_cases + 1))
    bounded "$@"
    case $RC in
    0) fuzz_ok=$((fuzz_ok + 1)) ;;
    2|3) fuzz_refused=$((fuzz_refused + 1)) ;;
    *) fuzz_bad=$((fuzz_bad + 1))
       echo "case $fuzz_cases ($label): exit $RC"
       grep -v '^fabula: note:' "$SCRATCH/run.out" | tail -n 3 | sed 's/^/  | /'
       rm -rf "$SCRATCH/bad-$fuzz_cases"
       cp -r "$keep" "$SCRATCH/bad-$fuzz_cases" ;;
    esac
}

# fuzz_summary WHAT: the check that no random case failed
fuzz_summary() {
    echo "$1: $fuzz_cases cases: $fuzz_ok accepted, $fuzz_refused refused (exit 2 or 3), $fuzz_bad otherwise"
    check "$1: every case exits 0, 2 or 3 within ${FUZZ_TIMEOUT} s and $((FUZZ_VMEM_KB / 1024)) MiB ($fuzz_bad did not)" \
        '[ $fuzz_cases -gt 0 ] && [ $fuzz_bad -eq 0 ]'
}

# refused NAME CODE NEEDLE CMD...: CMD, bounded, exits CODE with NEEDLE in
# its output
refused() {
    name=$1; code=$2; needle=$3; shift 3
    bounded "$@"
    check "$name: exit $code (got $RC), saying '$needle'" '[ $RC -eq $code ] && grep -qF -- "$needle" "$SCRATCH/run.out"'
    [ $RC -eq "$code" ] || grep -v '^fabula: note:' "$SCRATCH/run.out" | tail -n 3 | sed 's/^/  | /'
}

# fifo_in PATH: replaces the file at PATH by a FIFO (nobody ever writes it)
fifo_in() { rm -rf "$1" && mkfifo "$1"; }
