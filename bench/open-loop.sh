#!/usr/bin/env bash
# archbench's open loop: client CPU per request against its closed loop, and how late sends
# go out, at 1k, 10k and 30k requests per second against one nginx worker.
#
#   bench/open-loop.sh                  # 3 interleaved rounds of 5 s per setting
#   ROUNDS=5 DURATION=10s bench/open-loop.sh
#   WRK2=/path/to/wrk2/wrk bench/open-loop.sh   # also wrk2 (not packaged; build it yourself)
#
# Needs: nginx, python3, taskset, GNU time (Debian: nginx python3 util-linux time). Loopback
# only. nginx (`archbench serve --nginx bench --workers 1`) runs on CPU 0, the client on the
# last CPU. Prints per setting: achieved req/s, client CPU (% of a core, µs per request, and
# the ratio to the closed loop's µs per request), requests per sleep, and send lateness
# p50/p99/max from the result's `pacing` (wrk2 reports none).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
RATES=${RATES:-"1000 10000 30000"}
for tool in nginx python3 taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "open-loop: $tool is not installed" >&2; exit 2; }
done

cargo build --release --quiet
AB=./target/release/archbench
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
taskset -c 0 "$AB" serve --nginx bench --workers 1 > "$WORK/serve.out" &
SERVE=$!
# The server ends by SIGINT (status 130): under set -e that status would become the script's.
trap 'kill -INT $SERVE 2>/dev/null; wait $SERVE 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$WORK/serve.out") || { echo "open-loop: nginx did not start" >&2; exit 1; }

run() { # label cmd... -> one JSON line
  local label=$1; shift
  taskset -c "$LAST_CPU" python3 bench/measure.py "$@" | LABEL="$label" python3 -c '
import json, os, re, sys
m = json.loads(sys.stdin.read())
out = m.pop("output")
if out.lstrip().startswith("{"):
    d = json.loads(out)
    m["requests"] = d["totals"]["requests"]
    p = d.get("pacing")
    if p:
        l = p["lateness"]
        m["late"] = [l["p50_us"], l["p99_us"], l["max_us"]]
else:  # wrk2 layout
    m["requests"] = int(re.search(r"(\d+) requests in", out).group(1))
m["label"] = os.environ["LABEL"]
print(json.dumps(m))'
}

echo "nginx: 1 worker on CPU 0 ($URL); client on CPU $LAST_CPU; -c$CONNS -t1 -d$DURATION; $ROUNDS rounds"
RESULTS=$WORK/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  run closed "$AB" run "$URL" -c"$CONNS" -t1 -d"$DURATION" -q -o json >> "$RESULTS"
  for r in $RATES; do
    run "open $r" "$AB" run "$URL" -c"$CONNS" -t1 -d"$DURATION" --rate "$r" -q -o json >> "$RESULTS"
    if [ -n "${WRK2:-}" ]; then
      run "wrk2 $r" "$WRK2" -t1 -c"$CONNS" -d"$DURATION" -R"$r" "$URL" >> "$RESULTS"
    fi
  done
  echo "  round $round done"
done

python3 - "$RESULTS" "$DURATION" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2].rstrip("s"))
labels = list(dict.fromkeys(r["label"] for r in rows))
def us_per_req(r): return (r["user_s"] + r["sys_s"]) * 1e6 / max(r["requests"], 1)
closed = statistics.median(us_per_req(r) for r in rows if r["label"] == "closed")
print()
print(f"{'':12} {'req/s':>9} {'client CPU':>11} {'µs/req':>8} {'vs closed':>10} {'req/sleep':>10} {'lateness p50/p99/max µs':>26}")
for label in labels:
    rs = [r for r in rows if r["label"] == label]
    med = lambda f: statistics.median(f(r) for r in rs)
    late = ""
    if all("late" in r for r in rs):
        late = "/".join(str(int(statistics.median(r["late"][i] for r in rs))) for i in range(3))
    print(f"{label:12} {med(lambda r: r['requests'] / secs):9.0f} "
          f"{med(lambda r: (r['user_s'] + r['sys_s']) * 100 / secs):10.1f}% "
          f"{med(us_per_req):8.2f} {med(us_per_req) / closed:9.2f}x "
          f"{med(lambda r: r['requests'] / max(r['sleeps'], 1)):10.1f} {late:>26}")
print("targets: open 1000 <= 3% of a core; CPU per request <= 1.3x closed; p99 lateness <= 200 µs at 10000")
PY
