#!/bin/sh
# A build with CUDA keeps the CUDA backend and the device comms in modules
# (fabula-cuda.so, fabula-comm.so; docs/cuda.md "Modules") that a CPU run
# never loads: the binary needs none of cudart, cuBLAS(Lt) or NCCL; a CPU
# training run maps none of them (seen with LD_DEBUG=libs, which logs every
# object the loader opens, dlopen included); run.backend "cuda" without a
# GPU gives the documented error (exit 2); a missing or broken module gives
# exit 2 naming the module's path and dlerror()'s reason.
# Skips (77) in a build configured without CUDA, where there is no module.
. "$FB_SRCDIR/tests/e2e/lib.sh"

: "${FB_BUILDDIR:?FB_BUILDDIR must be set}"
if ! grep -q '^#define HAVE_CUDA 1' "$FB_BUILDDIR/build_config.h"; then
    echo "SKIP: this build has no CUDA backend (configure --without-cuda or no toolkit), hence no modules"
    exit 77
fi
CUDA_LIBS_RE='lib(cudart|cublas|cublasLt|nccl)\.so'
# The test's own module directory must not leak into the checks below.
unset FABULA_MODULE_DIR

needed=$(readelf -d "$FABULA" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo $needed)"
check "readelf sees the binary's NEEDED entries (libc among them)" 'echo "$needed" | grep -q "^libc\.so"'
check "the binary needs none of cudart, cuBLAS, cuBLASLt, NCCL" '! echo "$needed" | grep -Eq "$CUDA_LIBS_RE"'

# The modules: built next to the binary, exporting their table and nothing
# else (hidden visibility), and needing from the binary only what it
# exports (-Wl,--export-dynamic): otherwise dlopen fails on a GPU node.
for m in fabula-cuda.so:fabula_cuda_api fabula-comm.so:fabula_comm_device_api; do
    mod="$FB_BUILDDIR/${m%%:*}" table=${m#*:}
    check "${m%%:*} is built next to the binary" '[ -f "$mod" ]'
    [ -f "$mod" ] || continue
    exported=$(nm -D --defined-only "$mod" | awk '$2 ~ /^[TDBR]$/ {print $3}' | tr '\n' ' ')
    check "${m%%:*} exports $table only (exports: $exported)" '[ "$exported" = "$table " ]'
    nm -D --undefined-only "$mod" | awk '$1 == "U" && $2 !~ /@/ {print $2}' | sort -u >"$SCRATCH/undef"
    { nm -D --defined-only "$FABULA"
      for lib in $(ldd "$mod" | awk '$3 ~ /^\// {print $3}'); do nm -D --defined-only "$lib"; done
    } 2>/dev/null | awk '{print $3}' | sed 's/@.*//' | sort -u >"$SCRATCH/have"
    missing=$(comm -23 "$SCRATCH/undef" "$SCRATCH/have" | tr '\n' ' ')
    check "every symbol ${m%%:*} needs is the binary's or its libraries' (missing: ${missing:-none})" \
        '[ -s "$SCRATCH/undef" ] && [ -z "$missing" ]'
done

# A 1-step CPU run with the loader's log of every object it opens.
LOG="$SCRATCH/lddebug"
(cd "$FB_SRCDIR" && LD_DEBUG=libs LD_DEBUG_OUTPUT="$LOG" timeout 600 $MPIEXEC -n 1 "$FABULA" train \
    --steps 1 --run-dir "$SCRATCH/cpu" --set run.resume=none --set run.backend=cpu) >"$SCRATCH/out.txt" 2>&1
RC=$?
check "1-step CPU run exits 0 (exit $RC)" '[ $RC -eq 0 ]'
[ $RC -eq 0 ] || tail -n 20 "$SCRATCH/out.txt"
opened=$(cat "$LOG".* 2>/dev/null | sed -n 's/.*calling init: \(.*\)/\1/p' | sort -u)
check "the loader log shows the run's libraries (libmpich)" 'echo "$opened" | grep -q libmpich'
check "the CPU run loads none of cudart, cuBLAS(Lt), NCCL, fabula-*.so" \
    '! echo "$opened" | grep -Eq "$CUDA_LIBS_RE|fabula-(cuda|comm)\.so"'
echo "$opened" | grep -E "$CUDA_LIBS_RE|fabula-" | sed 's/^/  loaded: /'

# run.backend cuda with the build tree's modules (found next to the binary).
no_gpu=1
if ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1 || ls /dev/nvidia[0-9]* >/dev/null 2>&1; then no_gpu=0; fi
if [ $no_gpu -eq 1 ]; then
    run_fabula 1 train --steps 1 --run-dir "$SCRATCH/cuda" --set run.resume=none --set run.backend=cuda
    grep "error:" "$SCRATCH/out.txt"
    check "backend cuda without a GPU: exit 2 (got $RC)" '[ $RC -eq 2 ]'
    check "... with the documented message" \
        'grep -q "run.backend is \"cuda\" but this rank sees no CUDA device" "$SCRATCH/out.txt"'
else
    echo "a GPU is present: the no-device message is not checked here"
fi

# The module directory pointed at an empty folder: the error names the path.
mkdir -p "$SCRATCH/empty"
FABULA_MODULE_DIR="$SCRATCH/empty" run_fabula 1 train --steps 1 --run-dir "$SCRATCH/nomod" --set run.resume=none \
    --set run.backend=cuda
grep "error:" "$SCRATCH/out.txt"
check "missing module: exit 2 (got $RC)" '[ $RC -eq 2 ]'
check "... naming the module's path and dlopen's reason" \
    'grep -q "cannot load module $SCRATCH/empty/fabula-cuda.so: .*No such file" "$SCRATCH/out.txt"'

# A module that is no shared object.
mkdir -p "$SCRATCH/bad"
echo "not an ELF file" >"$SCRATCH/bad/fabula-cuda.so"
FABULA_MODULE_DIR="$SCRATCH/bad" run_fabula 1 train --steps 1 --run-dir "$SCRATCH/badmod" --set run.resume=none \
    --set run.backend=cuda
grep "error:" "$SCRATCH/out.txt"
check "broken module: exit 2 (got $RC)" '[ $RC -eq 2 ]'
check "... naming its path and dlerror()" \
    'grep -q "cannot load module $SCRATCH/bad/fabula-cuda.so: .*$SCRATCH/bad/fabula-cuda.so" "$SCRATCH/out.txt"'

# Shared objects that are no fabula module: one without the table's
# function, one whose table has another layout version (another build's).
if command -v cc >/dev/null 2>&1; then
    mkdir -p "$SCRATCH/nosym" "$SCRATCH/oldver"
    echo 'int fabula_something_else(void) { return 0; }' >"$SCRATCH/nosym.c"
    echo 'static const int t[64] = {999}; const void *fabula_cuda_api(void) { return t; }' >"$SCRATCH/oldver.c"
    cc -shared -fPIC -o "$SCRATCH/nosym/fabula-cuda.so" "$SCRATCH/nosym.c" &&
        cc -shared -fPIC -o "$SCRATCH/oldver/fabula-cuda.so" "$SCRATCH/oldver.c" || fail "cc -shared failed"
    FABULA_MODULE_DIR="$SCRATCH/nosym" run_fabula 1 train --steps 1 --run-dir "$SCRATCH/nosymrun" \
        --set run.resume=none --set run.backend=cuda
    grep "error:" "$SCRATCH/out.txt"
    check "module without the table: exit 2 naming it and the symbol (got $RC)" \
        '[ $RC -eq 2 ] && grep -q "module $SCRATCH/nosym/fabula-cuda.so has no fabula_cuda_api" "$SCRATCH/out.txt"'
    FABULA_MODULE_DIR="$SCRATCH/oldver" run_fabula 1 train --steps 1 --run-dir "$SCRATCH/oldverrun" \
        --set run.resume=none --set run.backend=cuda
    grep "error:" "$SCRATCH/out.txt"
    check "module of another table version: exit 2 naming it and both versions (got $RC)" \
        '[ $RC -eq 2 ] && grep -q "module $SCRATCH/oldver/fabula-cuda.so has table version 999, this fabula needs 1" "$SCRATCH/out.txt"'
else
    echo "no cc here: the not-a-fabula-module checks are not run"
fi

# A binary with no modules next to it and no FABULA_MODULE_DIR looks in the
# installed $(pkglibdir) (<libdir>/fabula/): the message names that path, or,
# where an installed copy exists, the modules load and the device is missing.
mkdir -p "$SCRATCH/alone"
cp "$FABULA" "$SCRATCH/alone/fabula"
(cd "$FB_SRCDIR" && timeout 600 $MPIEXEC -n 1 "$SCRATCH/alone/fabula" train --steps 1 --run-dir "$SCRATCH/alonerun" \
    --set run.resume=none --set run.backend=cuda) >"$SCRATCH/out.txt" 2>&1
RC=$?
grep "error:" "$SCRATCH/out.txt"
check "binary alone, backend cuda: exit 2 (got $RC)" '[ $RC -eq 2 ]'
check "... looking in the installed <libdir>/fabula/, not next to the binary" \
    '! grep -q "$SCRATCH/alone/fabula-cuda.so" "$SCRATCH/out.txt" &&
     grep -Eq "cannot load module /[^ ]*/fabula/fabula-cuda.so: |sees no CUDA device" "$SCRATCH/out.txt"'

# "auto" on a node without an NVIDIA driver computes on the CPU and, like
# "cpu", loads no CUDA library, even with the module missing.
if [ $no_gpu -eq 1 ]; then
    (cd "$FB_SRCDIR" && FABULA_MODULE_DIR="$SCRATCH/empty" LD_DEBUG=libs LD_DEBUG_OUTPUT="$LOG-auto" timeout 600 \
        $MPIEXEC -n 1 "$FABULA" train --steps 1 --run-dir "$SCRATCH/auto" --set run.resume=none \
        --set run.backend=auto) >"$SCRATCH/out.txt" 2>&1
    RC=$?
    check "backend auto without a GPU: exit 0 (got $RC)" '[ $RC -eq 0 ]'
    opened=$(cat "$LOG-auto".* 2>/dev/null | sed -n 's/.*calling init: \(.*\)/\1/p' | sort -u)
    check "... and loads no CUDA library" \
        'echo "$opened" | grep -q libmpich && ! echo "$opened" | grep -Eq "$CUDA_LIBS_RE|fabula-(cuda|comm)\.so"'
fi

# --version loads the module to list the devices (or say why there are none).
"$FABULA" --version >"$SCRATCH/version.txt" 2>&1
check "--version exits 0 with a 'backend cuda' line" '[ $? -eq 0 ] && grep -q "backend cuda" "$SCRATCH/version.txt"'
grep "backend cuda" -A1 "$SCRATCH/version.txt"
finish
