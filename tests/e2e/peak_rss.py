#!/usr/bin/env python3
"""peak_rss.py OUT CMD...: runs CMD with stdout into OUT and stderr passed
through, then prints the peak resident set size of CMD and what it started
(KiB, getrusage's ru_maxrss of the children) on a line of its own, and
exits with CMD's status. Debian 12 lacks /usr/bin/time unless the `time`
package is installed, which tools/install-deps.sh does not list."""
import resource
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit("usage: peak_rss.py OUT CMD...")
with open(sys.argv[1], "wb") as out:
    rc = subprocess.call(sys.argv[2:], stdout=out)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc if rc >= 0 else 128 - rc)
