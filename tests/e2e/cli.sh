#!/bin/sh
# The command line: help, version, unknown commands and options.
. "$FB_SRCDIR/tests/e2e/lib.sh"

"$FABULA" --help >"$SCRATCH/h.txt" 2>&1; rc=$?
check "fabula --help exits 0 and lists train" '[ $rc -eq 0 ] && grep -q "train" "$SCRATCH/h.txt"'
"$FABULA" train --help >"$SCRATCH/h.txt" 2>&1; rc=$?
check "fabula train --help exits 0 and documents --set" '[ $rc -eq 0 ] && grep -q -- "--set" "$SCRATCH/h.txt"'
"$FABULA" --version >"$SCRATCH/v.txt" 2>&1; rc=$?
check "fabula --version names the version and HDF5" '[ $rc -eq 0 ] && grep -q "^fabula [0-9]" "$SCRATCH/v.txt" && grep -q HDF5 "$SCRATCH/v.txt"'
"$FABULA" >"$SCRATCH/u.txt" 2>&1; rc=$?
check "no command: usage on stderr, exit 2" '[ $rc -eq 2 ] && grep -q usage "$SCRATCH/u.txt"'
"$FABULA" frobnicate >"$SCRATCH/u.txt" 2>&1; rc=$?
check "unknown command: exit 2 naming it" '[ $rc -eq 2 ] && grep -q frobnicate "$SCRATCH/u.txt"'
"$FABULA" train --no-such-option >"$SCRATCH/u.txt" 2>&1; rc=$?
check "unknown option: exit 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--no-such-option" "$SCRATCH/u.txt"'
finish
