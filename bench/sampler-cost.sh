#!/usr/bin/env bash
# What watching a server costs: the CPU time of archbench's sampler thread (250 ms samples of
# /proc for the watched process and its children), as the result records it
# (`servers[].sampler_cpu_s`), over the time it sampled, while a load runs against nginx.
#
#   bench/sampler-cost.sh              # 3 runs of -d10s -c10 -t1
#   ROUNDS=5 DURATION=20s bench/sampler-cost.sh
#
# Needs: nginx, python3, taskset (Debian: nginx python3 util-linux). Loopback only. nginx
# (`archbench serve --nginx bench --workers 1`) runs on CPU 0, archbench on the last CPU.
# Prints per run the sampler's CPU seconds, the seconds sampled, the samples and its share of
# a core; then the median. Writes all of it, with the raw figures, to
# bench/results/sampler-cost-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
for tool in nginx python3 taskset; do
  command -v "$tool" >/dev/null || { echo "sampler-cost: $tool is not installed" >&2; exit 2; }
done

cargo build --release --quiet
AB=./target/release/archbench
result_start sampler-cost "ROUNDS=$ROUNDS DURATION=$DURATION"
echo "tools: $(nginx -v 2>&1)"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
taskset -c 0 "$AB" serve --nginx bench --workers 1 > "$WORK/serve.out" &
SERVE=$!
# The server ends by SIGINT (status 130): under set -e that status would become the script's.
trap 'kill -INT $SERVE 2>/dev/null; wait $SERVE 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$WORK/serve.out") || { echo "sampler-cost: nginx did not start" >&2; exit 1; }
PID=$(grep -o 'pid [0-9]*' "$WORK/serve.out" | cut -d' ' -f2)

echo "nginx: 1 worker on CPU 0 ($URL, pid $PID); archbench on CPU $LAST_CPU: run -c10 -t1 -d$DURATION --watch web=pid:$PID"
RESULTS=$WORK/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  taskset -c "$LAST_CPU" "$AB" run "$URL" -c10 -t1 -d"$DURATION" --watch "web=pid:$PID" -q -o json |
    python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["servers"][0]
print(json.dumps({"sampler_cpu_s": s["sampler_cpu_s"], "sampled_s": s["sampled_s"],
                  "samples": s["samples"], "requests": d["totals"]["requests"]}))' >> "$RESULTS"
  echo "  round $round done"
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"{'sampler CPU s':>14} {'sampled s':>10} {'samples':>8} {'% of a core':>12}")
for r in rows:
    print(f"{r['sampler_cpu_s']:14.4f} {r['sampled_s']:10.2f} {r['samples']:8} {100 * r['sampler_cpu_s'] / r['sampled_s']:11.3f}%")
share = statistics.median(100 * r["sampler_cpu_s"] / r["sampled_s"] for r in rows)
print(f"median: {share:.3f}% of a core")
PY
result_raw "$RESULTS"
