#!/usr/bin/env bash
# archbench vs wrk on the same nginx, measured in the same run.
#
#   bench/vs-wrk.sh            # 3 interleaved rounds of -c50 -d10s, then peak RSS at -c500/-c10000
#   ROUNDS=5 DURATION=20s bench/vs-wrk.sh
#   SCRIPT=tests/scripts/counter.lua bench/vs-wrk.sh   # both run the same wrk Lua script (-s);
#                                                     # the peak-RSS part is left out
#   ARCHBENCH=target/release/archbench bench/vs-wrk.sh  # a binary already built
#
# Needs: nginx, wrk, python3, taskset, GNU time (Debian: nginx wrk python3 util-linux time).
# Loopback only.
# nginx runs one worker pinned to CPU 0, the client is pinned to the last CPU, so the two do
# not compete for a core. Prints, per tool: median req/s, client CPU seconds (user+sys) per
# round, requests per client CPU-second, requests per client sleep (voluntary context switch),
# and the ratio archbench/wrk. Writes all of it, with the raw figures, to
# bench/results/vs-wrk-DATE.txt (vs-wrk-SCRIPTNAME-DATE.txt with a script).
# archbench runs as `archbench wrk` with wrk's own flags, so nginx receives byte-identical
# requests from both (`archbench run` adds User-Agent and Accept, which nginx parses).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
for tool in nginx wrk python3 taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "vs-wrk: $tool is not installed" >&2; exit 2; }
done

if [ -n "${ARCHBENCH:-}" ]; then
  AB=$ARCHBENCH
else
  cargo build --release --quiet
  AB=./target/release/archbench
fi
# The same script for both tools, passed as wrk takes it.
SCRIPT_ARGS=()
[ -n "${SCRIPT:-}" ] && SCRIPT_ARGS=(-s "$SCRIPT")
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

NAME=vs-wrk${SCRIPT:+-$(basename "$SCRIPT" .lua)}
result_start "$NAME" "ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS${SCRIPT:+ SCRIPT=$SCRIPT}${ARCHBENCH:+ ARCHBENCH=$ARCHBENCH}"
echo "tools: $(nginx -v 2>&1), $(wrk -v 2>&1 | head -1 || true)"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
# The library's nginx (one worker, access log off, room for 20,000 connections), on CPU 0.
taskset -c 0 "$AB" serve --nginx bench --workers 1 > "$WORK/serve.out" &
SERVE=$!
# The server ends by SIGINT (status 130): under set -e that status would become the script's.
trap 'kill -INT $SERVE 2>/dev/null; wait $SERVE 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$WORK/serve.out") || { echo "vs-wrk: nginx did not start" >&2; exit 1; }

run() { # tool conns duration -> one JSON line with requests added
  local tool=$1 c=$2 d=$3
  local cmd
  if [ "$tool" = wrk ]; then
    cmd=(wrk -t1 -c"$c" -d"$d" ${SCRIPT_ARGS[@]+"${SCRIPT_ARGS[@]}"} "$URL")
  else
    cmd=("$AB" wrk -t1 -c"$c" -d"$d" ${SCRIPT_ARGS[@]+"${SCRIPT_ARGS[@]}"} "$URL")
  fi
  taskset -c "$LAST_CPU" python3 bench/measure.py "${cmd[@]}" | python3 -c '
import json, re, sys
m = json.loads(sys.stdin.read())
out = m["output"]
m["requests"] = int(re.search(r"(\d+) requests in", out).group(1))   # both print the wrk layout
del m["output"]
print(json.dumps(m))'
}

echo "nginx: 1 worker on CPU 0, access log off; clients on CPU $LAST_CPU; -c$CONNS -d$DURATION, $ROUNDS rounds${SCRIPT:+, script $SCRIPT}"
RESULTS=$WORK/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  for tool in archbench wrk; do
    line=$(run "$tool" "$CONNS" "$DURATION")
    echo "{\"tool\":\"$tool\",\"round\":$round,\"m\":$line}" >> "$RESULTS"
    echo "  round $round $tool: $line"
  done
done

if [ -z "${SCRIPT:-}" ]; then
echo "peak RSS:"
for c in 500 10000; do
  for tool in archbench wrk; do
    line=$(run "$tool" "$c" 5s)
    echo "{\"tool\":\"$tool\",\"rss_conns\":$c,\"m\":$line}" >> "$RESULTS"
  done
done
fi

python3 - "$RESULTS" "$DURATION" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2].rstrip("s"))
def summary(tool):
    rs = [r["m"] for r in rows if r["tool"] == tool and "round" in r]
    rps = statistics.median(r["requests"] / secs for r in rs)
    cpu = [r["user_s"] + r["sys_s"] for r in rs]
    per_cpu = statistics.median(r["requests"] / (r["user_s"] + r["sys_s"]) for r in rs)
    per_sleep = statistics.median(r["requests"] / max(r["sleeps"], 1) for r in rs)
    return rps, cpu, per_cpu, per_sleep
print()
print(f"{'':10} {'median req/s':>13} {'client CPU s (per round)':>28} {'req per client CPU-s':>22} {'req per sleep':>14}")
res = {}
for tool in ("archbench", "wrk"):
    rps, cpu, per_cpu, per_sleep = summary(tool)
    res[tool] = (rps, per_cpu)
    print(f"{tool:10} {rps:13.0f} {' '.join(f'{c:.2f}' for c in cpu):>28} {per_cpu:22.0f} {per_sleep:14.1f}")
print(f"ratio archbench/wrk: req/s {res['archbench'][0]/res['wrk'][0]:.2f}, "
      f"requests per client CPU-second {res['archbench'][1]/res['wrk'][1]:.2f} (target >= 1.25; with a script >= 1.0)")
if not any("rss_conns" in r for r in rows):
    sys.exit(0)
print()
print(f"{'peak RSS':10} {'-c500':>12} {'-c10000':>12}")
for tool in ("archbench", "wrk"):
    cells = []
    for c in (500, 10000):
        r = [x["m"] for x in rows if x["tool"] == tool and x.get("rss_conns") == c][0]
        cells.append(f"{r['maxrss_kib']/1024:.1f} MiB")
    print(f"{tool:10} {cells[0]:>12} {cells[1]:>12}")
print("targets: archbench <= 16 MiB at -c500, <= 64 MiB at -c10000")
PY
result_raw "$RESULTS"

