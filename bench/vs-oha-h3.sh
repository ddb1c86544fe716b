#!/usr/bin/env bash
# archbench vs oha over HTTP/3 (QUIC) on the same Caddy, measured in the same run.
#
#   bench/vs-oha-h3.sh                  # -c50, --streams 1 and 10, 3 interleaved rounds of 5 s
#   ROUNDS=5 DURATION=10 STREAMS="1 10 100" bench/vs-oha-h3.sh
#   OHA=/path/to/oha bench/vs-oha-h3.sh # an oha built with its http3 feature
#   CADDY=$(tools/caddy/build) bench/vs-oha-h3.sh   # the newer Caddy instead of Debian's
#
# Needs: caddy (Debian's, HTTP/3 by quic-go), python3, taskset, GNU time, and oha built with
# `--features http3`: without OHA it is built once with `cargo install oha --locked --features
# http3 --root ~/.cache/archbench-bench/oha` (outside the repository; --locked because a
# dependency of its latest resolution wants a newer rustc). Loopback only. Caddy is pinned to
# CPU 0 (access log off), the client to the last CPU. Prints, per --streams: median req/s,
# wall time against the asked duration, client CPU seconds per round, requests per client
# CPU-second and the ratio archbench/oha, and peak RSS; then archbench over HTTP/2 (TLS) against
# the same Caddy beside its HTTP/3: req/s, and the client's and Caddy's CPU per request (from
# /proc/PID/stat, clock ticks). Writes all of it, with the raw
# figures, to bench/results/vs-oha-h3-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-"1 10"}
# CADDY=PATH: another Caddy (e.g. the newer one tools/caddy/build makes), Debian's by default.
CADDY=${CADDY:-caddy}
for tool in "$CADDY" python3 taskset /usr/bin/time openssl; do
  command -v "$tool" >/dev/null || { echo "vs-oha-h3: $tool is not installed" >&2; exit 2; }
done
OHA=${OHA:-}
if [ -z "$OHA" ]; then
  root=${XDG_CACHE_HOME:-$HOME/.cache}/archbench-bench/oha
  if [ ! -x "$root/bin/oha" ]; then
    echo "vs-oha-h3: building oha with its http3 feature into $root (once) ..." >&2
    cargo install oha --locked --features http3 --root "$root" >&2
  fi
  OHA=$root/bin/oha
fi

cargo build --release --quiet
AB=${ARCHBENCH:-./target/release/archbench}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

result_start vs-oha-h3 "ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS STREAMS='$STREAMS'"
echo "tools: caddy $("$CADDY" version), $("$OHA" --version)"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
PORT=${PORT:-18473}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
cat > "$WORK/Caddyfile" <<CONF
{
	admin off
	auto_https off
	storage file_system $WORK/data
	servers {
		protocols h1 h2 h3
	}
}
https://127.0.0.1:$PORT {
	bind 127.0.0.1
	tls $WORK/cert.pem $WORK/key.pem
	respond "<html>welcome</html>" 200
}
CONF
HOME=$WORK XDG_DATA_HOME=$WORK/data XDG_CONFIG_HOME=$WORK/config \
  taskset -c 0 "$CADDY" run --adapter caddyfile --config "$WORK/Caddyfile" 2>"$WORK/caddy.log" &
CADDY_PID=$!
trap 'kill $CADDY_PID 2>/dev/null; wait $CADDY_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do
  grep -q '"serving initial configuration"' "$WORK/caddy.log" && break
  sleep 0.05
done
URL="https://127.0.0.1:$PORT/"

run() { # tool conns streams duration -> one JSON line with requests answered and wall time
  local tool=$1 c=$2 m=$3 d=$4
  local cmd
  if [ "$tool" = oha ]; then
    cmd=("$OHA" --http-version 3 --insecure --no-tui --output-format json -c "$c" -p "$m" -z "${d}s" "$URL")
  elif [ "$tool" = archbench-h2 ]; then
    cmd=("$AB" run --http2 -k -q -o json -t 1 -c "$c" --streams "$m" -d "${d}s" "$URL")
  else
    cmd=("$AB" run --http3 -k -q -o json -t 1 -c "$c" --streams "$m" -d "${d}s" "$URL")
  fi
  local line server_before server_after
  server_before=$(server_cpu_ticks)
  line=$(taskset -c "$LAST_CPU" python3 bench/measure.py "${cmd[@]}")
  server_after=$(server_cpu_ticks)
  SERVER_S=$(( server_after - server_before ))/$(getconf CLK_TCK) TOOL=$tool python3 -c '
import json, os, sys
m = json.loads(sys.stdin.read())
doc = json.loads(m["output"])
if os.environ["TOOL"] == "oha":
    codes = doc.get("statusCodeDistribution", {})
    m["requests"] = sum(int(v) for v in codes.values())
else:
    m["requests"] = doc["totals"]["requests"]
del m["output"]
ticks, hz = os.environ["SERVER_S"].split("/")
m["server_cpu_s"] = int(ticks) / int(hz)
print(json.dumps(m))' <<<"$line"
}

server_cpu_ticks() { # Caddy's user + system CPU so far, in clock ticks (/proc/PID/stat)
  awk '{ print $14 + $15 }' "/proc/$CADDY_PID/stat"
}

echo "caddy: on CPU 0, HTTP/3, access log off; clients on CPU $LAST_CPU; -c$CONNS ${DURATION}s, $ROUNDS rounds per --streams"
RESULTS=$WORK/results.jsonl
for m in $STREAMS; do
  for round in $(seq 1 "$ROUNDS"); do
    for tool in archbench oha archbench-h2; do
      line=$(run "$tool" "$CONNS" "$m" "$DURATION")
      echo "{\"tool\":\"$tool\",\"m\":$m,\"round\":$round,\"r\":$line}" >> "$RESULTS"
      echo "  --streams $m round $round $tool: $line"
    done
  done
done

python3 - "$RESULTS" "$DURATION" "$STREAMS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2])
print()
print(f"{'':18} {'median req/s':>13} {'wall s (asked ' + str(int(secs)) + ')':>18} {'client CPU s':>18} {'req per client CPU-s':>22} {'peak RSS MiB':>13}")
for m in sys.argv[3].split():
    res = {}
    for tool in ("archbench", "oha"):
        rs = [r["r"] for r in rows if r["tool"] == tool and r["m"] == int(m)]
        rps = statistics.median(r["requests"] / secs for r in rs)
        per_cpu = statistics.median(r["requests"] / max(r["user_s"] + r["sys_s"], 0.01) for r in rs)
        walls = " ".join(f"{r['wall_s']:.1f}" for r in rs)
        cpu = " ".join(f"{r['user_s'] + r['sys_s']:.2f}" for r in rs)
        rss = max(r["maxrss_kib"] for r in rs) / 1024
        res[tool] = (rps, per_cpu)
        print(f"--streams {m:<3} {tool:9} {rps:13.0f} {walls:>18} {cpu:>18} {per_cpu:22.0f} {rss:13.1f}")
    print(f"--streams {m}: ratio archbench/oha: req/s {res['archbench'][0]/res['oha'][0]:.2f}, "
          f"requests per client CPU-second {res['archbench'][1]/res['oha'][1]:.2f} (goal >= 2)")
print("req/s is answers over the asked duration for both (oha's own req/s divides by its wall time)")
print()
print("HTTP/3 against HTTP/2 over TLS, archbench against the same Caddy: req/s, and each side's CPU per request")
print(f"{'':22} {'median req/s':>13} {'client µs/req':>14} {'Caddy µs/req':>13}")
for m in sys.argv[3].split():
    med = {}
    for tool, name in (("archbench", "h3"), ("archbench-h2", "h2")):
        rs = [r["r"] for r in rows if r["tool"] == tool and r["m"] == int(m)]
        rps = statistics.median(r["requests"] / secs for r in rs)
        client = statistics.median((r["user_s"] + r["sys_s"]) * 1e6 / max(r["requests"], 1) for r in rs)
        server = statistics.median(r["server_cpu_s"] * 1e6 / max(r["requests"], 1) for r in rs)
        med[name] = (rps, client, server)
        print(f"--streams {m:<3} archbench {name} {rps:13.0f} {client:14.1f} {server:13.1f}")
    h3, h2 = med["h3"], med["h2"]
    print(f"--streams {m}: h3/h2 req/s {h3[0]/h2[0]:.2f} (goal >= 0.5); per request h3 costs "
          f"{h3[2]/h2[2]:.2f}x h2's on the server and {h3[1]/h2[1]:.2f}x on the client")
PY
result_raw "$RESULTS"
