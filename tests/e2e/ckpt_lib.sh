# Shared by the checkpoint tests (sourced after lib.sh): a small MoE with the
# default router (capacity 1.25, load-balancing and z losses on) that trains
# in a fraction of a second per step, with a schedule that does not depend on
# run.steps (so a run cut in two follows the same lr). Its loss does not
# depend on the layout (docs/zero.md, "Invariance").
CKPT_ARGS="--set train_batch_size=8 --set train_micro_batch_size_per_gpu=2 --set data.seq_len=64 \
 --set model.hidden_size=64 --set model.intermediate_size=128 --set model.num_hidden_layers=1 \
 --set scheduler.params.total_num_steps=40"
CKPT_TOOL="${FB_BUILDDIR:-.}/tests/e2e/ckpt_tool"

# ctrain NP RUN_DIR ARGS...: trains into $SCRATCH/RUN_DIR, output in
# $SCRATCH/RUN_DIR.out (appended: one run dir may see several runs), status in $RC
ctrain() {
    np=$1; dir=$2; shift 2
    echo "=== mpiexec -n $np fabula train $*" >>"$SCRATCH/$dir.out"
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n "$np" "$FABULA" train --run-dir "$SCRATCH/$dir" \
        $CKPT_ARGS "$@") >>"$SCRATCH/$dir.out" 2>&1
    RC=$?
    [ $RC -eq 0 ] || { echo "--- $dir: exit $RC"; grep -v '^ \|^[{}]' "$SCRATCH/$dir.out" | tail -n 12; }
}

# "step loss" per line of RUN_DIR/metrics.jsonl
closses() { sed -n 's/^{"step":\([0-9]*\),"loss":\([-0-9.e+]*\),.*/\1 \2/p' "$SCRATCH/$1/metrics.jsonl"; }

# the step `latest` names, or nothing
clatest() { sed -n 's/^step-0*\([0-9][0-9]*\)\.h5$/\1/p' "$SCRATCH/$1/checkpoints/latest" 2>/dev/null; }

# cwithin A B TOL: same steps, every loss of B within TOL relative of A's
cwithin() {
    closses "$1" >"$SCRATCH/la.txt"; closses "$2" >"$SCRATCH/lb.txt"
    [ -s "$SCRATCH/la.txt" ] && [ "$(wc -l <"$SCRATCH/la.txt")" -eq "$(wc -l <"$SCRATCH/lb.txt")" ] &&
    paste "$SCRATCH/la.txt" "$SCRATCH/lb.txt" | awk -v tol="$3" '
        $1 != $3 { bad = 1 }
        { d = $2 - $4; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2; if (d > tol * a) { bad = 1; print "step " $1 ": " $2 " vs " $4 } }
        END { exit bad }'
}

# cprefix A B TOL: every step B logged is one A logged, its loss within TOL relative
cprefix() {
    closses "$1" >"$SCRATCH/la.txt"; closses "$2" >"$SCRATCH/lb.txt"
    [ -s "$SCRATCH/lb.txt" ] && awk -v tol="$3" '
        NR == FNR { ref[$1] = $2; next }
        { n++; if (!($1 in ref)) { bad = 1; print "step " $1 " not in the reference"; next }
          d = ref[$1] - $2; if (d < 0) d = -d; a = ref[$1] < 0 ? -ref[$1] : ref[$1]
          if (d > tol * a) { bad = 1; print "step " $1 ": " ref[$1] " vs " $2 } }
        END { exit bad || n == 0 }' "$SCRATCH/la.txt" "$SCRATCH/lb.txt"
}

# ck RUN_DIR STEP: the path of that run's checkpoint of STEP
ck() { echo "$SCRATCH/$1/checkpoints/step-$(printf %08d "$2").h5"; }

# same_ckpt REF DIR STEP: DIR's checkpoint of STEP holds REF's values
# (parameters and both Adam moments, tensor by tensor, within 1e-5:
# ckpt_tool compare) and verifies (`fabula ckpt verify`)
same_ckpt() {
    "$CKPT_TOOL" compare "$(ck "$1" "$3")" "$(ck "$2" "$3")" 1e-5 && "$FABULA" ckpt verify -q "$(ck "$2" "$3")"
}
