#!/usr/bin/env bash
# The one device script: from the repository root on the GPU machine, in one
# call, (a) what the machine is, (b) fabula built out of tree with CUDA (and
# NCCL when found), (p) `fabula plan time`'s step-time prediction against
# measured training steps on one GPU (bench/plan_validate.sh with
# run.backend=cuda on the GPU plan configs; docs/plan.md, "Validation on a
# GPU"), (c) the CUDA tests, (v) `fabula validate --backend cuda` (its
# 16-bit jobs, the GPU's curves kept for its bands), (d) the throughput benchmarks, fabula
# (bench/fabula-model-bench) against PyTorch (bench/torch_model.py: eager,
# compile, and for MoE grouped and grouped-compile), (e) a table with the
# speedups and the goals. Every step has a timeout and a share of one overall
# time budget; a step that fails is reported and the script goes on, so the
# table always comes last. See bench/README.md, "GPU throughput".
#
#   bench/gpu.sh [--dry-run] [--skip-build] [--skip-tests] [--skip-plan] [--models "dense moe"]
#                [--budget SECONDS] [--bundle DIR]
#
# --bundle DIR: no configure or make; (b) and (c) use the programs that
# bench/gpu_bundle.sh built elsewhere, with their libraries (DIR holds
# fabula-gpu-bundle.tar.xz, unpacked into $FABULA_BUILD, or is an unpacked
# bundle). The tests are run directly, not through make.
#
# Environment:
#   OUT                      logs and gpu_table.txt go there (else a fresh /tmp folder)
#   PYTHON                   python with torch (default python3; /usr/bin/python3 in smoke mode)
#   FABULA_BUILD             build directory (default /tmp/fabula-gpu-build;
#                            with --bundle, where it is unpacked: /tmp/fabula-gpu-bundle)
#   FABULA_GPU_BUDGET_S      overall budget in seconds (default 570; the device allows 600 a call)
#   FABULA_GPU_SIZE          model/batch flags replacing the default sizes
#   FABULA_GPU_PLAN_CONFIGS  configs of step (p) (default: bench/configs/plan_gpu_dense.json,
#                            plan_gpu_moe.json and plan_validate.json)
#   FABULA_BENCH_LAUNCH      prefix for fabula-model-bench (e.g. "mpiexec.mpich -n 1")
#   FABULA_GPU_DEBS          folder of .deb files unpacked into / before building
#                            (carried build dependencies; see bench/README.md)
#   FABULA_GPU_SH_CPU_SMOKE=1  no GPU: torch side on the CPU in a tiny configuration,
#                            build and CUDA tests skipped (exercises the table code)
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRY=0 SKIP_BUILD=0 SKIP_TESTS=0 SKIP_PLAN=0 BUNDLE_ARG=""
MODELS="dense moe"
BUDGET=${FABULA_GPU_BUDGET_S:-570}
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --skip-build) SKIP_BUILD=1 ;;
    --skip-tests) SKIP_TESTS=1 ;;
    --skip-plan) SKIP_PLAN=1 ;;
    --models) MODELS=${2:?--models needs a list}; shift ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
    --bundle) BUNDLE_ARG=${2:?--bundle needs a directory}; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

SMOKE=${FABULA_GPU_SH_CPU_SMOKE:-0}
[ "$SMOKE" = 0 ] && SMOKE=""
BUILD=${FABULA_BUILD:-/tmp/fabula-gpu-build}
JOBS=16
RESERVE=25   # seconds kept for the table at the end
if [ -n "$SMOKE" ]; then
  DEVICE=cpu BACKEND=cpu PY=${PYTHON:-/usr/bin/python3}
  SIZE=${FABULA_GPU_SIZE:-"--layers 2 --hidden 64 --heads 4 --kv-heads 2 --vocab 512 --ffn-hidden 128 --experts 8 --topk 2 --expert-hidden 128 --batch 2 --seq 64 --steps 2 --warmup 1"}
else
  DEVICE=cuda BACKEND=cuda PY=${PYTHON:-python3}
  SIZE=${FABULA_GPU_SIZE:-"--layers 12 --hidden 768 --heads 12 --kv-heads 12 --vocab 50304 --ffn-hidden 3072 --experts 8 --topk 2 --expert-hidden 3072 --batch 32 --seq 1024 --steps 20 --warmup 5"}
fi

# --bundle: BUNDLE is the unpacked bundle (unpacked by unpack_bundle), whose
# build/ stands in for the build tree.
BUNDLE="" BUNDLE_TAR=""
if [ -n "$BUNDLE_ARG" ]; then
  d=$(cd "$BUNDLE_ARG" 2>/dev/null && pwd -P) || { echo "gpu.sh: --bundle $BUNDLE_ARG: no such directory" >&2; exit 2; }
  if [ -f "$d/env.sh" ]; then BUNDLE=$d
  elif [ -f "$d/fabula-gpu-bundle.tar.xz" ]; then BUNDLE_TAR=$d/fabula-gpu-bundle.tar.xz BUNDLE=${FABULA_BUILD:-/tmp/fabula-gpu-bundle}
  else echo "gpu.sh: --bundle $BUNDLE_ARG holds neither env.sh nor fabula-gpu-bundle.tar.xz (bench/gpu_bundle.sh makes it)" >&2; exit 2
  fi
  BUILD=$BUNDLE/build
fi
FABULA_BENCH=$BUILD/bench/fabula-model-bench
# The CUDA backend and the device comms are modules (docs/cuda.md,
# "Modules"): a build tree's programs under bench/ and tests/ find them at
# its top through FABULA_MODULE_DIR; a bundle keeps them next to its programs.
if [ -z "$BUNDLE" ]; then FABULA_MODULE_DIR=$BUILD; export FABULA_MODULE_DIR; fi

if [ -n "${OUT:-}" ]; then LOGS=$OUT; [ "$DRY" = 1 ] || mkdir -p "$LOGS"
elif [ "$DRY" = 1 ]; then LOGS="(none: dry run)"
else LOGS=$(mktemp -d /tmp/fabula-gpu.XXXXXX); fi
WORK=$(mktemp -d /tmp/fabula-gpu-work.XXXXXX)
MANIFEST=$WORK/manifest.tsv
: >"$MANIFEST"
ENV_LOG=$LOGS/env.log BUILD_LOG=$LOGS/build.log TEST_LOG=$LOGS/cuda_tests.log
FB_LOG=$LOGS/fabula_bench.log TORCH_LOG=$LOGS/torch_bench.log RESULTS=$LOGS/results.jsonl
PLAN_LOG=$LOGS/plan.log
TABLE=$LOGS/gpu_table.txt
if [ "$DRY" = 0 ]; then
  for f in "$ENV_LOG" "$BUILD_LOG" "$TEST_LOG" "$FB_LOG" "$TORCH_LOG" "$RESULTS" "$PLAN_LOG"; do : >"$f"; done
fi
export PYTHONUNBUFFERED=1

say() { printf '%s\n' "$*"; }
quote() { printf '%q ' "$@"; }

# Seconds a step may take: its own limit, cut to what the budget has left.
step_limit() {
  local want=$1 left=$((BUDGET - SECONDS - RESERVE))
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}

# record KIND MODEL IMPL RC FILE NOTE -> one manifest row for the table.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6:-}" >>"$MANIFEST"; }

# run_step NAME WANT LOG CMD...: CMD under timeout, output appended to LOG.
# Returns CMD's status, 125 when the budget is spent, 0 in a dry run.
run_step() {
  local name=$1 want=$2 log=$3; shift 3
  local t rc start=$SECONDS
  t=$(step_limit "$want")
  if [ "$DRY" = 1 ]; then say "[dry-run] ($name, timeout ${want}s) $(quote "$@")"; return 0; fi
  if [ "$t" -lt 10 ]; then say "== $name: SKIPPED, time budget spent" | tee -a "$log"; return 125; fi
  say "== $name (timeout ${t}s, at ${SECONDS}s)" | tee -a "$log"
  say "\$ ${SHOWCMD:-$(quote "$@")}" >>"$log"
  timeout -k 10 "$t" "$@" >>"$log" 2>&1
  rc=$?
  say "== $name: rc=$rc after $((SECONDS - start))s" | tee -a "$log"
  return $rc
}

# ---------------------------------------------------------------- (a) machine
have() { command -v "$1" >/dev/null 2>&1; }

find_nvcc() {
  if have nvcc; then command -v nvcc; elif [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda/bin/nvcc; fi
}

# NCCL for --with-nccl: the CUDA toolkit's, the system's, or the one inside
# the nvidia-nccl pip wheel (PyTorch's), which has no libnccl.so link for -lnccl:
# a folder of links in include/ and lib64/ makes it look like an install.
NCCL_DIR=""
find_nccl() {
  local d inc lib
  for d in /usr/local/cuda /usr; do
    if [ -f "$d/include/nccl.h" ]; then NCCL_DIR=$d; return 0; fi
  done
  d=$("$PY" -c 'import nvidia, sys; sys.stdout.write(list(nvidia.__path__)[0])' 2>/dev/null) || return 1
  inc=$(find "$d" -name nccl.h -print -quit 2>/dev/null)
  lib=$(find "$d" -name 'libnccl.so*' -print -quit 2>/dev/null)
  [ -n "$inc" ] && [ -n "$lib" ] || return 1
  NCCL_DIR=$BUILD.nccl   # kept: the build's rpath points into it
  if [ "$DRY" = 0 ]; then
    mkdir -p "$NCCL_DIR/lib64"
    ln -sfn "$(dirname "$inc")" "$NCCL_DIR/include"
    ln -sf "$lib" "$NCCL_DIR/lib64/libnccl.so"
    ln -sf "$lib" "$NCCL_DIR/lib64/libnccl.so.2"
  fi
  return 0
}

# What configure will need, each found or missing, so a failed configure
# has a plain explanation next to it. Sets MISSING.
MISSING=""
BUILT=skipped   # yes, no (failed), skipped (smoke or --skip-build: an earlier build may be there)
preflight() {
  local x hdf cflags conf
  if [ -n "$BUNDLE" ]; then bundle_preflight; return; fi
  miss() { MISSING="$MISSING $1"; say "  missing  $1${2:+ ($2)}"; }
  ok() { say "  found    $1: $2"; }
  x=$(find_nvcc); if [ -n "$x" ]; then ok nvcc "$x"; else miss nvcc "CUDA toolkit"; fi
  x=""; for c in mpicc.mpich mpicc; do have $c && { x=$(command -v $c); break; }; done
  if [ -n "$x" ]; then ok "MPI C compiler" "$x"; else miss "MPI" "mpicc.mpich/mpicc: apt mpich libmpich-dev"; fi
  x=""; for c in mpiexec.mpich mpiexec mpirun; do have $c && { x=$(command -v $c); break; }; done
  if [ -n "$x" ]; then ok "MPI launcher" "$x"; else miss "mpiexec" "apt mpich"; fi
  if have pkg-config; then
    ok pkg-config "$(command -v pkg-config)"
    hdf=""
    for m in hdf5-mpich hdf5-openmpi hdf5; do pkg-config --exists $m 2>/dev/null && { hdf=$m; break; }; done
    if [ -n "$hdf" ]; then
      cflags=$(pkg-config --cflags-only-I $hdf 2>/dev/null)
      conf=""
      for dir in ${cflags//-I/} /usr/include/hdf5/mpich /usr/include; do
        [ -f "$dir/H5pubconf.h" ] && { conf=$dir/H5pubconf.h; break; }
      done
      if [ -n "$conf" ] && grep -q 'define H5_HAVE_PARALLEL 1' "$conf"; then ok "parallel HDF5" "$hdf ($conf)"
      else miss "parallel HDF5" "$hdf found but not built with MPI: apt libhdf5-mpich-dev"; fi
    else miss "parallel HDF5" "apt libhdf5-mpich-dev"; fi
    if pkg-config --exists 'jansson >= 2.10' 2>/dev/null; then ok jansson "$(pkg-config --modversion jansson)"; else miss jansson "apt libjansson-dev"; fi
    if pkg-config --exists 'libpcre2-8 >= 10.34' 2>/dev/null; then ok PCRE2 "$(pkg-config --modversion libpcre2-8)"; else miss PCRE2 "apt libpcre2-dev"; fi
    if pkg-config --exists openblas 2>/dev/null; then ok CBLAS "openblas $(pkg-config --modversion openblas)"
    elif pkg-config --exists cblas 2>/dev/null; then ok CBLAS "cblas"
    else miss CBLAS "apt libopenblas-dev"; fi
  else
    miss pkg-config "apt pkg-config; HDF5, jansson, PCRE2 and OpenBLAS are found through it"
  fi
  if printf 'int main(void){return 0;}\n' | ${CC:-cc} -fopenmp -x c - -o "$WORK/omp-test" >/dev/null 2>&1; then ok OpenMP "${CC:-cc} -fopenmp"
  else miss OpenMP "C compiler with -fopenmp"; fi
  if find_nccl; then ok NCCL "$NCCL_DIR"; else say "  absent   NCCL (optional): building without --with-nccl"; fi
  if [ -f "$ROOT/configure" ]; then ok configure "$ROOT/configure"
  elif have autoreconf; then ok "configure" "absent, autoreconf will make it"
  else miss configure "git-ignored, so not in the copied tree: run ./bootstrap before the call and carry configure Makefile.in build_config.h.in aclocal.m4 build-aux m4"; fi
}

step_env() {
  say "== (a) machine"
  if [ "$DRY" = 1 ]; then
    say "[dry-run] nvidia-smi -L; nvidia-smi --query-gpu=...; nvcc --version; $PY -c 'import torch ...'"
    preflight
    return 0
  fi
  {
    date -u
    uname -a
    say "cores: $(nproc)"
    if have nvidia-smi; then
      timeout 20 nvidia-smi -L
      timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    else say "nvidia-smi: not found"; fi
    x=$(find_nvcc); if [ -n "$x" ]; then timeout 20 "$x" --version; else say "nvcc: not found"; fi
    timeout 60 "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available(), "_grouped_mm", hasattr(torch, "_grouped_mm"))' 2>&1
    say "build dependencies:"
    preflight
  } 2>&1 | tee "$ENV_LOG"
  # preflight ran in a pipeline subshell: set MISSING/NCCL_DIR here too.
  MISSING="" NCCL_DIR=""
  preflight >/dev/null 2>&1
  record step "-" env 0 "" ""
}

# ---------------------------------------------------------------- (b) build
# configure, Makefile.in, aclocal.m4 are git-ignored: a copied tree has them
# only if carried. Regenerate them where autotools exist and they are missing
# or miss a Makemodule.am that Makefile.am includes; otherwise give them
# mtimes in dependency order, so make does not try to rerun automake.
prepare_autotools() {
  local stale="" inc
  if [ -f "$ROOT/Makefile.in" ]; then
    for inc in $(sed -n 's|^include \$(srcdir)/||p' "$ROOT/Makefile.am"); do
      grep -qF "\$(srcdir)/$inc" "$ROOT/Makefile.in" || stale="$stale $inc"
    done
  fi
  if [ ! -f "$ROOT/configure" ] || [ ! -f "$ROOT/Makefile.in" ] || [ -n "$stale" ]; then
    [ -n "$stale" ] && say "Makefile.in is stale: it lacks$stale" | tee -a "$BUILD_LOG"
    if have autoreconf && have automake; then
      run_step bootstrap 120 "$BUILD_LOG" env -C "$ROOT" ./bootstrap || return 1
      return 0
    fi
    say "no autotools here: run ./bootstrap before the call and carry configure Makefile.in build_config.h.in aclocal.m4 build-aux m4" | tee -a "$BUILD_LOG"
    [ -f "$ROOT/configure" ] || return 1
  fi
  if ! autotools_order_ok; then
    if [ "$DRY" = 1 ]; then say "[dry-run] touch aclocal.m4 configure build_config.h.in Makefile.in (in that order)"; return 0; fi
    say "generated autotools files older than their sources (a copied tree): touching them in order" | tee -a "$BUILD_LOG"
    touch -c "$ROOT/aclocal.m4"; touch -c "$ROOT/configure"; touch -c "$ROOT/build_config.h.in" "$ROOT/Makefile.in"
  fi
}

# True when no generated file is older than what make would regenerate it from.
autotools_order_ok() {
  local src
  for src in "$ROOT/configure.ac" "$ROOT"/m4/*.m4; do
    [ "$src" -nt "$ROOT/aclocal.m4" ] && return 1
  done
  [ "$ROOT/aclocal.m4" -nt "$ROOT/configure" ] && return 1
  [ "$ROOT/configure.ac" -nt "$ROOT/configure" ] && return 1
  [ "$ROOT/aclocal.m4" -nt "$ROOT/build_config.h.in" ] && return 1
  [ -n "$(find "$ROOT" -name 'Makefile.am' -newer "$ROOT/Makefile.in" -print -quit)$(find "$ROOT" -name 'Makemodule*.am' -newer "$ROOT/Makefile.in" -print -quit)" ] && return 1
  [ "$ROOT/aclocal.m4" -nt "$ROOT/Makefile.in" ] && return 1
  return 0
}

build_reason() {
  local r
  r=$(grep -E 'configure: error|error:|\*\*\* ' "$BUILD_LOG" 2>/dev/null | tail -1 | cut -c1-160)
  echo "${r:-see build.log}"
}

step_build() {
  local cfg nvcc rc why
  if [ -n "$BUNDLE" ]; then step_bundle; return; fi
  BUILT=no
  say "== (b) build in $BUILD"
  if [ -n "$SMOKE" ] || [ "$SKIP_BUILD" = 1 ]; then
    why="--skip-build"; [ -n "$SMOKE" ] && why="cpu smoke"
    say "   skipped ($why); fabula-model-bench: $([ -x "$FABULA_BENCH" ] && echo "$FABULA_BENCH" || echo "not built")"
    record step "-" build SKIP "" "$why"
    return 0
  fi
  if [ -n "${FABULA_GPU_DEBS:-}" ]; then
    if [ "$DRY" = 1 ]; then say "[dry-run] dpkg -x each of $FABULA_GPU_DEBS/*.deb into /; ldconfig"
    else
      for f in "$FABULA_GPU_DEBS"/*.deb; do [ -f "$f" ] && dpkg -x "$f" / >>"$BUILD_LOG" 2>&1; done
      ldconfig >>"$BUILD_LOG" 2>&1
      MISSING="" NCCL_DIR=""
      say "after unpacking $FABULA_GPU_DEBS:" | tee -a "$BUILD_LOG"
      preflight | tee -a "$BUILD_LOG"
    fi
  fi
  if ! prepare_autotools; then record step "-" build FAIL "" "no configure script (see build.log)"; return 1; fi
  [ -n "$MISSING" ] && say "   configure is expected to fail, missing:$MISSING" | tee -a "$BUILD_LOG"
  nvcc=$(find_nvcc)
  cfg=("$ROOT/configure" --with-cuda="${nvcc:+$(dirname "$(dirname "$nvcc")")}")
  [ -z "$nvcc" ] && cfg=("$ROOT/configure" --with-cuda)
  [ -n "$NCCL_DIR" ] && cfg+=(--with-nccl="$NCCL_DIR")
  [ "$DRY" = 0 ] && mkdir -p "$BUILD"
  run_step configure 120 "$BUILD_LOG" env -C "$BUILD" "${cfg[@]}"
  rc=$?
  if [ $rc != 0 ]; then record step "-" build "$rc" "" "configure: $(build_reason)"; return 1; fi
  run_step make 300 "$BUILD_LOG" make -C "$BUILD" -j$JOBS
  rc=$?
  if [ $rc != 0 ]; then record step "-" build "$rc" "" "make: $(build_reason)"; return 1; fi
  BUILT=yes
  if [ "$DRY" = 1 ] || [ ! -x "$FABULA_BENCH" ]; then
    # In case the program is not part of `all` (noinst/check/EXTRA programs).
    run_step make-bench 120 "$BUILD_LOG" make -C "$BUILD" -j$JOBS bench/fabula-model-bench
    rc=$?
    if [ $rc != 0 ]; then record step "-" build "$rc" "" "make bench/fabula-model-bench: $(build_reason)"; return 1; fi
  fi
  if [ "$DRY" = 1 ]; then record step "-" build DRY "" ""; return 0; fi
  record step "-" build 0 "" "$(grep -E '^ +(CUDA|NCCL) +:' "$BUILD_LOG" | tr -s ' ' | tr '\n' ';')"
}

# ---------------------------------------------------------------- (b') prebuilt bundle
# Unpacks the bundle (when given as the tar file) and sources its env.sh,
# which finds this machine's CUDA and NCCL libraries once for every wrapper.
unpack_bundle() {
  local t0=$SECONDS
  if [ -n "$BUNDLE_TAR" ]; then
    if [ -e "$BUNDLE" ] && [ ! -f "$BUNDLE/BUNDLE_INFO" ]; then
      say "gpu.sh: $BUNDLE exists and is no bundle: not replacing it (set FABULA_BUILD)" | tee -a "$BUILD_LOG"; return 1
    fi
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE" || return 1
    # Python's tarfile where tar has no xz.
    if ! tar -xJf "$BUNDLE_TAR" -C "$BUNDLE" --no-same-owner >>"$BUILD_LOG" 2>&1; then
      "$PY" -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
try: t.extractall(sys.argv[2], filter="tar")
except TypeError: t.extractall(sys.argv[2])' "$BUNDLE_TAR" "$BUNDLE" >>"$BUILD_LOG" 2>&1 || return 1
    fi
    say "unpacked $BUNDLE_TAR into $BUNDLE in $((SECONDS - t0))s" | tee -a "$BUILD_LOG"
  fi
  [ -f "$BUNDLE/env.sh" ] || { say "gpu.sh: no env.sh in $BUNDLE" | tee -a "$BUILD_LOG"; return 1; }
  # The path the wrappers compute for themselves (pwd -P), so that they reuse
  # the library search done here.
  BUNDLE=$(cd "$BUNDLE" && pwd -P) BUILD=$BUNDLE/build FABULA_BENCH=$BUNDLE/build/bench/fabula-model-bench
  # shellcheck disable=SC2034  # both read by env.sh
  FB_BUNDLE=$BUNDLE FB_BUNDLE_PYTHON=$PY
  # shellcheck disable=SC1091  # written by bench/gpu_bundle.sh
  . "$BUNDLE/env.sh" || return 1
  PATH=$BUNDLE/bin:$PATH
}

BUNDLE_OK=0 BUNDLE_NOTE=""
bundle_preflight() {
  local out rc changed
  if [ "$DRY" = 1 ]; then
    say "[dry-run] ${BUNDLE_TAR:+unpack $BUNDLE_TAR into $BUNDLE; }$BUNDLE/check.sh; sha256sum -c $BUNDLE/SOURCES.sha256"
    return 0
  fi
  if [ ! -f "$BUNDLE/check.sh" ]; then
    say "  missing  the bundle (not unpacked, see build.log)"; MISSING="$MISSING bundle"; return 0
  fi
  sed 's/^/  /' "$BUNDLE/BUNDLE_INFO"
  out=$(sh "$BUNDLE/check.sh" 2>&1); rc=$?
  printf '%s\n' "$out" | sed 's/^/  /'
  if [ $rc = 0 ]; then BUNDLE_OK=1; else MISSING="$MISSING bundle-libraries"; fi
  # Test scripts and inputs come from the bundle; bench/torch_model.py from this tree.
  changed=$(cd "$ROOT" && sha256sum -c --quiet "$BUNDLE/SOURCES.sha256" 2>/dev/null | sed 's/:.*//' | tr '\n' ' ')
  if [ -n "$changed" ]; then
    say "  WARNING: the tree differs from the sources the bundle was built from: $changed"
    BUNDLE_NOTE="; sources changed since: $(printf '%s\n' $changed | wc -l) files (env.log)"
  else
    say "  the tree matches the sources the bundle was built from"
  fi
}

step_bundle() {
  local info
  BUILT=no
  say "== (b) prebuilt bundle in $BUNDLE (no build)"
  if [ "$DRY" = 1 ]; then record step "-" build DRY "" "bundle"; return 0; fi
  info=$(sed -n '1s/^fabula GPU bundle, //p' "$BUNDLE/BUNDLE_INFO" 2>/dev/null)
  if [ ! -f "$BUNDLE/env.sh" ]; then
    record step "-" build 1 "" "bundle: not unpacked (see build.log)"; return 1
  fi
  if [ "$BUNDLE_OK" != 1 ]; then
    record step "-" build 1 "" "bundle: libraries missing here${FB_BUNDLE_MISSING:+:$FB_BUNDLE_MISSING} (see env.log)"
    return 1
  fi
  BUILT=yes
  record step "-" build 0 "" "bundle ${info:-?}$BUNDLE_NOTE"
}

# The bundle's tests (its TESTS file), each run directly with the environment
# make check would give it (Makefile.am's AM_TESTS_ENVIRONMENT), under one
# time limit for them all; exit 77 is a skip, 99 an error.
TEST_BUDGET=180
bundle_tests() {
  local list t rc res want deadline dir n=0 pass=0 skip=0 fail=0 err=0 notrun=0
  local -a cmd
  list=$(cat "$BUNDLE/TESTS" 2>/dev/null || { [ -n "$BUNDLE_TAR" ] && tar -xJOf "$BUNDLE_TAR" ./TESTS 2>/dev/null; })
  say "   tests (prebuilt): $(echo $list)"
  dir=$WORK/tests
  [ "$DRY" = 1 ] || mkdir -p "$dir"
  deadline=$((SECONDS + TEST_BUDGET))
  for t in $list; do
    case $t in
      *.sh) cmd=(sh "$BUNDLE/src/$t") ;;
      *.py) cmd=("$PY" "$BUNDLE/src/$t") ;;
      *) cmd=("$BUILD/$t") ;;
    esac
    want=$((deadline - SECONDS)); [ $want -gt 120 ] && want=120
    n=$((n + 1))
    run_step "test $t" "$want" "$TEST_LOG" env -C "$dir" FABULA="$BUILD/fabula" FB_SRCDIR="$BUNDLE/src" \
      FB_BUILDDIR="$BUILD" MPIEXEC="$BUNDLE/bin/mpiexec" PYTHON="$PY" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "${cmd[@]}"
    rc=$?
    [ "$DRY" = 1 ] && continue
    case $rc in
      0) res=PASS; pass=$((pass + 1)) ;;
      77) res=SKIP; skip=$((skip + 1)) ;;
      99) res=ERROR; err=$((err + 1)) ;;
      125) res="NOT RUN (time budget)"; notrun=$((notrun + 1)) ;;
      124|137) res="FAIL (timeout)"; fail=$((fail + 1)) ;;
      *) res="FAIL (exit $rc)"; fail=$((fail + 1)) ;;
    esac
    say "   $res: $t" | tee -a "$TEST_LOG"
  done
  [ "$DRY" = 1 ] && { record step "-" tests DRY "" "$(echo $list)"; return 0; }
  rc=0; [ $((fail + err + notrun)) -gt 0 ] && rc=1
  say "# TOTAL: $n PASS: $pass SKIP: $skip FAIL: $fail ERROR: $err NOT RUN: $notrun" | tee -a "$TEST_LOG"
  record step "-" tests "$rc" "" "TOTAL: $n PASS: $pass SKIP: $skip FAIL: $fail ERROR: $err NOT RUN: $notrun"
}

# ---------------------------------------------------------------- (c) CUDA tests
# The tests registered under tests/cuda: TESTS entries naming tests/cuda/ in
# any Makemodule*.am, else the two known ones.
cuda_tests() {
  local list
  list=$(grep -rl --include='Makemodule*.am' 'tests/cuda/' "$ROOT/tests" "$ROOT/kernels" 2>/dev/null |
    xargs -r sed -n '/^[[:space:]]*TESTS[[:space:]]*+\{0,1\}=/,/[^\\]$/p' |
    grep -o 'tests/cuda/[A-Za-z0-9_./-]*' | sort -u | tr '\n' ' ' | sed 's/ $//')
  echo "${list:-tests/cuda/test_cuda_ops tests/cuda/test_cuda_ops_generic.sh}"
}

step_tests() {
  local list rc summary why base
  say "== (c) CUDA tests"
  if [ -n "$SMOKE" ] || [ "$SKIP_TESTS" = 1 ]; then
    why="--skip-tests"; [ -n "$SMOKE" ] && why="cpu smoke"
    say "   skipped ($why)"; record step "-" tests SKIP "" "$why"; return 0
  fi
  if [ -n "$BUNDLE" ]; then
    if [ "$DRY" = 0 ] && [ "$BUILT" != yes ]; then
      say "   not run: the bundle is not usable here"; record step "-" tests SKIP "" "bundle not usable"; return 1
    fi
    bundle_tests; return
  fi
  if [ "$DRY" = 0 ] && { [ "$BUILT" = no ] || [ ! -f "$BUILD/Makefile" ]; }; then
    say "   not run: no build"; record step "-" tests SKIP "" "no build"; return 1
  fi
  list=$(cuda_tests)
  say "   tests: $list"
  run_step cuda-tests 150 "$TEST_LOG" make -C "$BUILD" -j$JOBS check TESTS="$list"
  rc=$?
  [ "$DRY" = 1 ] && { record step "-" tests DRY "" "$list"; return 0; }
  for f in $list; do
    base=${f%.sh}; base=${base%.py}
    [ -f "$BUILD/$base.log" ] && { say "---- $base.log"; cat "$BUILD/$base.log"; } >>"$TEST_LOG"
  done
  [ -f "$BUILD/test-suite.log" ] && { say "---- test-suite.log"; cat "$BUILD/test-suite.log"; } >>"$TEST_LOG"
  summary=$(grep -m 7 -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$TEST_LOG" | tr -s ' ' | sed 's/^# //' | tr '\n' ' ')
  record step "-" tests "$rc" "" "${summary:-no summary (see cuda_tests.log)}"
}

# ---------------------------------------------------------------- (p) plan validation
# For each config: a pilot, then two rounds of calibrate (on the GPU) and 10
# training steps, each against `fabula plan time` on the calibrated machine
# file; one table row per config. The runs' files stay in LOGS/plan-NAME.
PLAN_CONFIGS=${FABULA_GPU_PLAN_CONFIGS:-"bench/configs/plan_gpu_dense.json bench/configs/plan_gpu_moe.json bench/configs/plan_validate.json"}
step_plan() {
  local cfg name rc row launcher before
  say "== (p) plan validation on one GPU: $PLAN_CONFIGS"
  if [ -n "$SMOKE" ] || [ "$SKIP_PLAN" = 1 ]; then
    say "   skipped"; record step "-" plan SKIP "" "$([ -n "$SMOKE" ] && echo "cpu smoke" || echo --skip-plan)"; return 0
  fi
  if [ "$DRY" = 0 ] && [ "$BUILT" != yes ] && [ ! -x "$BUILD/fabula" ]; then
    say "   not run: no build"; record step "-" plan SKIP "" "no build"; return 1
  fi
  launcher=$BUILD/../bin/mpiexec
  [ -n "$BUNDLE" ] || launcher=$(command -v mpiexec.mpich || command -v mpiexec || echo mpiexec)
  for cfg in $PLAN_CONFIGS; do
    name=$(basename "$cfg" .json)
    before=$(wc -l <"$PLAN_LOG" 2>/dev/null || echo 0)
    run_step "plan $name" 110 "$PLAN_LOG" env -C "$ROOT" FABULA="$BUILD/fabula" MPIEXEC="$launcher" PYTHON="$PY" \
      sh bench/plan_validate.sh --ranks 1 --rounds 2 --steps 10 --cal-repeats 5 --calibrate-once --config "$cfg" \
      --set run.backend=cuda --set checkpoint.save_interval=-1 --keep "$LOGS/plan-$name"
    rc=$?
    [ "$DRY" = 1 ] && { record step "-" "plan $name" DRY "" ""; continue; }
    # this run's row of the measured/predicted table
    row=$(tail -n +"$((before + 1))" "$PLAN_LOG" | grep -E '^\| 1 \| 0 \| 1 \| 1 \| 1 \| [0-9.]+ \(' | tail -n 1 |
      awk -F'|' '{printf "measured %s s/step, predicted %s, error %s", $7, $8, $9}' | tr -s ' ')
    record step "-" "plan $name" "$rc" "" "${row:-no table (see plan.log)}"
  done
  # where a launch-bound model's training step goes beyond calibrate's
  # passes (docs/plan.md, "Validation on a GPU"): its table is in plan.log
  run_step "plan small-model split" 90 "$PLAN_LOG" env -C "$ROOT" FABULA="$BUILD/fabula" MPIEXEC="$launcher" \
    FABULA_MODEL_BENCH="$FABULA_BENCH" "$PY" bench/plan_gpu_small.py --steps 12 --out "$LOGS/plan-small"
  rc=$?
  [ "$DRY" = 1 ] || record step "-" "plan small-model split" "$rc" "" "table in plan.log"
}

# ---------------------------------------------------------------- (v) validate on the GPU
# `fabula validate --backend cuda` (its bf16 and fp16 jobs on the device,
# against the cpu16 curves with the unmeasured 0.1 rule): the verdict, the
# report and the GPU's own curves (--write-curves) land in LOGS/validate,
# from which the GPU bands are derived (docs/validation-format.md "The rule").
step_validate() {
  local rc launcher verdict
  say "== (v) fabula validate --backend cuda"
  if [ -n "$SMOKE" ] || [ "$SKIP_TESTS" = 1 ]; then
    say "   skipped"; record step "-" validate SKIP "" "$([ -n "$SMOKE" ] && echo "cpu smoke" || echo --skip-tests)"; return 0
  fi
  if [ "$DRY" = 0 ] && [ "$BUILT" != yes ] && [ ! -x "$BUILD/fabula" ]; then
    say "   not run: no build"; record step "-" validate SKIP "" "no build"; return 1
  fi
  launcher=$BUILD/../bin/mpiexec
  [ -n "$BUNDLE" ] || launcher=$(command -v mpiexec.mpich || command -v mpiexec || echo mpiexec)
  run_step "validate cuda" 60 "$LOGS/validate.log" env -C "$ROOT" "$launcher" -n 1 "$BUILD/fabula" validate \
    --backend cuda --run-dir "$LOGS/validate/run" --report "$LOGS/validate" --write-curves "$LOGS/validate/curves"
  rc=$?
  [ "$DRY" = 1 ] && { record step "-" validate DRY "" ""; return 0; }
  verdict=$(grep -E '^(bf16|fp16) ' "$LOGS/validate.log" 2>/dev/null | tr -s ' ' | tr '\n' ';')
  record step "-" validate "$rc" "" "${verdict:-no table (see validate.log)}"
}

# ---------------------------------------------------------------- (d) benchmarks
# bench MODEL IMPL WANT LOG CMD...: stdout's last JSON line is the result.
bench() {
  local model=$1 impl=$2 want=$3 log=$4; shift 4
  local out=$WORK/$model-${impl// /-}.out rc
  if [ "$DRY" = 1 ]; then
    say "[dry-run] ($model $impl, timeout ${want}s) $(quote "$@")"
    record bench "$model" "$impl" DRY "" ""
    return 0
  fi
  # stdout to OUT.out, stderr to OUT.err and then the log (its last line
  # explains a failure that printed no JSON).
  SHOWCMD="$(quote "$@")> $out" run_step "$model $impl" "$want" "$log" \
    bash -c '"$@" >"$0" 2>"$0.err"; rc=$?; cat "$0.err" >&2; exit $rc' "$out" "$@"
  rc=$?
  if [ -f "$out" ]; then
    cat "$out" >>"$log"
    grep '^{' "$out" | tail -1 >>"$RESULTS"
  fi
  record bench "$model" "$impl" "$rc" "$out" ""
}

step_bench() {
  local model impl want
  say "== (d) benchmarks: $SIZE"
  # fabula's runs first: they take seconds, PyTorch's compiles minutes
  for model in $MODELS; do
    if [ "$DRY" = 1 ] || [ -x "$FABULA_BENCH" ]; then
      # shellcheck disable=SC2086  # SIZE and the launcher are word lists
      bench "$model" fabula 120 "$FB_LOG" ${FABULA_BENCH_LAUNCH:-} "$FABULA_BENCH" --backend "$BACKEND" --model "$model" $SIZE
    else
      record bench "$model" fabula SKIP "" "bench/fabula-model-bench not built"
    fi
  done
  for model in $MODELS; do
    # The impl the goal is measured against first, in case the budget runs out.
    if [ "$model" = moe ]; then set -- grouped-compile grouped eager compile; else set -- compile eager; fi
    for impl in "$@"; do
      case $impl in *compile) want=210 ;; *) want=100 ;; esac
      # shellcheck disable=SC2086
      bench "$model" "torch $impl" "$want" "$TORCH_LOG" "$PY" "$ROOT/bench/torch_model.py" --device "$DEVICE" --impl "$impl" --model "$model" $SIZE
    done
  done
}

# ---------------------------------------------------------------- (e) table
step_table() {
  local dest=$TABLE
  [ "$DRY" = 1 ] && dest=/dev/null
  "$PY" - "$MANIFEST" "$SIZE" "$BUDGET" "$SECONDS" <<'EOF' | tee "$dest"
import json, math, sys

manifest, size, budget, elapsed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
GOALS = {"dense": ("torch compile", 1.15), "moe": (None, 1.5)}   # None: best torch
ORDER = ["fabula", "torch eager", "torch compile", "torch grouped", "torch grouped-compile"]

steps, runs = [], {}
for line in open(manifest):
    kind, model, impl, rc, path, note = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
    if kind == "step":
        steps.append((impl, rc, note))
        continue
    rec, status = None, None
    if rc == "DRY":
        status = "not run (dry-run)"
    elif rc == "SKIP":
        status = "SKIPPED: " + note
    else:
        try:
            lines = [l for l in open(path) if l.startswith("{")] if path else []
            rec = json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            rec = None
        if rc in ("124", "137"):
            status = "FAILED: timeout"
        elif rc == "125":
            status = "SKIPPED: time budget"
        elif rec is None:
            try:
                err = [l.strip() for l in open(path + ".err") if l.strip()]
            except OSError:
                err = []
            status = "FAILED: rc=%s, no JSON line%s" % (rc, (": " + err[-1][:200]) if err else "")
        elif "error" in rec:
            status = "FAILED: " + str(rec["error"])
        elif rc != "0":
            status = "FAILED: rc=%s" % rc
        elif not all(isinstance(rec.get(k), (int, float)) and math.isfinite(rec[k]) and rec[k] > 0
                     for k in ("tokens_per_s", "step_ms")):
            status = "FAILED: bad numbers in JSON"
        else:
            status = "ok"
    runs[(model, impl)] = (status, rec if status == "ok" else None)

out = []
dev = next((r["device"] for s, r in runs.values() if r and r.get("device")), "?")
tv = next((r["torch"] for s, r in runs.values() if r and r.get("torch")), "?")
out.append("fabula vs PyTorch training throughput | device %s | torch %s" % (dev, tv))
out.append("config: %s" % size)
out.append("script time: %ss of a %ss budget" % (elapsed, budget))
for name, rc, note in steps:
    st = {"0": "ok", "SKIP": "skipped", "DRY": "not run (dry-run)"}.get(rc, "FAILED rc=%s" % rc)
    out.append("step %-6s %s%s" % (name, st, (": " + note) if note else ""))
out.append("")
hdr = "%-6s %-22s %12s %10s %7s %9s %8s %8s  %s" % ("model", "impl", "tokens/s", "step ms", "MFU", "ceil TF/s", "loss", "vs best", "status")
out.append(hdr)
out.append("-" * len(hdr))
goals = []
models = []
for m, _ in runs:
    if m not in models:
        models.append(m)
for model in models:
    impls = sorted((i for m, i in runs if m == model), key=lambda i: ORDER.index(i) if i in ORDER else 99)
    torch_ok = {i: r for i in impls for s, r in [runs[(model, i)]] if r and i.startswith("torch")}
    best = max(torch_ok, key=lambda i: torch_ok[i]["tokens_per_s"]) if torch_ok else None
    best_tps = torch_ok[best]["tokens_per_s"] if best else None
    for impl in impls:
        status, r = runs[(model, impl)]
        if r:
            vs = "%.2fx" % (r["tokens_per_s"] / best_tps) if best_tps else "-"
            mfu = "%.1f%%" % (100 * r["mfu"]) if isinstance(r.get("mfu"), (int, float)) else "-"
            ceil = "%.4g" % r["ceiling_tflops"] if isinstance(r.get("ceiling_tflops"), (int, float)) else "-"
            lv = r.get("loss", r.get("final_loss"))
            loss = "%.4f" % lv if isinstance(lv, (int, float)) else "-"
            out.append("%-6s %-22s %12.0f %10.2f %7s %9s %8s %8s  %s" % (model, impl, r["tokens_per_s"], r["step_ms"], mfu, ceil, loss, vs, status))
        else:
            out.append("%-6s %-22s %12s %10s %7s %9s %8s %8s  %s" % (model, impl, "-", "-", "-", "-", "-", "-", status))
    fab = runs.get((model, "fabula"), (None, None))[1]
    both = list(torch_ok.items()) + ([("fabula", fab)] if fab else [])
    fpt = {i: (r.get("flops_per_token"), r.get("params_active")) for i, r in both}
    if len(set(fpt.values())) > 1:
        goals.append("  %s: (flops_per_token, params_active) differ between implementations: %s" % (model, fpt))
    against, factor = GOALS.get(model, (None, None))
    if factor is None:
        continue
    ref = against or best
    label = ref or "best torch"
    if not against and best:
        label = "best torch (%s)" % best
    if fab and ref and ref in torch_ok:
        ratio = fab["tokens_per_s"] / torch_ok[ref]["tokens_per_s"]
        goals.append("  %-5s fabula / %s = %.2fx (goal >= %.2fx): %s" % (model + ":", label, ratio, factor,
                     "MET" if ratio >= factor else "NOT MET"))
    else:
        why = "fabula has no result" if not fab else "%s has no result" % label
        goals.append("  %-5s fabula / %s: not measured, %s (goal >= %.2fx)" % (model + ":", label, why, factor))
out.append("")
out.append("vs best: tokens/s over the fastest PyTorch variant's; MFU against each run's own measured")
out.append("matmul ceiling; loss: after the last step (PyTorch variants start from the same weights)")
out.append("goals:")
out.extend(goals)
print("\n".join(out))
EOF
}

# ---------------------------------------------------------------- main
[ -n "$SMOKE" ] && say "gpu.sh: CPU smoke mode (FABULA_GPU_SH_CPU_SMOKE): torch on the CPU, tiny configuration"
if [ -n "$BUNDLE" ]; then
  say "gpu.sh: repo $ROOT, prebuilt bundle $BUNDLE${BUNDLE_TAR:+ (from $BUNDLE_TAR)}, logs $LOGS, budget ${BUDGET}s"
  [ "$DRY" = 1 ] || unpack_bundle || say "gpu.sh: the bundle could not be unpacked (see $BUILD_LOG)"
else
  say "gpu.sh: repo $ROOT, build $BUILD, logs $LOGS, budget ${BUDGET}s"
fi
step_env
step_build
step_plan
step_tests
step_validate
step_bench
if [ "$DRY" = 0 ]; then say "== (e) table (also in $TABLE; logs in $LOGS)"; else say "== (e) table"; fi
step_table
rm -rf "$WORK"
exit 0
