#!/bin/sh
# The bottleneck verdict (docs/monitoring.md), each class provoked on the CPU
# with an effect large enough for a loaded machine: the default run is
# compute-bound; one rank throttled by monitor.debug_delay_rank/_s is an
# imbalance naming that rank as the straggler; the uniform sampler on
# skewed lengths is an imbalance that names data.sampler; tiny reduce
# buckets without overlap are communication; a slow read
# (monitor.debug_delay_data_s) is input; a checkpoint every step is io.
# Issue 46, verdicts that read the layout, the CPU share and the packing:
# pp 2 at dp 1 is the pipeline bubble (not overlap_comm, which does nothing
# at dp 1); a process that gets a quarter of a core is "cpu", not
# "compute"; the seq-len warm-up's short samples in one micro-batch of two
# name data.packing "balanced" (not "more samples or calibrate").
# Checked: the last interval's verdict in metrics.jsonl and the run's in the
# summary line.
. "$FB_SRCDIR/tests/e2e/lib.sh"
PY=${PYTHON:-python3}

last_field() { "$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print(r["bottleneck"][sys.argv[2]])' "$1" "$2"; }

# verdict NAME NP WANT ARGS...: runs, then checks both verdicts are WANT
verdict() {
    name=$1; np=$2; want=$3; shift 3
    R="$SCRATCH/$name"
    run_fabula "$np" train --run-dir "$R" "$@"
    cp "$SCRATCH/out.txt" "$SCRATCH/$name.txt"
    grep -E "^(  bottleneck|fabula: bottleneck)" "$SCRATCH/$name.txt" | sed 's/^/  | /'
    check "$name: exit 0" '[ $RC -eq 0 ]'
    got=$(last_field "$R/metrics.jsonl" verdict 2>/dev/null)
    check "$name: the last interval's verdict is $want (got $got)" '[ "$got" = "$want" ]'
    check "$name: the run's verdict is $want" 'grep -q "^fabula: bottleneck over the run: $want (" "$SCRATCH/$name.txt"'
}

verdict compute 1 compute --steps 4 --set steps_per_print=10

verdict straggler 2 imbalance --steps 3 --set steps_per_print=10 \
    --set monitor.debug_delay_rank=1 --set monitor.debug_delay_s=1.5
check "straggler: rank 1 named slowest and straggler" \
    'last_field "$SCRATCH/straggler/metrics.jsonl" evidence | grep -q "slowest rank 1 " &&
     last_field "$SCRATCH/straggler/metrics.jsonl" advice | grep -q "rank 1 is a straggler"'

# 8 samples of 4000 tokens among 248 of 24: a step's 16 samples rarely fill
# two 4096-token micro-batches, so one rank computes and the other waits.
# Long windows make that wait dwarf the step's fixed gradient exchange: with
# 1000-token samples, a loaded CI machine once measured comm_wait (30%)
# above the imbalance and gave the run "communication".
"$PY" -c '
import json, random
random.seed(3)
docs = [3999] * 8 + [23] * 248
random.shuffle(docs)
for i, n in enumerate(docs):
    print(json.dumps({"id": "d%d" % i, "genre": "fantasy", "content": "".join(random.choice("abcdefgh ") for _ in range(n))}))' \
    >"$SCRATCH/skewed.jsonl"
verdict uniform 2 imbalance --steps 6 --set steps_per_print=10 --set data.train="$SCRATCH/skewed.jsonl" \
    --set data.seq_len=4096 --set data.max_tokens_per_batch=4096 --set train_micro_batch_size_per_gpu=4 \
    --set gradient_accumulation_steps=2 --set data.sampler=uniform
check "uniform: the advice names data.sampler" \
    'last_field "$SCRATCH/uniform/metrics.jsonl" advice | grep -q "data.sampler is \"uniform\""'

verdict communication 2 communication --steps 4 --set steps_per_print=10 \
    --set zero_optimization.overlap_comm=false --set zero_optimization.reduce_bucket_size=16 \
    --set train_micro_batch_size_per_gpu=1 --set data.seq_len=64
check "communication: the advice names overlap_comm and reduce_bucket_size" \
    'last_field "$SCRATCH/communication/metrics.jsonl" advice | grep -q "overlap_comm.*reduce_bucket_size (now 16"'

verdict input 1 input --steps 3 --set steps_per_print=10 --set monitor.debug_delay_data_s=1.0 \
    --set train_micro_batch_size_per_gpu=1 --set data.seq_len=32

# 6.5M parameters, 16 experts of which 2 run: a 78 MB checkpoint after
# every step of 32 tokens
verdict io 1 io --steps 5 --set steps_per_print=10 --set checkpoint.save_interval=1 --set checkpoint.keep_last=1 \
    --set train_micro_batch_size_per_gpu=1 --set data.seq_len=32 --set model.intermediate_size=512 \
    --set model.num_local_experts=16
check "io: the advice names checkpoint.save_interval" \
    'last_field "$SCRATCH/io/metrics.jsonl" advice | grep -q "checkpoint.save_interval (now 1)"'
rm -rf "$SCRATCH/io/checkpoints"

# pp 2, dp 1, one micro-batch a step: each stage idles while the other
# computes (the 1F1B bubble, (p-1)/(m+p-1) = 50%)
verdict pipeline 2 pipeline --steps 4 --set steps_per_print=10 --set parallel.pipeline_parallel_size=2
check "pipeline: the advice names the micro-batches and interleaving, not overlap_comm" \
    'a=$(last_field "$SCRATCH/pipeline/metrics.jsonl" advice) && echo "$a" | grep -q "gradient_accumulation_steps" &&
     echo "$a" | grep -q "parallel.virtual_pipeline_stages" && ! echo "$a" | grep -q overlap_comm'
check "pipeline: the evidence puts the waits in the pp group" \
    'last_field "$SCRATCH/pipeline/metrics.jsonl" evidence | grep -Eq "pp (9[0-9]|100)%"'

# one rank pinned to one CPU beside 3 busy loops, each in a session of its
# own (the scheduler's autogroups would otherwise give the loops one share
# together): it gets a quarter of the core
cpu=$("$PY" -c 'import os; print(min(os.sched_getaffinity(0)))')
hogs=""
for i in 1 2 3; do
    setsid taskset -c "$cpu" sh -c 'while :; do :; done' &
    hogs="$hogs $!"
done
mpiexec0=$MPIEXEC
MPIEXEC="taskset -c $cpu $mpiexec0"
verdict cpu 1 cpu --steps 4 --set steps_per_print=10 --set monitor.peak_flops=1e11
MPIEXEC=$mpiexec0
kill $hogs
check "cpu: the advice names OMP_NUM_THREADS and binding" \
    'last_field "$SCRATCH/cpu/metrics.jsonl" advice | grep -q "OMP_NUM_THREADS.*-bind-to core"'
check "cpu: metrics record the CPU share below 50%" \
    '"$PY" -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; sys.exit(not r[\"ranks\"][\"cpu_share_max\"] < 0.5)" "$SCRATCH/cpu/metrics.jsonl"'

# data.seq_len 1024 cut to 256 tokens by the warm-up: a step's 16 samples
# fit one micro-batch of 8192 tokens, the other rank has none
verdict packing 2 imbalance --steps 4 --set steps_per_print=10 --set data.seq_len=1024 \
    --set data.seq_len_warmup.enabled=true --set data.seq_len_warmup.start=256 --set data.seq_len_warmup.steps=100
check "packing: the advice names data.packing balanced and the warm-up" \
    'last_field "$SCRATCH/packing/metrics.jsonl" advice | grep -q "data.packing is \"best_fit\".*warmup cuts them to 256 tokens.*set data.packing to \"balanced\""'
run_fabula 2 train --run-dir "$SCRATCH/balanced" --steps 4 --set data.seq_len=1024 --set data.packing=balanced \
    --set data.seq_len_warmup.enabled=true --set data.seq_len_warmup.start=256 --set data.seq_len_warmup.steps=100
check "packing: with data.packing balanced the plan's imbalance is 0 (was 1)" \
    '[ $RC -eq 0 ] && "$PY" -c "import json,sys; sys.exit(any(json.loads(l)[\"imbalance\"] > 0.05 for l in open(sys.argv[1])))" "$SCRATCH/balanced/metrics.jsonl" &&
     "$PY" -c "import json,sys; sys.exit(any(json.loads(l)[\"imbalance\"] < 0.99 for l in open(sys.argv[1])))" "$SCRATCH/packing/metrics.jsonl"'
finish
