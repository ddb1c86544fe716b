#!/usr/bin/env bash
# Handshake-bound HTTPS: TLS handshakes per client CPU-second, archbench beside ApacheBench,
# measured in the same run against the same nginx.
#
#   bench/tls-handshakes.sh                 # 3 interleaved rounds of 5,000 requests, -c10
#   ROUNDS=5 REQUESTS=20000 bench/tls-handshakes.sh
#
# Needs: nginx, ab, openssl, python3, taskset, GNU time (Debian: nginx apache2-utils openssl
# python3 util-linux time). Loopback only. nginx (one worker, an ECDSA P-256 certificate, a
# session cache) runs on CPU 0, the client on the last CPU. Every request opens a connection:
# ab makes a full handshake each time (it keeps no session), so do `archbench ab` and
# `archbench run --no-keepalive --tls-resume off`; `--tls-resume on` resumes sessions, which ab
# cannot, and is shown for what a resuming client costs. Prints per client: handshakes per
# second, client CPU seconds, handshakes per client CPU-second and the ratio to ab's. Writes
# all of it, with the raw figures, to bench/results/tls-handshakes-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-5000}
CONNS=${CONNS:-10}
for tool in nginx ab openssl python3 taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "tls-handshakes: $tool is not installed" >&2; exit 2; }
done

cargo build --release --quiet
AB=./target/release/archbench
result_start tls-handshakes "ROUNDS=$ROUNDS REQUESTS=$REQUESTS CONNS=$CONNS"
echo "tools: $(nginx -v 2>&1), $(ab -V | head -1), $(openssl version)"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/www" && echo "handshake" > "$WORK/www/index.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat > "$WORK/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  ssl_session_cache shared:SSL:10m;
  server {
    listen 127.0.0.1:$PORT ssl;
    ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem;
    root $WORK/www;
  }
}
EOF
taskset -c 0 nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGINX=$!
trap 'kill $NGINX 2>/dev/null; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
URL="https://127.0.0.1:$PORT/"
for _ in $(seq 1 200); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.1)" 2>/dev/null && break
  sleep 0.05
done

run() { # label cmd... -> one JSON line: CPU, handshakes, seconds
  local label=$1; shift
  taskset -c "$LAST_CPU" python3 bench/measure.py "$@" | LABEL="$label" python3 -c '
import json, os, re, sys
m = json.loads(sys.stdin.read())
out = m.pop("output")
if out.lstrip().startswith("{"):
    d = json.loads(out)
    t = d["tls"]
    m["handshakes"] = t["full_handshakes"] + t["resumed_handshakes"]
    m["seconds"] = d["totals"]["elapsed_s"]
    m["negotiated"] = " ".join(str(t.get(k)) for k in ("version", "cipher", "group"))
else:  # the ab layout, ours and ab'"'"'s: one full handshake per complete request
    m["handshakes"] = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    m["seconds"] = float(re.search(r"Time taken for tests:\s+([\d.]+)", out).group(1))
m["label"] = os.environ["LABEL"]
print(json.dumps(m))'
}

echo "nginx: 1 worker on CPU 0 ($URL, ECDSA P-256); client on CPU $LAST_CPU; -n$REQUESTS -c$CONNS; $ROUNDS rounds"
RESULTS=$WORK/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  run "ab" ab -q -n "$REQUESTS" -c "$CONNS" "$URL" >> "$RESULTS"
  run "archbench ab" "$AB" ab -q -n "$REQUESTS" -c "$CONNS" "$URL" >> "$RESULTS"
  run "run, resume off" "$AB" run "$URL" -k --no-keepalive --tls-resume off -n "$REQUESTS" \
    -c "$CONNS" -t1 -q -o json >> "$RESULTS"
  run "run, resume on" "$AB" run "$URL" -k --no-keepalive --tls-resume on -n "$REQUESTS" \
    -c "$CONNS" -t1 -q -o json >> "$RESULTS"
  echo "  round $round done"
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = list(dict.fromkeys(r["label"] for r in rows))
def per_cpu(r): return r["handshakes"] / max(r["user_s"] + r["sys_s"], 1e-9)
ab = statistics.median(per_cpu(r) for r in rows if r["label"] == "ab")
print()
print(f"{'':18} {'handshakes/s':>13} {'client CPU s':>13} {'per client CPU-s':>17} {'vs ab':>7}")
for label in labels:
    rs = [r for r in rows if r["label"] == label]
    med = lambda f: statistics.median(f(r) for r in rs)
    print(f"{label:18} {med(lambda r: r['handshakes'] / r['seconds']):13.0f} "
          f"{med(lambda r: r['user_s'] + r['sys_s']):13.2f} {med(per_cpu):17.0f} {med(per_cpu) / ab:6.2f}x")
print("goal: handshakes per client CPU-second >= ab's (full handshakes: archbench ab, run with resume off)")
print("negotiated (archbench run): " + ", ".join(sorted({r["negotiated"] for r in rows if "negotiated" in r})))
PY
result_raw "$RESULTS"

