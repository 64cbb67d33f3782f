#!/bin/sh
# Every writer of a run directory on a file system that fills up: the job
# ends with exit 4 and one message naming the file, and what was written
# before the failure is whole (no torn line, row or record):
#  - metrics.jsonl (1 and 2 ranks): every line parses, the steps run 1..k
#    without a gap (the old stdio writer carried on silently and exited 0
#    with a torn last line: glibc reports a flush that fails inside fwrite
#    of a line-buffered stream only through ferror);
#  - TensorBoard event files: whole records to the end of the file;
#  - csv_monitor files: a header and whole "step,value" rows;
#  - `fabula export` and `fabula report` into a full directory: exit 4
#    naming the file, no partial file left behind;
#  - a resume after the failure (the disk made larger, the checkpoints on
#    another disk) continues the log with no gap and no repeat;
#  - jobs.jsonl records the failure (exit 4 and the message) where it fits.
# Checkpoints on a full disk: tests/e2e/ckpt_disk_full.sh. Needs a tmpfs
# mount (root); 77 otherwise.
. "$FB_SRCDIR/tests/e2e/lib.sh"
. "$FB_SRCDIR/tests/e2e/ckpt_lib.sh"
PY=${PYTHON:-/usr/bin/python3}

FS="$SCRATCH/tmpfs"
mkdir -p "$FS"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=256k tmpfs "$FS" 2>/dev/null; then
    echo "cannot mount a tmpfs here (not root, or not permitted): skipped"
    exit 77
fi
trap 'umount "$FS" 2>/dev/null || { sleep 1; umount "$FS"; }' EXIT
# fresh SIZE: an empty tmpfs of SIZE at $FS
fresh() { rm -rf "${FS:?}"/* "$FS"/.[!.]* 2>/dev/null; mount -o remount,size="$1" "$FS"; }

# whole_jsonl FILE: every line a JSON object with "step" 1, 2, ..., k (k >= 1)
whole_jsonl() {
    "$PY" - "$1" <<'EOF'
import json, sys
data = open(sys.argv[1], "rb").read()
assert data.endswith(b"\n"), "a torn last line"
steps = [json.loads(l)["step"] for l in data.decode().splitlines()]
assert steps == list(range(1, len(steps) + 1)), f"steps {steps[:3]}..{steps[-3:]} are not 1..{len(steps)}"
print(f"{sys.argv[1]}: {len(steps)} whole records, steps 1..{len(steps)}")
EOF
}

# whole_events DIR: every event file is a sequence of whole TFRecords
whole_events() {
    "$PY" - "$1" <<'EOF'
import glob, struct, sys
files = glob.glob(sys.argv[1] + "/events.out.tfevents.*")
assert files, "no event file"
for f in files:
    b = open(f, "rb").read()
    off = n = 0
    while off < len(b):
        assert off + 12 <= len(b), f"{f}: a torn record header at byte {off}"
        (length,) = struct.unpack("<Q", b[off:off + 8])
        assert off + 12 + length + 4 <= len(b), f"{f}: a torn record at byte {off}"
        off += 12 + length + 4
        n += 1
    print(f"{f}: {n} whole records")
EOF
}

# whole_csv DIR: every file a header and whole integer,number rows
whole_csv() {
    "$PY" - "$1" <<'EOF'
import glob, re, sys
files = glob.glob(sys.argv[1] + "/*.csv")
assert files, "no csv file"
rows = 0
for f in files:
    b = open(f, "rb").read().decode()
    assert b == "" or b.endswith("\n"), f"{f}: a torn last row"
    lines = b.splitlines()
    assert not lines or lines[0].startswith("step,"), f"{f}: no header"
    for l in lines[1:]:
        assert re.fullmatch(r"-?\d+,[-+0-9.eEnaif]+", l), f"{f}: a bad row {l!r} at byte {b.find(l)} of {len(b)}: {b[max(0, b.find(l) - 40):b.find(l) + 40]!r}"
    rows += len(lines[1:])
print(f"{len(files)} csv files, {rows} whole rows")
EOF
}

# train_on NP NAME ARGS...: a long run (it must fill the disk), status in $RC
train_on() {
    np=$1; name=$2; shift 2
    (cd "$FB_SRCDIR" && OMP_NUM_THREADS=1 timeout 300 $MPIEXEC -n "$np" "$FABULA" train $CKPT_ARGS "$@") \
        >"$SCRATCH/$name.out" 2>&1
    RC=$?
    grep "error" "$SCRATCH/$name.out" | head -n 2
}
no_crash() { ! grep -q "(signal [0-9]\|Segmentation\|BAD TERMINATION" "$SCRATCH/$1.out"; }

for np in 1 2; do
    fresh 256k
    train_on $np metrics$np --run-dir "$FS/run" --steps 5000 --set checkpoint.save_interval=-1
    check "metrics.jsonl on a full disk, $np rank(s): exit 4 (got $RC), one message naming the file, no crash" \
        '[ $RC -eq 4 ] && [ "$(grep -c "fabula: error:" "$SCRATCH/metrics$np.out")" -eq 1 ] &&
         grep -q "error: $FS/run/metrics.jsonl: write: No space left on device" "$SCRATCH/metrics$np.out" && no_crash metrics$np'
    check "... every record before the failure is whole, steps 1..k without a gap" 'whole_jsonl "$FS/run/metrics.jsonl"'
done

fresh 1m
train_on 1 tb --run-dir "$SCRATCH/tb" --steps 5000 --set checkpoint.save_interval=-1 --set tensorboard.enabled=true \
    --set tensorboard.output_path="$FS/tb"
check "TensorBoard events on a full disk: exit 4 (got $RC) naming the event file" \
    '[ $RC -eq 4 ] && grep -q "error: $FS/tb/fabula/events.out.tfevents.*: write: No space left on device" "$SCRATCH/tb.out" &&
     no_crash tb'
check "... the event file holds whole records only" 'whole_events "$FS/tb/fabula"'
check "... jobs.jsonl (on another disk) records the failure: exit 4 and the message" \
    'tail -n 1 "$SCRATCH/tb/jobs.jsonl" | grep -q "\"state\":\"failed\".*\"exit_code\":4,.*No space left on device"'

fresh 1m
train_on 1 csv --run-dir "$SCRATCH/csv" --steps 5000 --set checkpoint.save_interval=-1 --set csv_monitor.enabled=true \
    --set csv_monitor.output_path="$FS/csv"
check "csv_monitor on a full disk: exit 4 (got $RC) naming a CSV file" \
    '[ $RC -eq 4 ] && grep -q "error: $FS/csv/fabula/.*\.csv: write: No space left on device" "$SCRATCH/csv.out" && no_crash csv'
check "... every CSV file holds a header and whole rows" 'whole_csv "$FS/csv/fabula"'

# the log after a failure: checkpoints every step on another disk, metrics
# on the small one; the resume (disk grown) continues at the checkpoint
fresh 128k
train_on 1 gap --run-dir "$FS/run" --steps 5000 --set checkpoint.save_interval=1 --set checkpoint.keep_last=2 \
    --set checkpoint.dir="$SCRATCH/gap-ckpt"
k=$(wc -l <"$FS/run/metrics.jsonl")
check "metrics on a full disk, checkpoints elsewhere: exit 4 (got $RC) after $k whole records" \
    '[ $RC -eq 4 ] && [ "$k" -gt 0 ] && whole_jsonl "$FS/run/metrics.jsonl"'
mount -o remount,size=4m "$FS"
train_on 1 gap2 --run-dir "$FS/run" --steps $((k + 20)) --set checkpoint.save_interval=1 --set checkpoint.keep_last=2 \
    --set checkpoint.dir="$SCRATCH/gap-ckpt"
check "... the resume continues the log: steps 1..$((k + 20)), no gap, no repeat (exit $RC)" \
    '[ $RC -eq 0 ] && whole_jsonl "$FS/run/metrics.jsonl" && [ "$(wc -l <"$FS/run/metrics.jsonl")" -eq $((k + 20)) ]'

# export and report into a full directory
train_on 1 src --run-dir "$SCRATCH/src" --steps 2 --set checkpoint.save_interval=1
CK="$SCRATCH/src/checkpoints/step-00000002.h5"
fresh 64k
timeout 120 "$FABULA" export --checkpoint "$CK" --output "$FS/export" --allow-dropless-inference >"$SCRATCH/export.out" 2>&1
RC=$?
grep "error" "$SCRATCH/export.out" | head -n 2
check "export into a full directory: exit 4 (got $RC) naming the file, no partial file left" \
    '[ $RC -eq 4 ] && grep -q "error: $FS/export/.*No space left on device" "$SCRATCH/export.out" &&
     [ -z "$(ls -A "$FS/export" 2>/dev/null | grep "partial\|\.tmp\.")" ] && no_crash export'
fresh 16k
timeout 120 "$FABULA" report "$SCRATCH/src" --output "$FS/report" >"$SCRATCH/report.out" 2>&1
RC=$?
grep "error" "$SCRATCH/report.out" | head -n 2
check "report into a full directory: exit 4 (got $RC) naming the file, no partial file left" \
    '[ $RC -eq 4 ] && grep -q "error: $FS/report/.*No space left on device" "$SCRATCH/report.out" &&
     [ -z "$(ls -A "$FS/report" 2>/dev/null | grep "\.tmp\.")" ] && no_crash report'
finish
