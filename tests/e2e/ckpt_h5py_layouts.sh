#!/bin/sh
# A checkpoint whose tensors another HDF5 writer stored differently (h5py:
# chunked, or big-endian float32) still loads, through H5Dread instead of
# the direct pread of fabula's own contiguous little-endian datasets
# (docs/checkpoint.md, "How a load reads"): resumed on 1 rank with 1 and 2
# threads, the continuation's losses are bit-identical to the unmodified
# file's, and a changed value in a chunked tensor is found by its checksum
# (exit 3 naming the tensor). Skips (77) without a Python with h5py and
# numpy (tools/install-deps.sh installs them).
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"

PY=
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$p" ] && "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no Python with h5py and numpy (tools/install-deps.sh installs them)"; exit 77; }

# ttrain THREADS RUN_DIR ARGS...: 1 rank, THREADS threads
ttrain() {
    t=$1; dir=$2; shift 2
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=$t timeout 300 $MPIEXEC -n 1 "$FABULA" train --run-dir "$SCRATCH/$dir" \
        $CKPT_ARGS "$@") >>"$SCRATCH/$dir.out" 2>&1
    RC=$?
}

ctrain 1 orig --steps 2 --set checkpoint.save_interval=2
check "a 1-rank run writes step 2" '[ $RC -eq 0 ] && [ -f "$(ck orig 2)" ]'
cp -r "$SCRATCH/orig" "$SCRATCH/h5py"
"$PY" - "$(ck h5py 2)" <<'PYEOF' >"$SCRATCH/rewrite.txt" 2>&1
import h5py, sys
f = h5py.File(sys.argv[1], "r+")
names = []
f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n.split("/")[0] in ("params", "optimizer") else None)
kinds = {"chunked": 0, "big-endian": 0}
for i, n in enumerate(sorted(names)):
    d = f[n]
    data, attrs = d[...], dict(d.attrs)
    del f[n]
    if i % 2 == 0:
        nd = f.create_dataset(n, data=data, chunks=(max(1, data.shape[0] // 3),) + data.shape[1:])
        kinds["chunked"] += 1
    else:
        nd = f.create_dataset(n, data=data.astype(">f4"))
        kinds["big-endian"] += 1
    for k, v in attrs.items():
        nd.attrs[k] = v
f.close()
print(kinds["chunked"], kinds["big-endian"])
PYEOF
RC=$?
check "h5py rewrote every tensor, chunked or big-endian" \
    '[ $RC -eq 0 ] && awk "{ exit !(\$1 > 0 && \$2 > 0) }" "$SCRATCH/rewrite.txt"'
"$FABULA" ckpt verify -q "$(ck h5py 2)" >"$SCRATCH/verify.txt"; RC=$?
check "ckpt verify of the rewritten file: ok" '[ $RC -eq 0 ] && grep -q ": ok: " "$SCRATCH/verify.txt"'

for t in 1 2; do
    cp -r "$SCRATCH/orig" "$SCRATCH/a$t"
    cp -r "$SCRATCH/h5py" "$SCRATCH/b$t"
    ttrain $t a$t --steps 4 --set checkpoint.save_interval=100
    ra=$RC
    ttrain $t b$t --steps 4 --set checkpoint.save_interval=100
    check "$t thread(s): the rewritten file resumes at step 2 and steps 3-4 are bit-identical to the original's" \
        '[ $ra -eq 0 ] && [ $RC -eq 0 ] && grep -q "resumed from .*step-00000002.h5 at step 2" "$SCRATCH/b$t.out" &&
         closses a$t >"$SCRATCH/la$t.txt" && closses b$t >"$SCRATCH/lb$t.txt" && [ "$(wc -l <"$SCRATCH/lb$t.txt")" -eq 4 ] &&
         cmp -s "$SCRATCH/la$t.txt" "$SCRATCH/lb$t.txt"'
done

# one value of a chunked tensor changed, its stored checksum left
cp -r "$SCRATCH/h5py" "$SCRATCH/bad"
DS=$("$PY" - "$(ck bad 2)" <<'PYEOF'
import h5py, sys
f = h5py.File(sys.argv[1], "r+")
names = []
f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.chunks and n.startswith("params/") else None)
d = f[names[0]]
x = d[...]
x.flat[1] += 1.0
d[...] = x
f.close()
print("/" + names[0])
PYEOF
)
for t in 1 2; do
    rm -f "$SCRATCH/bad$t.out"
    ttrain $t bad$t --steps 4 --set "run.resume=$(ck bad 2)"
    check "$t thread(s): a changed value in a chunked tensor is exit 3 naming it" \
        '[ $RC -eq 3 ] && [ -n "$DS" ] && grep -q "the checkpoint is damaged: tensor $DS: checksum" "$SCRATCH/bad$t.out"'
done
finish
