#!/usr/bin/env python3
"""Run a command under GNU time; print its user CPU s, system CPU s, peak RSS (KiB),
voluntary context switches (each one a sleep and a wake-up) and wall seconds as one JSON
line, with the command's output.

GNU time, not this script's own getrusage: a child forked from Python keeps Python's RSS
high-water mark through exec, so RUSAGE_CHILDREN never reports less than Python's ~14 MiB.
"""
import json
import subprocess
import sys

MARK = "@@measure@@"
proc = subprocess.run(
    ["/usr/bin/time", "-f", MARK + " %U %S %M %w %e"] + sys.argv[1:],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
)
mark = [l for l in proc.stderr.splitlines() if l.startswith(MARK)][-1].split()
print(json.dumps({
    "rc": proc.returncode,
    "user_s": float(mark[1]),
    "sys_s": float(mark[2]),
    "maxrss_kib": int(mark[3]),
    "sleeps": int(mark[4]),
    "wall_s": float(mark[5]),
    "output": proc.stdout,
}))
