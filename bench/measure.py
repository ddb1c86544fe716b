#!/usr/bin/env python3
"""Run a command under GNU time; print its user CPU s, system CPU s, peak RSS (KiB),
voluntary context switches (each one a sleep and a wake-up) and wall seconds as one JSON
line, with the command's output.

GNU time, not this script's own getrusage: a child forked from Python keeps Python's RSS
high-water mark through exec, so RUSAGE_CHILDREN never reports less than Python's ~14 MiB.
The CPU times, though, come from wait4 on GNU time's process (its own and its child's, to the
microsecond): GNU time prints them in hundredths of a second, a tenth of a run's CPU at 1k
requests per second. GNU time's own share is its start and one wait, under a millisecond.
"""
import json
import os
import subprocess
import sys
import tempfile

MARK = "@@measure@@"
with tempfile.TemporaryFile(mode="w+") as err:
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", MARK + " %U %S %M %w %e"] + sys.argv[1:],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    stderr = err.read()
mark = [l for l in stderr.splitlines() if l.startswith(MARK)][-1].split()
print(json.dumps({
    "rc": proc.returncode,
    "user_s": round(usage.ru_utime, 6),
    "sys_s": round(usage.ru_stime, 6),
    "maxrss_kib": int(mark[3]),
    "sleeps": int(mark[4]),
    "wall_s": float(mark[5]),
    "output": out,
}))
