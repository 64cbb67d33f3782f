#!/bin/sh
# Every relative Markdown link and #anchor in the tracked docs resolves
# (tools/check_links.py); run by make check and make check-fast. It lists
# the tracked files with git, so a tree that is not a checkout skips (77).
cd "${FB_SRCDIR:-.}" || exit 99
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
exec "${PYTHON:-python3}" tools/check_links.py
