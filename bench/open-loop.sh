#!/usr/bin/env bash
# archbench's open loop: client CPU per request against its closed loop, and how late sends
# go out, at 1k, 10k and 30k requests per second against one nginx worker; with wrk2, the
# same at wrk2's own schedule error, and the latency each tool reports beside the truth.
#
#   bench/open-loop.sh                  # 3 interleaved rounds of 5 s per setting
#   ROUNDS=5 DURATION=10s bench/open-loop.sh
#   WRK2=/path/to/wrk2/wrk bench/open-loop.sh   # also wrk2, and archbench's ratio to it
#   SLACK=0 bench/open-loop.sh          # archbench with --pacing-slack 0 (default: measured)
#   AB=/path/to/archbench bench/open-loop.sh     # another build of archbench
#
# wrk2 is not packaged: build it outside this repository (nothing of it is committed), e.g.
#   apt-get install -y build-essential libssl-dev zlib1g-dev git
#   git clone https://github.com/giltene/wrk2 /tmp/wrk2 && make -C /tmp/wrk2   # -> /tmp/wrk2/wrk
#
# Needs: nginx, python3, taskset, GNU time (Debian: nginx python3 util-linux time); perf for
# the send patterns and wrk2's schedule error. Loopback only. nginx (`archbench serve --nginx
# bench --workers 1`) runs on CPU 0, the client on the last CPU. Prints per setting: achieved
# req/s, client CPU (% of a core, µs per request, and the ratio to the closed loop's µs per
# request), requests per sleep, send lateness p50/p99/max and earliness (early sends, p99/max)
# from the result's `pacing` (wrk2 reports none), the ACKs the kernel's delayed-ACK timer sent
# per request (machine-wide TcpExt DelayedACKs; an ACK the timer does not send, the client's
# own read does, on the client's CPU), the pacing slack archbench measured for
# itself, archbench's µs per request as a ratio of the wake-up floor's (examples/
# wakeup_floor.rs, measured in the same rounds: a timerfd sleep per request, its send and its
# response's read, nothing else), and of the floor that reads each response by its next
# wake-up ("next": as archbench reads within its 5 ms, where the floor reads 50 ms late).
#
# With WRK2 (and perf): first wrk2's own schedule error at each rate, from a perf trace of its
# sends: each send's distance from the even schedule that fits them best (least squares over
# the sends after the first second), p50/p99/max. Then the rounds also run wrk2 and archbench
# with --pacing-slack set to that p99 ("slack R"): archbench sending as far off an even
# schedule as wrk2 does, and its µs per request as a ratio of wrk2's. And the latency truth:
# at each rate the p50/p99 each tool reports against the same nginx, beside the server's own
# (archbench's closed loop at -c1, one request at a time: no queue, no lateness).
# Writes all of it, with the raw figures, to bench/results/open-loop-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
RATES=${RATES:-"1000 10000 30000"}
for tool in nginx python3 taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "open-loop: $tool is not installed" >&2; exit 2; }
done

GIVEN_AB=${AB:-}
if [ -z "${AB:-}" ]; then  # AB=/path/to/another/archbench measures that build instead
  cargo build --release --quiet
  AB=./target/release/archbench
fi
# The wake-up floor: examples/wakeup_floor.rs, the least an exact open loop pays here.
cargo build --release --quiet --example wakeup_floor
FLOOR=./target/release/examples/wakeup_floor
result_start open-loop "ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS RATES='$RATES'${SLACK:+ SLACK=$SLACK}${WRK2:+ WRK2=$WRK2}${GIVEN_AB:+ AB=$GIVEN_AB}"
echo "tools: $(nginx -v 2>&1)${WRK2:+, wrk2 $WRK2}"
WORK=$(mktemp -d)
LAST_CPU=$(( $(nproc) - 1 ))
taskset -c 0 "$AB" serve --nginx bench --workers 1 > "$WORK/serve.out" &
SERVE=$!
# The server ends by SIGINT (status 130): under set -e that status would become the script's.
trap 'kill -INT $SERVE 2>/dev/null; wait $SERVE 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$WORK/serve.out") || { echo "open-loop: nginx did not start" >&2; exit 1; }

# wrk2's schedule error at each rate: "RATE P99_US" lines in $WORK/wrk2-error.txt, and its
# send times in the pattern file (read below).
PATTERN=$WORK/pattern.txt
PERF_OK=
if perf record -q -e syscalls:sys_enter_sendto -o "$WORK/probe.data" -- true 2>/dev/null; then
  PERF_OK=1
fi
schedule_error() { # perf-trace file -> "p50 p99 max" µs off the best-fitting even schedule
  perf script -i "$1" -F time 2>/dev/null | tr -d ' :' | python3 -c '
import sys
t = [float(x) for x in sys.stdin.read().split() if x]
t = [x for x in t if x >= t[0] + 1] if t else []
n = len(t)
if n < 3:
    print("0 0 0"); sys.exit()
mi, mt = (n - 1) / 2, sum(t) / n
b = sum((i - mi) * (x - mt) for i, x in enumerate(t)) / sum((i - mi) ** 2 for i in range(n))
off = sorted(abs(x - (mt + b * (i - mi))) * 1e6 for i, x in enumerate(t))
print(int(off[n // 2]), int(off[n * 99 // 100]), int(off[-1]))'
}
declare -A WRK2_SLACK
if [ -n "${WRK2:-}" ] && [ -n "$PERF_OK" ]; then
  echo "wrk2's schedule error (3 s under perf, the first second skipped): µs off an even schedule"
  for r in $RATES; do
    taskset -c "$LAST_CPU" perf record -q -e syscalls:sys_enter_write -o "$WORK/w2.data" -- \
      "$WRK2" -t1 -c"$CONNS" -d3s -R"$r" "$URL" >/dev/null 2>&1
    read -r p50 p99 max < <(schedule_error "$WORK/w2.data")
    echo "  $r req/s: p50 $p50, p99 $p99, max $max"
    echo "wrk2 $r $(perf script -i "$WORK/w2.data" -F time 2>/dev/null | tr -d ' :' | paste -sd,)" >> "$PATTERN"
    # archbench's slack is whole µs, at most 5 ms.
    WRK2_SLACK[$r]=$(( p99 < 1 ? 1 : (p99 > 5000 ? 5000 : p99) ))
  done
fi

delayed_acks() { # ACKs the kernel's delayed-ACK timer has sent, machine-wide (TcpExt DelayedACKs)
  awk '/^TcpExt:/ { if (!n) { for (i = 2; i <= NF; i++) col[$i] = i; n = 1 } else print $col["DelayedACKs"] }' /proc/net/netstat
}

run() { # label cmd... -> one JSON line
  local label=$1; shift
  local acks_before line
  acks_before=$(delayed_acks)
  line=$(taskset -c "$LAST_CPU" python3 bench/measure.py "$@")
  ACKS=$(( $(delayed_acks) - acks_before )) LABEL="$label" python3 -c '
import json, os, re, sys
m = json.loads(sys.stdin.read())
out = m.pop("output")
if out.lstrip().startswith("{"):
    d = json.loads(out)
    m["requests"] = d["totals"]["requests"]
    total = d["latency"]["total"]
    m["latency_us"] = [total["p50_us"], total["p99_us"]]
    p = d.get("pacing")
    if p:
        l = p["lateness"]
        m["late"] = [l["p50_us"], l["p99_us"], l["max_us"]]
        e = p.get("earliness", {})
        # Without an early send, its percentiles are null (none was measured).
        m["early"] = [p.get("early_sends", 0), e.get("p99_us"), e.get("max_us")]
        m["slack_us"] = d["plan"].get("pacing_slack_us")
else:  # wrk2 layout (-L: its percentiles, in us, ms or s)
    m["requests"] = int(re.search(r"(\d+) requests in", out).group(1))
    unit = {"us": 1, "ms": 1e3, "s": 1e6}
    pct = {float(p): float(v) * unit[u] for p, v, u in
           re.findall(r"^\s*(\d+\.\d+)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    if 50.0 in pct and 99.0 in pct:
        m["latency_us"] = [round(pct[50.0]), round(pct[99.0])]
m["label"] = os.environ["LABEL"]
m["delayed_acks"] = int(os.environ["ACKS"])
print(json.dumps(m))' <<<"$line"
}

echo "nginx: 1 worker on CPU 0 ($URL); client on CPU $LAST_CPU; -c$CONNS -t1 -d$DURATION; $ROUNDS rounds"
RESULTS=$WORK/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  run closed "$AB" run "$URL" -c"$CONNS" -t1 -d"$DURATION" -q -o json >> "$RESULTS"
  run truth "$AB" run "$URL" -c1 -t1 -d"$DURATION" -q -o json >> "$RESULTS"
  for r in $RATES; do
    run "open $r" "$AB" run "$URL" -c"$CONNS" -t1 -d"$DURATION" --rate "$r" ${SLACK:+--pacing-slack "$SLACK"} -q -o json >> "$RESULTS"
    if [ -n "${WRK2:-}" ]; then
      run "wrk2 $r" "$WRK2" -t1 -c"$CONNS" -d"$DURATION" -R"$r" -L "$URL" >> "$RESULTS"
    fi
    if [ -n "${WRK2_SLACK[$r]:-}" ]; then
      run "slack $r" "$AB" run "$URL" -c"$CONNS" -t1 -d"$DURATION" --rate "$r" --pacing-slack "${WRK2_SLACK[$r]}us" -q -o json >> "$RESULTS"
    fi
    hostport=${URL#http://}
    run "floor $r" "$FLOOR" "${hostport%/}" "$r" "$CONNS" "${DURATION%s}" >> "$RESULTS"
    run "next $r" "$FLOOR" "${hostport%/}" "$r" "$CONNS" "${DURATION%s}" next >> "$RESULTS"
  done
  echo "  round $round done"
done

# How each tool spaces its sends (one more run of each, under perf's syscall tracepoints, so
# the CPU figures above stay unperturbed): an even schedule sends one request per 1/rate;
# a tool that sends in bursts pays one wake-up (its own and the server's) per burst, not per
# request. Skipped where perf cannot trace syscalls.
if [ -n "$PERF_OK" ]; then
  for r in $RATES; do
    taskset -c "$LAST_CPU" perf record -q -e syscalls:sys_enter_sendto -o "$WORK/ab.data" -- \
      "$AB" run "$URL" -c"$CONNS" -t1 -d3s --rate "$r" ${SLACK:+--pacing-slack "$SLACK"} -q >/dev/null 2>&1
    echo "archbench $r $(perf script -i "$WORK/ab.data" -F time 2>/dev/null | tr -d ' :' | paste -sd,)" >> "$PATTERN"
    if [ -n "${WRK2_SLACK[$r]:-}" ]; then
      taskset -c "$LAST_CPU" perf record -q -e syscalls:sys_enter_sendto -o "$WORK/ab.data" -- \
        "$AB" run "$URL" -c"$CONNS" -t1 -d3s --rate "$r" --pacing-slack "${WRK2_SLACK[$r]}us" -q >/dev/null 2>&1
      read -r p50 p99 max < <(schedule_error "$WORK/ab.data")
      echo "slack $r $(perf script -i "$WORK/ab.data" -F time 2>/dev/null | tr -d ' :' | paste -sd,)" >> "$PATTERN"
      echo "archbench --pacing-slack ${WRK2_SLACK[$r]}us at $r req/s: µs off an even schedule p50 $p50, p99 $p99, max $max"
    fi
  done
fi

python3 - "$RESULTS" "$DURATION" "$PATTERN" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
secs = float(sys.argv[2].rstrip("s"))
labels = list(dict.fromkeys(r["label"] for r in rows))
def us_per_req(r): return (r["user_s"] + r["sys_s"]) * 1e6 / max(r["requests"], 1)
closed = statistics.median(us_per_req(r) for r in rows if r["label"] == "closed")
print()
print(f"{'':12} {'req/s':>9} {'client CPU':>11} {'µs/req':>8} {'vs closed':>10} {'req/sleep':>10} {'lateness p50/p99/max µs':>26} {'early n p99/max µs':>20} {'timer ACKs/req':>15}")
for label in labels:
    rs = [r for r in rows if r["label"] == label]
    med = lambda f: statistics.median(f(r) for r in rs)
    late = early = ""
    if all("late" in r for r in rs):
        late = "/".join(str(int(statistics.median(r["late"][i] for r in rs))) for i in range(3))
        n = int(statistics.median(r["early"][0] for r in rs))
        def measured(i):  # the median over the runs that sent early, "-" if none did
            v = [r["early"][i] for r in rs if r["early"][i] is not None]
            return str(int(statistics.median(v))) if v else "-"
        early = f"{n} {measured(1)}/{measured(2)}"
    print(f"{label:12} {med(lambda r: r['requests'] / secs):9.0f} "
          f"{med(lambda r: (r['user_s'] + r['sys_s']) * 100 / secs):10.1f}% "
          f"{med(us_per_req):8.2f} {med(us_per_req) / closed:9.2f}x "
          f"{med(lambda r: r['requests'] / max(r['sleeps'], 1)):10.1f} {late:>26} {early:>20} "
          f"{med(lambda r: r['delayed_acks'] / max(r['requests'], 1)):15.2f}")
def ratios_to(peer, what, ours="open"):
    """`ours`' median µs/req over the peer's, at each rate both ran."""
    out = []
    for label in labels:
        if label.startswith(ours + " ") and (peer + " " + label.split()[1]) in labels:
            rate = label.split()[1]
            mine = statistics.median(us_per_req(r) for r in rows if r["label"] == label)
            theirs = statistics.median(us_per_req(r) for r in rows if r["label"] == peer + " " + rate)
            out.append(f"{rate} req/s {mine / theirs:.2f}x")
    if out:
        print(f"archbench ({ours}) µs/req as a ratio of {what}: " + ", ".join(out))
ratios_to("floor", "the wake-up floor's (examples/wakeup_floor.rs)")
ratios_to("next", "the floor's that reads each response by its next wake-up (wakeup_floor ... next)")
ratios_to("wrk2", "wrk2's")
ratios_to("wrk2", "wrk2's, at wrk2's schedule error", ours="slack")
print("timer ACKs/req: ACKs the kernel's delayed-ACK timer sent per request, machine-wide (TcpExt")
print("DelayedACKs). The timer usually runs on the CPU the response arrived on, the server's: a client")
print("that reads a response before the timer fires sends that ACK itself, in its read, on its own CPU.")
print("The floor reads each response 50 ms late (its connection's next turn); \"next\" is the same")
print("floor reading every response by its next wake-up, as archbench does within 5 ms.")
print("goals: exact (open) µs/req <= 1.1x the wake-up floor's, p99 lateness <= 200 µs at 10000;")
print("       at wrk2's schedule error (slack) µs/req <= 1.0x wrk2's at every rate")
with_latency = [l for l in labels if all("latency_us" in r for r in rows if r["label"] == l)]
if "truth" in with_latency:
    print()
    print("latency truth: p50/p99 µs each tool reports against the same nginx, medians of the rounds;")
    print("the server's own: archbench's closed loop at -c1 (one request at a time, no queue, no")
    print("lateness). nginx's $request_time counts whole ms, so it does not resolve these.")
    lat = lambda l, i: int(statistics.median(r["latency_us"][i] for r in rows if r["label"] == l))
    print(f"  server (closed -c1): p50 {lat('truth', 0)}, p99 {lat('truth', 1)}")
    for label in labels:
        if label.startswith("open "):
            rate = label.split()[1]
            cells = []
            for tool, name in (("open", "archbench exact"), ("slack", "archbench at wrk2's error"), ("wrk2", "wrk2")):
                l = tool + " " + rate
                if l in with_latency:
                    cells.append(f"{name} {lat(l, 0)}/{lat(l, 1)}")
            print(f"  {rate:>6} req/s: " + ", ".join(cells))
slacks = sorted({r["slack_us"] for r in rows if r.get("slack_us") is not None})
if slacks:
    print(f"pacing slack (plan.pacing_slack_us) over the open-loop runs: {slacks[0]}-{slacks[-1]} µs")
import os
if os.path.exists(sys.argv[3]):
    print()
    print("send pattern (3 s each, the first second skipped): requests per burst (sends closer than a")
    print("third of the even spacing), and the gap between sends p50/p99 against the even 1/rate")
    for line in open(sys.argv[3]):
        tool, rate, times = line.split()[0], int(line.split()[1]), line.split()[2:]
        t = [float(x) for x in (times[0].split(",") if times else []) if x]
        t = [x for x in t if x >= (t[0] + 1 if t else 0)]
        if len(t) < 3:
            continue
        gaps = [(b - a) * 1e6 for a, b in zip(t, t[1:])]
        even = 1e6 / rate
        bursts, cur = [], 1
        for g in gaps:
            if g < even / 3:
                cur += 1
            else:
                bursts.append(cur)
                cur = 1
        gaps.sort()
        print(f"  {tool:10} {rate:>6} req/s: {statistics.mean(bursts or [cur]):5.1f} per burst, "
              f"gap p50 {gaps[len(gaps) // 2]:7.0f} µs, p99 {gaps[len(gaps) * 99 // 100]:7.0f} µs (even: {even:.0f} µs)")
PY
result_raw "$RESULTS"

