#!/usr/bin/env python3
"""Run a command; print its user CPU s, system CPU s and peak RSS (KiB) as one JSON line.

Used by bench/*.sh so both tools are measured by the same means (getrusage of the child).
"""
import json
import resource
import subprocess
import sys

proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "rc": proc.returncode,
    "user_s": usage.ru_utime,
    "sys_s": usage.ru_stime,
    "maxrss_kib": usage.ru_maxrss,
    "output": proc.stdout,
}))
