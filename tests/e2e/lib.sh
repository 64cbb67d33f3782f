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

# rank_suite PROGRAM SECONDS [skippable]: runs PROGRAM, a unit test program
# of the build tree that ends with "PASS: 0 failures", under mpiexec with 1,
# 2 and 4 ranks, each launch under a timeout of SECONDS, each run a check;
# output in $SCRATCH/outNP.txt, its "checked" and "FAIL" lines shown, its tail
# on failure. With skippable, an exit 77 (nothing to run here: the program
# decides alike on every rank count) skips the whole test.
rank_suite() {
    prog=$1; secs=$2; skippable=${3:-}
    [ -x "$prog" ] || { echo "no $prog (make check builds it)"; exit 99; }
    for np in 1 2 4; do
        timeout "$secs" $MPIEXEC -n "$np" "$prog" >"$SCRATCH/out$np.txt" 2>&1
        rc=$?
        if [ -n "$skippable" ] && [ "$rc" -eq 77 ]; then
            cat "$SCRATCH/out$np.txt"
            exit 77
        fi
        check "$(basename "$prog") on $np ranks passes (exit $rc)" \
            '[ $rc -eq 0 ] && grep -q "^PASS: 0 failures" "$SCRATCH/out$np.txt"'
        grep -E '^(checked|FAIL)' "$SCRATCH/out$np.txt" | sed 's/^/  /'
        [ "$rc" -eq 0 ] || tail -n 20 "$SCRATCH/out$np.txt" | sed 's/^/  | /'
    done
}

# expect_exit2 NAME KEY NEEDLE NP CMD...: CMD on NP ranks from the source
# tree exits 2, stderr names KEY and holds NEEDLE, exactly one
# "fabula: error:" line (rank 0 alone reports).
expect_exit2() {
    name=$1; key=$2; needle=$3; np=$4; shift 4
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$np" "$@") >"$SCRATCH/out.txt" 2>"$SCRATCH/err.txt"
    rc=$?
    check "$name: exit 2 naming $key and '$needle', one message" \
        '[ $rc -eq 2 ] && grep -qF "$key" "$SCRATCH/err.txt" && grep -qF -- "$needle" "$SCRATCH/err.txt" &&
         [ "$(grep -c "fabula: error:" "$SCRATCH/err.txt")" -eq 1 ]'
    [ "$rc" -eq 2 ] && [ "$(grep -c "fabula: error:" "$SCRATCH/err.txt")" -eq 1 ] ||
        { echo "  exit $rc, stderr:"; sed 's/^/  | /' "$SCRATCH/err.txt"; }
}
# expect_refused NAME KEY NEEDLE NP ARGS...: expect_exit2 of
# `fabula train --dry-run ARGS` (the refusal tests of tp/pp layouts).
expect_refused() {
    name=$1; key=$2; needle=$3; np=$4; shift 4
    expect_exit2 "$name" "$key" "$needle" "$np" "$FABULA" train --dry-run --set "run.run_dir=$SCRATCH/rd" "$@"
}
# OK: the --set flags of a dry run that saves and resumes nothing
OK="--set checkpoint.save_interval=-1 --set run.resume=\"none\""

finish() {
    echo "$CHECKS checks, $FAILS failed"
    [ "$FAILS" -eq 0 ] || exit 1
    exit 0
}

# need_tokenizers_python: sets PY to a Python that imports the Hugging Face
# `tokenizers` package, or skips the whole test (exit 77) saying how to get one.
need_tokenizers_python() {
    PY=
    for p in "${PYTHON_TOKENIZERS:-}" "${PYTHON:-}" /usr/bin/python3 python3; do
        if [ -n "$p" ] && "$p" -c 'import tokenizers' >/dev/null 2>&1; then
            PY=$p
            return 0
        fi
    done
    echo "SKIP: no Python with the 'tokenizers' package (tried \$PYTHON_TOKENIZERS, \$PYTHON, /usr/bin/python3," \
        "python3); install it: /usr/bin/python3 -m pip install --break-system-packages tokenizers"
    exit 77
}
