#!/usr/bin/env bash
# Builds fabula with CUDA and NCCL here and packs what the GPU machine needs
# to run the CUDA tests and the benchmarks into one compressed file, so that
# `bench/gpu.sh --bundle DIR` there needs nothing from that machine's image
# but glibc, libstdc++, the CUDA libraries (cudart, cuBLAS, NCCL) and the
# driver. The device image has no MPICH, parallel HDF5, jansson, PCRE2 or
# OpenBLAS, and nothing can be installed there. See bench/README.md,
# "Running a prebuilt bundle".
#
#   bench/gpu_bundle.sh [--out DIR] [--build DIR] [--jobs N] [--no-strip] [--bootstrap]
#
#   --out DIR     where the bundle goes (default: .gpubundle in the repository,
#                 git-ignored through .git/info/exclude)
#   --build DIR   build directory (default /tmp/fabula-bundle-build); the
#                 unpacked bundle is left in DIR.stage for trying it here
#   --no-strip    keep the symbols of fabula's own programs
#   --bootstrap   regenerate configure in a copy of the tree even if the
#                 generated files look current
# Environment: CUDA_HOME (default /usr/local/cuda), FABULA_BUNDLE_NCCL (NCCL
# prefix, default CUDA_HOME), FABULA_BUNDLE_CONFIGURE_ARGS (more configure
# arguments).
#
# The bundle (fabula-gpu-bundle.tar.xz, unpacked by gpu.sh) holds:
#   libexec/   the programs (fabula, fabula-model-bench, the CUDA test
#              programs, test_comm_device, MPICH's mpiexec.hydra and
#              hydra_pmi_proxy) and the modules fabula-cuda.so and
#              fabula-comm.so, stripped
#   build/     the same paths as in a build tree, as wrappers (FB_BUILDDIR)
#   bin/       fabula, fabula-model-bench, mpiexec(.hydra|.mpich) wrappers
#   lib/       every shared library they need except glibc, libstdc++,
#              libgcc_s and the CUDA/NCCL/driver libraries
#   src/       the test scripts and inputs/ (FB_SRCDIR)
#   env.sh     sourced by the wrappers: finds the CUDA and NCCL libraries on
#              the machine (CUDA toolkit, ldconfig, or PyTorch's nvidia wheels)
#   check.sh   prints where every library comes from; non-zero if one is missing
#   TESTS, BUNDLE_INFO, SOURCES.sha256
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=$ROOT/.gpubundle
BUILD=/tmp/fabula-bundle-build
JOBS=$(nproc 2>/dev/null || echo 2)
STRIP=1 FORCE_BOOTSTRAP=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUTDIR=${2:?--out needs a directory}; shift ;;
    --build) BUILD=${2:?--build needs a directory}; shift ;;
    --jobs) JOBS=${2:?--jobs needs a number}; shift ;;
    --no-strip) STRIP=0 ;;
    --bootstrap) FORCE_BOOTSTRAP=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)
STAGE=$BUILD.stage
CUDA_DIR=${CUDA_HOME:-/usr/local/cuda}
NCCL_DIR=${FABULA_BUNDLE_NCCL:-$CUDA_DIR}
TARBALL=$OUTDIR/fabula-gpu-bundle.tar.xz
LIMIT_MIB=60   # the device call carries 64 MiB in all, the tree included

say() { printf 'gpu_bundle: %s\n' "$*"; }
die() { printf 'gpu_bundle: error: %s\n' "$*" >&2; exit 1; }

for t in ldd readelf strip tar xz sha256sum make; do
  command -v $t >/dev/null || die "$t not found"
done
[ -x "$CUDA_DIR/bin/nvcc" ] || die "no nvcc under $CUDA_DIR (set CUDA_HOME)"
[ -f "$NCCL_DIR/include/nccl.h" ] && ls "$NCCL_DIR"/lib64/libnccl.so* >/dev/null 2>&1 ||
  die "no NCCL (include/nccl.h, lib64/libnccl.so) under $NCCL_DIR (set FABULA_BUNDLE_NCCL)"

# ---------------------------------------------------------------- sources
# configure and Makefile.in are generated and git-ignored. Build from the
# repository when they are there and current; else bootstrap a copy, so that
# neither this script nor make's rebuild rules regenerate them in the tree.
autotools_current() {
  local src inc
  for f in configure Makefile.in aclocal.m4 build_config.h.in build-aux; do [ -e "$ROOT/$f" ] || return 1; done
  for src in "$ROOT/configure.ac" "$ROOT"/m4/*.m4; do [ "$src" -nt "$ROOT/aclocal.m4" ] && return 1; done
  [ "$ROOT/aclocal.m4" -nt "$ROOT/configure" ] && return 1
  [ "$ROOT/configure.ac" -nt "$ROOT/configure" ] && return 1
  [ "$ROOT/aclocal.m4" -nt "$ROOT/build_config.h.in" ] && return 1
  [ "$ROOT/aclocal.m4" -nt "$ROOT/Makefile.in" ] && return 1
  [ -n "$(find "$ROOT" -path "$ROOT/.git" -prune -o \( -name Makefile.am -o -name 'Makemodule*.am' \) \
          -newer "$ROOT/Makefile.in" -print -quit)" ] && return 1
  for inc in $(sed -n 's|^include \$(srcdir)/||p' "$ROOT/Makefile.am"); do
    grep -qF "\$(srcdir)/$inc" "$ROOT/Makefile.in" || return 1
  done
  return 0
}

# The tree's files: tracked and untracked-but-not-ignored (what the device
# call copies), NUL-separated, relative to ROOT.
tree_files() {
  if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard
  else
    (cd "$ROOT" && find . -path ./.git -prune -o -type f -print0 | sed -z 's|^\./||')
  fi
}

if [ "$FORCE_BOOTSTRAP" = 0 ] && autotools_current; then
  SRC=$ROOT
  say "sources: $ROOT (configure is current)"
else
  command -v autoreconf >/dev/null || die "configure is missing or stale and autoreconf is not installed"
  SRC=$BUILD.src
  say "sources: configure missing or stale in $ROOT; bootstrapping a copy in $SRC"
  rm -rf "$SRC"; mkdir -p "$SRC"
  tree_files | (cd "$ROOT" && tar --null -T - -cf -) | tar -xf - -C "$SRC"
  (cd "$SRC" && ./bootstrap) || die "./bootstrap failed in $SRC"
fi

# ---------------------------------------------------------------- build
CONF_ARGS=(--with-cuda="$CUDA_DIR" --with-nccl="$NCCL_DIR")
# shellcheck disable=SC2206  # a word list by design
[ -n "${FABULA_BUNDLE_CONFIGURE_ARGS:-}" ] && CONF_ARGS+=(${FABULA_BUNDLE_CONFIGURE_ARGS})
STAMP="$SRC ${CONF_ARGS[*]}"
if [ ! -f "$BUILD/Makefile" ] || [ "$(cat "$BUILD/.bundle-stamp" 2>/dev/null)" != "$STAMP" ]; then
  say "configure in $BUILD: ${CONF_ARGS[*]}"
  find "$BUILD" -mindepth 1 -delete
  (cd "$BUILD" && "$SRC/configure" "${CONF_ARGS[@]}") >"$BUILD/bundle-configure.log" 2>&1 ||
    { tail -20 "$BUILD/bundle-configure.log" >&2; die "configure failed (see $BUILD/bundle-configure.log)"; }
  printf '%s\n' "$STAMP" >"$BUILD/.bundle-stamp"
fi
grep -q '^#define HAVE_CUDA 1' "$BUILD/build_config.h" || die "configure did not enable CUDA"
grep -q '^#define HAVE_NCCL 1' "$BUILD/build_config.h" || die "configure did not enable NCCL"
say "make -j$JOBS all, then the check programs (make check TESTS=, which runs none)"
make -C "$BUILD" -j"$JOBS" >"$BUILD/bundle-make.log" 2>&1 &&
  make -C "$BUILD" -j"$JOBS" check TESTS= >>"$BUILD/bundle-make.log" 2>&1 ||
  { tail -30 "$BUILD/bundle-make.log" >&2; die "make failed (see $BUILD/bundle-make.log)"; }
[ -x "$BUILD/bench/fabula-model-bench" ] ||
  make -C "$BUILD" -j"$JOBS" bench/fabula-model-bench >>"$BUILD/bundle-make.log" 2>&1 ||
  die "bench/fabula-model-bench did not build"

# ---------------------------------------------------------------- what to bundle
# The tests bench/gpu.sh runs: what any Makemodule*.am registers under
# tests/cuda/ (as gpu.sh's cuda_tests does), and the device collectives.
TESTS_LIST=$(grep -rl --include='Makemodule*.am' 'tests/cuda/' "$SRC/tests" "$SRC/kernels" 2>/dev/null |
  xargs -r sed -n '/^[[:space:]]*TESTS[[:space:]]*+\{0,1\}=/,/[^\\]$/p' |
  grep -o 'tests/cuda/[A-Za-z0-9_./-]*' | sort -u | tr '\n' ' ')
TESTS_LIST=$(echo $TESTS_LIST tests/e2e/comm_device.sh)
[ -n "${TESTS_LIST// /}" ] || die "no CUDA tests found in the Makemodule*.am files"

PROGS="fabula bench/fabula-model-bench"
SCRIPTS="tests/e2e/lib.sh"
for t in $TESTS_LIST; do
  case $t in
    *.sh|*.py)
      [ -f "$SRC/$t" ] || die "test script $t not found"
      SCRIPTS="$SCRIPTS $t"
      # Programs a script runs from the build tree ("$FB_BUILDDIR/x", "${FB_BUILDDIR:-.}/x").
      for p in $(grep -oE 'FB_BUILDDIR(:-[^}]*)?\}?/[A-Za-z0-9_./-]+' "$SRC/$t" | sed 's|^[^/]*/||'); do
        PROGS="$PROGS $p"
      done ;;
    *) PROGS="$PROGS $t" ;;
  esac
done
# Helpers the scripts read from FB_SRCDIR (compare_losses.py and the like).
for f in "$SRC"/tests/cuda/*.py "$SRC"/tests/cuda/*.sh "$SRC"/tests/e2e/compare_losses.py "$SRC"/tests/e2e/memory_lib.sh; do
  [ -f "$f" ] && SCRIPTS="$SCRIPTS ${f#"$SRC"/}"
done
PROGS=$(printf '%s\n' $PROGS | sort -u | tr '\n' ' ')
SCRIPTS=$(printf '%s\n' $SCRIPTS | sort -u | tr '\n' ' ')

MPIEXEC_REAL=""
for m in mpiexec.mpich mpiexec.hydra; do
  if command -v $m >/dev/null; then MPIEXEC_REAL=$(readlink -f "$(command -v $m)"); break; fi
done
[ -n "$MPIEXEC_REAL" ] || die "MPICH's launcher (mpiexec.mpich / mpiexec.hydra) not found"
PROXY=$(dirname "$MPIEXEC_REAL")/hydra_pmi_proxy
[ -x "$PROXY" ] || PROXY=$(command -v hydra_pmi_proxy) || die "hydra_pmi_proxy not found"

# ---------------------------------------------------------------- stage
rm -rf "$STAGE"
mkdir -p "$STAGE"/{libexec,lib,bin,build,src}

# wrapper PATH NAME: PATH (relative to the bundle) runs libexec/NAME with the
# bundle's environment. POSIX sh: the device's /bin/sh may be dash.
wrapper() {
  local path=$1 name=$2 up
  up=$(dirname "$path" | sed 's|[^/][^/]*|..|g')
  mkdir -p "$STAGE/$(dirname "$path")"
  cat >"$STAGE/$path" <<EOF
#!/bin/sh
# Written by bench/gpu_bundle.sh: the bundled $name with the bundle's libraries.
FB_BUNDLE=\$(cd "\$(dirname "\$0")/$up" && pwd -P) || exit 127
. "\$FB_BUNDLE/env.sh" || exit 127
fb_bundle_exec "\$FB_BUNDLE/libexec/$name" "\$@"
EOF
  chmod 755 "$STAGE/$path"
}

ELFS=""
add_prog() {   # add_prog SOURCE NAME
  [ -e "$STAGE/libexec/$2" ] && die "two programs named $2"
  cp "$1" "$STAGE/libexec/$2"
  [ "$STRIP" = 1 ] && strip --strip-unneeded "$STAGE/libexec/$2"
  chmod 755 "$STAGE/libexec/$2"
  ELFS="$ELFS $1"
}
for p in $PROGS; do
  [ -x "$BUILD/$p" ] || die "$p was not built in $BUILD"
  add_prog "$BUILD/$p" "$(basename "$p")"
  wrapper "build/$p" "$(basename "$p")"
done
# The CUDA backend and the device comms are modules the programs look for
# next to themselves (docs/cuda.md, "Modules"): libexec/ holds them all.
for m in fabula-cuda.so fabula-comm.so; do
  [ -f "$BUILD/$m" ] || die "$m was not built in $BUILD"
  add_prog "$BUILD/$m" "$m"
done
wrapper bin/fabula fabula
wrapper bin/fabula-model-bench fabula-model-bench
# Hydra starts hydra_pmi_proxy from the folder it was started from.
add_prog "$MPIEXEC_REAL" mpiexec.hydra
add_prog "$PROXY" hydra_pmi_proxy
for m in mpiexec mpiexec.hydra mpiexec.mpich; do wrapper "bin/$m" mpiexec.hydra; done

for f in $SCRIPTS; do
  mkdir -p "$STAGE/src/$(dirname "$f")"
  cp -p "$SRC/$f" "$STAGE/src/$f"
done
cp -rp "$SRC/inputs" "$STAGE/src/inputs"   # the default job's corpus (train_gpu_vs_cpu.sh)

# Libraries: whatever ldd resolves for the programs, except these, which the
# device has and must be its own (glibc, the C++ runtime, CUDA, NCCL, driver).
SYSTEM_RE='^(linux-vdso|ld-linux|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libthread_db|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]*|libnvrtc|libnvJitLink|libcudnn|libcufft|libcurand|libcusolver|libcusparse)\.so'
EXTERNAL=""
: >"$BUILD/bundle-ldd.txt"
for e in $ELFS; do
  ldd "$e" >>"$BUILD/bundle-ldd.txt" 2>&1 || die "ldd $e failed"
  if ldd "$e" | grep -q 'not found'; then ldd "$e" | grep 'not found' >&2; die "$e has unresolved libraries here"; fi
done
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  case $path in /*) ;; *) continue ;; esac
  if printf '%s\n' "$name" | grep -qE "$SYSTEM_RE"; then
    case $name in libcu*|libnccl*|libnv*) EXTERNAL="$EXTERNAL $name" ;; esac
    continue
  fi
  [ -e "$STAGE/lib/$name" ] && continue
  cp -L "$path" "$STAGE/lib/$name"   # the file itself, under the name the loader asks for
  chmod 644 "$STAGE/lib/$name"
done <"$BUILD/bundle-ldd.txt"
EXTERNAL=$(printf '%s\n' $EXTERNAL | sort -u | tr '\n' ' ')
# UCX (MPICH's ch4:ucx) and hwloc load plugins from these folders: keep them
# to the bundle's (none), so that no plugin of another version is loaded.
mkdir -p "$STAGE/lib/ucx" "$STAGE/lib/hwloc"

printf '%s\n' $TESTS_LIST >"$STAGE/TESTS"
printf '%s\n' $EXTERNAL >"$STAGE/EXTERNAL_LIBS"

# ---------------------------------------------------------------- env.sh, check.sh
cat >"$STAGE/env.sh" <<'EOF'
# Sourced (POSIX sh) by the bundle's wrappers, with FB_BUNDLE set to the
# bundle's folder; bench/gpu.sh sources it once so that the search below runs
# once. Sets FB_BUNDLE_LIBPATH: the bundle's lib/ first, then the folders
# holding the CUDA and NCCL libraries the programs need (EXTERNAL_LIBS),
# found in the CUDA toolkit, through ldconfig, or in the nvidia-* Python
# wheels (PyTorch's: nvidia/nccl/lib, nvidia/cu13/lib, ...). Only the
# wrapped programs get it as LD_LIBRARY_PATH, never Python (the bundle's
# Debian libraries could shadow the image's own).
fb_bundle_find() {   # fb_bundle_find LIB: the folder holding LIB, or nothing
  # The image's own LD_LIBRARY_PATH first (it stays after the bundle's path).
  for fb_d in $(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' ') ${CUDA_HOME:+"$CUDA_HOME/lib64"} \
              /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$fb_d/$1" ] && { echo "$fb_d"; return 0; }
  done
  fb_f=$( { /sbin/ldconfig -p || ldconfig -p; } 2>/dev/null |
    awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}')
  [ -n "$fb_f" ] && [ -e "$fb_f" ] && { dirname "$fb_f"; return 0; }
  if [ -z "${FB_BUNDLE_NVIDIA_DIRS+x}" ]; then
    FB_BUNDLE_NVIDIA_DIRS=$("${FB_BUNDLE_PYTHON:-${PYTHON:-python3}}" -c \
      'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null) || FB_BUNDLE_NVIDIA_DIRS=""
  fi
  for fb_d in $FB_BUNDLE_NVIDIA_DIRS; do
    fb_f=$(find "$fb_d" -name "$1" \( -type f -o -type l \) 2>/dev/null | head -n 1)
    [ -n "$fb_f" ] && { dirname "$fb_f"; return 0; }
  done
  return 1
}

if [ "${FB_BUNDLE_LIBPATH_FOR:-}" != "$FB_BUNDLE" ]; then
  FB_BUNDLE_LIBPATH=$FB_BUNDLE/lib
  FB_BUNDLE_MISSING=""
  for fb_lib in $(cat "$FB_BUNDLE/EXTERNAL_LIBS"); do
    if fb_dir=$(fb_bundle_find "$fb_lib"); then
      case ":$FB_BUNDLE_LIBPATH:" in *":$fb_dir:"*) ;; *) FB_BUNDLE_LIBPATH=$FB_BUNDLE_LIBPATH:$fb_dir ;; esac
    else
      FB_BUNDLE_MISSING="$FB_BUNDLE_MISSING $fb_lib"
    fi
  done
  FB_BUNDLE_LIBPATH_FOR=$FB_BUNDLE
  export FB_BUNDLE_LIBPATH FB_BUNDLE_MISSING FB_BUNDLE_LIBPATH_FOR
fi

fb_bundle_exec() {   # fb_bundle_exec PROGRAM ARGS...: PROGRAM with the bundle's libraries
  LD_LIBRARY_PATH=$FB_BUNDLE_LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  UCX_MODULE_DIR=$FB_BUNDLE/lib/ucx
  HWLOC_PLUGINS_PATH=$FB_BUNDLE/lib/hwloc
  # Hydra's proxies reach mpiexec at the loopback address: the machine's
  # host name need not resolve.
  HYDRA_IFACE=${HYDRA_IFACE:-lo}
  export LD_LIBRARY_PATH UCX_MODULE_DIR HWLOC_PLUGINS_PATH HYDRA_IFACE
  exec "$@"
}
EOF

cat >"$STAGE/check.sh" <<'EOF'
#!/bin/sh
# Where the bundled programs' libraries come from on this machine (ldd -r
# with the bundle's library path); exits 1 if one is missing, too old (a
# symbol version this machine's glibc or libstdc++ lacks) or lacks a symbol.
FB_BUNDLE=$(cd "$(dirname "$0")" && pwd -P) || exit 2
. "$FB_BUNDLE/env.sh" || exit 2
echo "bundle: $FB_BUNDLE"
echo "library path: $FB_BUNDLE_LIBPATH"
[ -n "$FB_BUNDLE_MISSING" ] && echo "NOT FOUND on this machine:$FB_BUNDLE_MISSING"
echo "glibc here: $(ldd --version 2>/dev/null | head -n 1)"
bad=0
for p in "$FB_BUNDLE"/libexec/*; do
  # A module's undefined symbols are the binary's (it exports them), so
  # only its libraries are checked.
  case $p in *.so) fb_r= ;; *) fb_r=-r ;; esac
  out=$(LD_LIBRARY_PATH=$FB_BUNDLE_LIBPATH ldd $fb_r "$p" 2>&1)
  if printf '%s\n' "$out" | grep -qE 'not found|undefined symbol'; then
    echo "$(basename "$p"): MISSING"
    { printf '%s\n' "$out" | grep 'not found'; printf '%s\n' "$out" | grep 'undefined symbol'; } |
      head -n 5 | sed 's/^[[:space:]]*/    /'
    bad=1
  else
    echo "$(basename "$p"): ok"
  fi
done
libs=$(for p in "$FB_BUNDLE"/libexec/*; do LD_LIBRARY_PATH=$FB_BUNDLE_LIBPATH ldd "$p" 2>/dev/null; done |
  awk '$2 == "=>" {print $1 " => " $3}' | sort -u)
echo "libraries from the bundle: $(printf '%s\n' "$libs" | grep -cF " => $FB_BUNDLE/lib/")"
echo "libraries from this machine:"
printf '%s\n' "$libs" | grep -vF " => $FB_BUNDLE/lib/" | sed 's/^/    /'
[ -z "$FB_BUNDLE_MISSING" ] || bad=1
exit $bad
EOF
chmod 755 "$STAGE/check.sh"

# ---------------------------------------------------------------- metadata
( cd "$ROOT" && tree_files | grep -zv '^\.gpubundle/' | xargs -0 -r sha256sum ) >"$STAGE/SOURCES.sha256"
need_versions() {   # the newest versions of glibc / libstdc++ any bundled file needs
  for f in "$STAGE"/libexec/* "$STAGE"/lib/*.so*; do readelf -V --wide "$f" 2>/dev/null; done |
    grep -oE "Name: $1_[0-9.]+" | sed 's/Name: //' | sort -uV | tail -n 1
}
{
  echo "fabula GPU bundle, built $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
  echo "host: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
  if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
    echo "source: $ROOT at $(git -C "$ROOT" rev-parse --short HEAD)$([ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] && echo ' with uncommitted changes'); built from $SRC"
  fi
  echo "configure ${CONF_ARGS[*]}"
  sed -n '/^ *CUDA *:/p; /^ *NCCL *:/p; /^ *MPI launcher *:/p; /^ *parallel HDF5 *:/p; /^ *BLAS *:/p; /^ *PAPI *:/p' "$BUILD/config.log" | sed 's/^ */  /'
  echo "nvcc: $("$CUDA_DIR/bin/nvcc" --version | tail -n 1)"
  echo "needs on the machine: $(need_versions GLIBC), $(need_versions GLIBCXX), $(need_versions CXXABI)"
  echo "and from CUDA/NCCL: $EXTERNAL"
  echo "tests: $TESTS_LIST"
  echo "programs: $(cd "$STAGE/libexec" && echo *)"
  echo "libraries: $(cd "$STAGE/lib" && ls -- *.so* | tr '\n' ' ')"
} >"$STAGE/BUNDLE_INFO"

# ---------------------------------------------------------------- pack
tar -C "$STAGE" --owner=0 --group=0 -cf - . | xz -9e -T"$JOBS" >"$TARBALL.tmp"
mv "$TARBALL.tmp" "$TARBALL"
cp "$STAGE/BUNDLE_INFO" "$OUTDIR/BUNDLE_INFO"

# The bundle must not travel as part of the tree: ignore it (local-only file).
case $OUTDIR/ in
  "$ROOT"/*)
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 &&
       ! git -C "$ROOT" check-ignore -q "$TARBALL"; then
      excl=$(git -C "$ROOT" rev-parse --git-path info/exclude)
      case $excl in /*) ;; *) excl=$ROOT/$excl ;; esac
      mkdir -p "$(dirname "$excl")"
      printf '/%s/\n' "${OUTDIR#"$ROOT"/}" >>"$excl"
      say "added /${OUTDIR#"$ROOT"/}/ to $excl"
    fi ;;
esac

size=$(stat -c %s "$TARBALL")
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
tree=$( (cd "$ROOT" && tree_files | grep -zv '^\.gpubundle/' | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1) || echo 0)
say "staged: $STAGE ($(du -sh "$STAGE" | cut -f1) unpacked)"
say "bundle: $TARBALL ($(mib "$size")); the tree beside it: $(mib "$tree"); the device call carries 64 MiB in all"
sed 's/^/  /' "$STAGE/BUNDLE_INFO"
[ "$size" -le $((LIMIT_MIB * 1048576)) ] || die "the bundle is over $LIMIT_MIB MiB"
[ $((size + tree)) -le $((64 * 1048576)) ] || die "bundle and tree together are over the device's 64 MiB"
say "on the device: run with carry [\"${OUTDIR#"$ROOT"/}\"], command: bash bench/gpu.sh --bundle ${OUTDIR#"$ROOT"/}"
