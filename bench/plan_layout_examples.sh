#!/bin/sh
# docs/plan.md's worked `plan layout` examples, regenerated from the tool:
# runs each example command and writes its whole output, with the date,
# commit and command, as Markdown (docs/plan.md, "Layout search", quotes
# the figures from the newest such file in bench/results/).
#
#   bench/plan_layout_examples.sh [OUT.md]
#
# Predictions (inputs/machines/ are datasheet figures and assumptions):
# any machine gives the same tables; the search's CPU seconds, measured
# with /usr/bin/time, are this machine's.
set -eu
cd "$(dirname "$0")/.."
[ -x ./fabula ] || { echo "plan_layout_examples.sh: build fabula first (make)" >&2; exit 2; }
out=${1:-/dev/stdout}

example() {
    title=$1; shift
    echo "## $title"
    echo
    echo "    fabula $*"
    echo
    # the search's CPU seconds beside its output (issue 43 asks the 10T MoE's under 30 s)
    /usr/bin/time -f "%U s user + %S s system CPU, %e s wall" -o "$tmp.t" ./fabula "$@" >"$tmp" 2>&1
    grep -v '^fabula: note:' "$tmp" | sed 's/^/    /'
    echo
    echo "Time: $(cat "$tmp.t") ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))."
    echo
}
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.t"' EXIT
[ -x /usr/bin/time ] || { echo "plan_layout_examples.sh: needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }

{
    echo "# \`plan layout\` examples, regenerated ($(date -u +%Y-%m-%d))"
    echo
    echo "- **Date:** $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- **Commit:** $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (with uncommitted changes in src/)')"
    echo "- **Machine:** none measured: predictions on the machine files named (datasheet figures and assumptions)"
    echo "- **Command:** \`bench/plan_layout_examples.sh\`; each example's command above its output"
    echo
    example "GPT-3 175B on 1,024 H200s, Megatron's layout compared" \
        plan layout --gpus 1024 --machine inputs/machines/h200-8x-nvlink-ib.json \
        --global-batch-tokens 3145728 inputs/examples/gpt3-175b.json \
        --compare dp=8,tp=8,pp=16,zero=1,sp,recompute=none,vpp=6,tokens=4096
    example "355B MoE, ZeRO-3 and both offloads, on 512 H200s" \
        plan layout --gpus 512 --machine inputs/machines/h200-8x-nvlink-ib.json --keep-zero \
        inputs/examples/moe-355b.json inputs/examples/moe-355b-zero3-offload.ds.json \
        --compare dp=512,zero=3,offload=both,tokens=4096
    example "355B MoE, ZeRO-3 and both offloads, on 512 80-GB H100s" \
        plan layout --gpus 512 --machine inputs/machines/h100-8x.json --keep-zero \
        inputs/examples/moe-355b.json inputs/examples/moe-355b-zero3-offload.ds.json
    example "10T MoE (inputs/examples/moe-10t.json) on 1,024 H200s: the search's speed" \
        plan layout --gpus 1024 --machine inputs/machines/h200-8x-nvlink-ib.json --global-batch-tokens 16777216 \
        inputs/examples/moe-10t.json
} >"$out"
