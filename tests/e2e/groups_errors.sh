#!/bin/sh
# Process layouts that cannot be built: exit 2 with one message naming
# parallel.expert_parallel_size, from `fabula train --dry-run` (the config
# reader checks the layout against the world size and the model) and from
# groups_create itself (tests/unit/test_comm groups EP EXPERTS). Layouts
# that can be built pass the dry run.
. "$FB_SRCDIR/tests/e2e/lib.sh"
TEST_COMM="$FB_BUILDDIR/tests/unit/test_comm"
KEY=parallel.expert_parallel_size

# expect_usage NAME NEEDLE NP CMD...: expect_exit2 (lib.sh) naming KEY.
expect_usage() {
    name=$1; needle=$2; np=$3; shift 3
    expect_exit2 "$name" "$KEY" "$needle" "$np" "$@"
}

RD="$SCRATCH/rundir"
train() { echo "$FABULA" train --dry-run --set "run.run_dir=$RD"; }

expect_usage "dry run: world 3, ep 2" "world size (3 ranks)" 3 $(train) --set $KEY=2
expect_usage "dry run: 4 experts, ep 3 (world 3)" "model.num_local_experts = 4" 3 $(train) --set $KEY=3
expect_usage "dry run: ep 2 on a dense model" "dense model" 2 $(train) --set $KEY=2 --set model.num_local_experts=0
expect_usage "dry run: ep 0" "positive integer" 1 $(train) --set $KEY=0
expect_usage "dry run: ep as a string" "$KEY" 1 $(train) --set "$KEY=\"two\""

expect_usage "groups_create: world 3, ep 2" "world size (3 ranks)" 3 "$TEST_COMM" groups 2 4
expect_usage "groups_create: 4 experts, ep 3 (world 3)" "model.num_local_experts = 4" 3 "$TEST_COMM" groups 3 4
expect_usage "groups_create: ep 2, dense model" "dense model" 2 "$TEST_COMM" groups 2 0
expect_usage "groups_create: ep 0" "positive integer" 1 "$TEST_COMM" groups 0 4

# Layouts that fit: the dry run accepts them and shows the key.
for layout in "1 1" "2 2" "4 2" "4 4"; do
    np=${layout% *}; ep=${layout#* }
    (cd "$FB_SRCDIR" && timeout 60 $MPIEXEC -n "$np" $(train) --set $KEY="$ep") >"$SCRATCH/out.txt" 2>&1
    rc=$?
    check "dry run: world $np, ep $ep accepted" \
        '[ $rc -eq 0 ] && grep -q "\"expert_parallel_size\": $ep,\{0,1\}\$" "$SCRATCH/out.txt"'
    [ "$rc" -eq 0 ] || sed 's/^/  | /' "$SCRATCH/out.txt"
done
finish
