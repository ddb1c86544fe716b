#!/usr/bin/env bash
# System calls per request: archbench beside wrk (HTTP/1.1) and beside h2load (h2c), on the
# same nginx, counted by the kernel's syscall tracepoints (perf stat) over one run of each.
#
#   bench/syscalls.sh                  # -c50, h2load -m10, runs of 3 s
#   DURATION=5 CONNS=100 STREAMS=100 bench/syscalls.sh
#
# Needs: nginx (with http2), wrk, h2load, perf with syscall tracepoints (root, or
# kernel.perf_event_paranoid <= -1), python3, taskset (Debian: nginx wrk nghttp2-client
# linux-perf python3 util-linux). Loopback only. nginx runs one worker pinned to CPU 0 with
# an HTTP/1.1 and an h2c listener, access log off; the clients are pinned to the last CPU.
# archbench runs as `archbench wrk` and `archbench h2load` with the peer's own flags, so
# nginx sees the same requests. Prints, per client: requests, and per request the writes
# (write, writev, sendto, sendmsg), the reads (read, readv, recvfrom, recvmsg), epoll_wait
# (epoll_wait, epoll_pwait, epoll_pwait2) and epoll_ctl; and requests per write. Writes all
# of it, with the raw counts, to bench/results/syscalls-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

DURATION=${DURATION:-3}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-10}
for tool in nginx wrk h2load perf python3 taskset; do
  command -v "$tool" >/dev/null || { echo "syscalls: $tool is not installed" >&2; exit 2; }
done
perf stat -e syscalls:sys_enter_write -o /dev/null -- true 2>/dev/null ||
  { echo "syscalls: perf cannot read syscall tracepoints here (run as root)" >&2; exit 2; }

cargo build --release --quiet
AB=./target/release/archbench
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
result_start syscalls "DURATION=$DURATION CONNS=$CONNS STREAMS=$STREAMS"
echo "tools: $(nginx -v 2>&1), $(wrk -v 2>&1 | head -1 || true), $(h2load --version), $(perf --version)"

WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
H2PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/www"
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
  server { listen 127.0.0.1:$PORT; root $WORK/www; }
  server { listen 127.0.0.1:$H2PORT http2; root $WORK/www; }
}
CONF
taskset -c 0 nginx -p "$WORK" -c "$WORK/nginx.conf" &
NGINX=$!
trap 'kill $NGINX 2>/dev/null; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
for p in $PORT $H2PORT; do
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
    sleep 0.05
  done
done

EVENTS=""
for e in write writev sendto sendmsg read readv recvfrom recvmsg epoll_wait epoll_pwait epoll_pwait2 epoll_ctl; do
  EVENTS="$EVENTS${EVENTS:+,}syscalls:sys_enter_$e"
done

RESULTS=$WORK/results.jsonl
count() { # label cmd... -> one JSON line: requests and each syscall's count
  local label=$1; shift
  taskset -c "$LAST_CPU" perf stat -x, -e "$EVENTS" -o "$WORK/stat.csv" -- "$@" > "$WORK/out.txt" 2>/dev/null
  LABEL="$label" python3 - "$WORK/stat.csv" "$WORK/out.txt" <<'PY' >> "$RESULTS"
import json, os, re, sys
counts = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[2].startswith("syscalls:sys_enter_"):
        counts[f[2][len("syscalls:sys_enter_"):]] = int(f[0]) if f[0].isdigit() else 0
out = open(sys.argv[2]).read()
m = re.search(r"(\d+) requests in", out) or re.search(r"(\d+) done", out)
print(json.dumps({"label": os.environ["LABEL"], "requests": int(m.group(1)), "syscalls": counts}))
PY
  echo "  $label done"
}

URL="http://127.0.0.1:$PORT/"
H2URL="http://127.0.0.1:$H2PORT/"
echo "nginx: 1 worker on CPU 0, access log off; clients on CPU $LAST_CPU; -c$CONNS, ${DURATION} s each"
count "archbench wrk" "$AB" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL"
count "wrk" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL"
count "archbench h2load -m$STREAMS" "$AB" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$H2URL"
count "h2load -m$STREAMS" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$H2URL"

python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
groups = {
    "writes": ["write", "writev", "sendto", "sendmsg"],
    "reads": ["read", "readv", "recvfrom", "recvmsg"],
    "epoll_wait": ["epoll_wait", "epoll_pwait", "epoll_pwait2"],
    "epoll_ctl": ["epoll_ctl"],
}
print()
print(f"{'per request':28} {'requests':>10} {'writes':>8} {'reads':>8} {'epoll_wait':>11} {'epoll_ctl':>10} {'req/write':>10}")
for r in rows:
    n = max(r["requests"], 1)
    g = {k: sum(r["syscalls"].get(c, 0) for c in v) for k, v in groups.items()}
    print(f"{r['label']:28} {r['requests']:10} {g['writes'] / n:8.3f} {g['reads'] / n:8.3f} "
          f"{g['epoll_wait'] / n:11.3f} {g['epoll_ctl'] / n:10.3f} {n / max(g['writes'], 1):10.2f}")
print("(each call is counted where the process entered it, whether it moved data or said EAGAIN)")
PY
result_raw "$RESULTS"
