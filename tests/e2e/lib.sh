# Shared helpers for the end-to-end tests (sourced). Tests run in the build
# tree: scratch goes under ./e2e-scratch/<test>, never into the source tree.
set -u
: "${FABULA:?FABULA (path of the fabula binary) must be set; run through make check}"
: "${FB_SRCDIR:?FB_SRCDIR must be set}"
: "${MPIEXEC:=mpiexec}"

TEST_NAME=$(basename "$0" .sh)
SCRATCH="$PWD/e2e-scratch/$TEST_NAME"
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
FAILS=0
CHECKS=0

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
check() { CHECKS=$((CHECKS + 1)); if eval "$2"; then pass "$1"; else fail "$1"; fi; }

# run_fabula NPROCS ARGS...: runs from the source tree (the default config's
# relative paths point there), output in $SCRATCH/out.txt, status in $RC.
run_fabula() {
    np=$1; shift
    (cd "$FB_SRCDIR" && timeout 600 $MPIEXEC -n "$np" "$FABULA" "$@") >"$SCRATCH/out.txt" 2>&1
    RC=$?
}

finish() {
    echo "$CHECKS checks, $FAILS failed"
    [ "$FAILS" -eq 0 ] || exit 1
    exit 0
}
