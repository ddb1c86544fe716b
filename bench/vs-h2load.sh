#!/usr/bin/env bash
# archbench vs h2load (nghttp2) on the same h2c nginx, measured in the same run.
#
#   bench/vs-h2load.sh                 # -c50, -m 1/10/100, 3 interleaved rounds of -D 10
#   ROUNDS=5 DURATION=20 STREAMS="1 10" bench/vs-h2load.sh
#
# Needs: nginx (with http2), h2load (Debian: nghttp2-client), python3, taskset, GNU time.
# Loopback only. nginx runs one worker pinned to CPU 0 (h2c on a listener of its own, access log
# off), the client is pinned to the last CPU. archbench runs as `archbench h2load` with
# h2load's own flags, so both send the same requests over the same number of streams. Prints,
# per -m: median req/s, client CPU seconds per round, requests per client CPU-second and the
# ratio archbench/h2load, and each tool's client CPU as a share of its core; then peak RSS at
# -c1000 -m100. Writes all of it, with the raw figures, to bench/results/vs-h2load-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-"1 10 100"}
for tool in nginx h2load python3 taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "vs-h2load: $tool is not installed" >&2; exit 2; }
done

cargo build --release --quiet
AB=./target/release/archbench
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

result_start vs-h2load "ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS STREAMS='$STREAMS'"
echo "tools: $(nginx -v 2>&1), $(h2load --version)"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
PORT=${PORT:-18471}
mkdir -p "$WORK/www" "$WORK/logs"
echo '<html>welcome</html>' > "$WORK/www/index.html"
cat > "$WORK/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_requests 1000000;
  http2_max_concurrent_streams 128;
  server {
    listen 127.0.0.1:$PORT http2;
    root $WORK/www;
  }
}
CONF
taskset -c 0 nginx -p "$WORK" -c "$WORK/nginx.conf" &
NGINX=$!
trap 'kill $NGINX 2>/dev/null; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.05
done
URL="http://127.0.0.1:$PORT/"

run() { # tool conns streams duration -> one JSON line with the requests done added
  local tool=$1 c=$2 m=$3 d=$4
  local cmd
  if [ "$tool" = h2load ]; then
    cmd=(h2load -t1 -c"$c" -m"$m" -D"$d" "$URL")
  else
    cmd=("$AB" h2load -t1 -c"$c" -m"$m" -D"$d" "$URL")
  fi
  taskset -c "$LAST_CPU" python3 bench/measure.py "${cmd[@]}" | python3 -c '
import json, re, sys
m = json.loads(sys.stdin.read())
out = m["output"]
m["requests"] = int(re.search(r"(\d+) done", out).group(1))   # both print the h2load layout
m["succeeded"] = int(re.search(r"(\d+) succeeded", out).group(1))
del m["output"]
print(json.dumps(m))'
}

echo "nginx: 1 worker on CPU 0, h2c, access log off; clients on CPU $LAST_CPU; -c$CONNS -D$DURATION, $ROUNDS rounds per -m"
RESULTS=$WORK/results.jsonl
for m in $STREAMS; do
  for round in $(seq 1 "$ROUNDS"); do
    for tool in archbench h2load; do
      line=$(run "$tool" "$CONNS" "$m" "$DURATION")
      echo "{\"tool\":\"$tool\",\"m\":$m,\"round\":$round,\"r\":$line}" >> "$RESULTS"
      echo "  -m $m round $round $tool: $line"
    done
  done
done
for tool in archbench h2load; do
  line=$(run "$tool" 1000 100 5)
  echo "{\"tool\":\"$tool\",\"rss\":true,\"r\":$line}" >> "$RESULTS"
done

python3 - "$RESULTS" "$DURATION" "$STREAMS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2])
print()
print(f"{'':16} {'median req/s':>13} {'client CPU s (per round)':>28} {'req per client CPU-s':>22} {'% of a core':>12}")
for m in sys.argv[3].split():
    res = {}
    for tool in ("archbench", "h2load"):
        rs = [r["r"] for r in rows if r["tool"] == tool and r.get("m") == int(m)]
        rps = statistics.median(r["requests"] / secs for r in rs)
        cpu = [r["user_s"] + r["sys_s"] for r in rs]
        per_cpu = statistics.median(r["requests"] / (r["user_s"] + r["sys_s"]) for r in rs)
        res[tool] = (rps, per_cpu)
        core = statistics.median(cpu) * 100 / secs
        print(f"-m {m:<4} {tool:10} {rps:13.0f} {' '.join(f'{c:.2f}' for c in cpu):>28} {per_cpu:22.0f} {core:11.0f}%")
    print(f"-m {m}: ratio archbench/h2load: req/s {res['archbench'][0]/res['h2load'][0]:.2f}, "
          f"requests per client CPU-second {res['archbench'][1]/res['h2load'][1]:.2f} (target >= 1.2)")
print()
for tool in ("archbench", "h2load"):
    r = [x["r"] for x in rows if x["tool"] == tool and x.get("rss")][0]
    print(f"peak RSS at -c1000 -m100: {tool:10} {r['maxrss_kib']/1024:.1f} MiB")
print("target: archbench's no more than h2load's")
PY
result_raw "$RESULTS"

