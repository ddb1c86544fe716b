//! Tests whose verdict depends on the machine's timing (latencies predicted in closed form,
//! send lateness, a read deferred or not, a rate achieved, which side limits, a CPU burn
//! watched, a knee found), in a binary of their own: cargo runs test binaries
//! one after another, so nothing else of the suite loads the machine beside them, and one lock
//! runs them one at a time. Each also measures the noise it can (the stalling server's overrun,
//! the client's own send lateness, a wake-up probe) and allows for it, saying what it saw.

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::schema::assert_valid;
use std::time::Duration;

use archbench::serve::Framing;

use crate::util::{
    archbench, assert_consistent, metric, read_json, run, stderr, stdout, ServeChild,
};

#[path = "util/mod.rs"]
mod util;

/// One timing test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test alone, on a quiet machine (or one that stayed busy for a minute, said so).
fn alone() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    util::noise::wait_for_quiet(std::time::Duration::from_secs(60));
    guard
}

#[test]
fn coordinated_omission_is_corrected_to_the_analytic_percentiles() {
    let _alone = alone();
    // Requests intended at t into a 1 s period wait until 200 ms when t < 200 ms, else not
    // at all: latency exceeds x for a share (0.2 - x/1 s) of requests, so p90 = 100 ms and
    // p99 = 190 ms. A tool that times from the actual send (or stops sending while the server
    // stalls) reports far less.
    let server = crate::util::stalling::StallingServer::start();
    let o = archbench(&[
        "run",
        &server.url(),
        "--rate",
        "1000",
        "-c",
        "50",
        "-t",
        "1",
        "-d",
        "5s",
        // The largest default slack: sends that go out early are timed from their send, so
        // the correction holds with it.
        "--pacing-slack",
        "50us",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ms = |field: &str| doc["latency"]["total"][field].as_u64().unwrap() as f64 / 1000.0;
    eprintln!(
        "stalling server: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
        ms("p50_us"),
        ms("p90_us"),
        ms("p99_us"),
        ms("max_us")
    );
    // Noise only adds: a hold that overran, a send or read the client made late, each makes a
    // request's latency longer than the closed form, never shorter. So the lower bounds are
    // the closed form's, and the upper ones allow what this run measured of both (the
    // server's worst overrun; the client's p99 send lateness).
    let noise_ms = server.overslept().as_secs_f64() * 1000.0
        + doc["pacing"]["lateness"]["p99_us"].as_u64().unwrap() as f64 / 1000.0;
    eprintln!("noise measured in this run: {noise_ms:.2} ms");
    let within = |field: &str, exact: f64| {
        let got = ms(field);
        assert!(
            got >= exact - 5.0 && got <= exact + 10.0 + noise_ms,
            "{field}: {got} ms, closed form {exact} ms, noise measured {noise_ms:.2} ms"
        );
    };
    within("p90_us", 100.0);
    within("p99_us", 190.0);
    assert!(
        ms("max_us") <= 215.0 + noise_ms,
        "max {} ms (noise {noise_ms:.2} ms)",
        ms("max_us")
    );
    // The uncorrected service time hides the stall for the requests that waited in line.
    let service_p90 = doc["latency"]["service"]["p90_us"].as_u64().unwrap() as f64 / 1000.0;
    assert!(service_p90 < ms("p90_us"), "service p90 {service_p90} ms");
}

#[test]
fn responses_read_late_are_timed_as_they_arrived_and_sends_stay_on_time() {
    let _alone = alone();
    // Each response takes 0 to 4 ms, so a connection's next send often falls while the worker
    // sleeps toward another connection's send: it must wake for it, not send late. Six
    // connections, a send due on each every 10 ms: a server slowed by a loaded machine still
    // leaves each connection free before its next send (with three, every 5 ms, it did not,
    // and sends waited for a busy connection: lateness, but the server's, not the schedule's).
    let server = crate::util::stalling::StallingServer::start_with(crate::util::stalling::jitter);
    let probe = crate::util::noise::WakeupProbe::start();
    let o = archbench(&[
        "run",
        &server.url(),
        "--rate",
        "600",
        "-c",
        "6",
        "-t",
        "1",
        "-d",
        "3s",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let late = &doc["pacing"]["lateness"];
    let noise = probe.finish();
    // The bug this guards against (a due send waiting for the timer of a later connection's
    // send) made p90 49 ms. Alone, p90 stays under 0.9 ms; under the whole suite the machine
    // wakes threads late itself (p50 1.5 ms, p90 4.2 ms once), which is the machine, not the
    // schedule: the bounds allow what a probe thread beside the run measured of that.
    let p50 = late["p50_us"].as_u64().unwrap();
    let p90 = late["p90_us"].as_u64().unwrap();
    eprintln!("send lateness p50 {p50} µs, p90 {p90} µs; {noise}");
    assert!(
        p50 <= 1_000 + 2 * noise.p50_us,
        "send lateness p50 {p50} µs: {late}; {noise}"
    );
    assert!(
        p90 <= 2_000 + 2 * noise.p90_us,
        "send lateness p90 {p90} µs: {late}; {noise}"
    );
    // Service times are the server's own 0-4 ms, not stretched by when they were read.
    let service = &doc["latency"]["service"];
    let p50 = service["p50_us"].as_u64().unwrap();
    assert!(
        (1_000..3_500).contains(&p50),
        "service p50 {p50} µs: {service}"
    );
}

#[test]
fn large_responses_are_not_read_late() {
    let _alone = alone();
    // An 8 MiB body does not fit a socket's buffer: its last segments come only as the client
    // reads. Timed in the open loop (sends 6.7 ms apart) it must cost what it costs in a
    // closed loop, not wait for the next send's wake-up.
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let big = ng.url("/big.bin");
    let www = std::path::PathBuf::from(ng.root());
    std::fs::write(www.join("big.bin"), vec![b'x'; 8 << 20]).unwrap();
    let service_p50 = |args: &[&str]| {
        let mut argv = vec!["run", big.as_str(), "-t", "1", "-o", "json"];
        argv.extend_from_slice(args);
        let o = archbench(&argv);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(doc["errors"]["read"], 0);
        doc["latency"]["service"]["p50_us"].as_u64().unwrap()
    };
    // The closed loop before and after, so a change in the machine's load between the runs
    // counts against the open loop's figure less.
    let before = service_p50(&["-c", "1", "-n", "60"]);
    // 150/s: sends 6.7 ms apart, so the worker spends most of its time within the 5 ms in
    // which it would defer reads, while 1.2 GB/s stays under what a loaded 2-core machine
    // moves (220/s was at its limit: queueing, not deferral, then set the figure).
    let probe = crate::util::noise::WakeupProbe::start();
    let open = service_p50(&["--rate", "150", "-c", "15", "-n", "90"]);
    let noise = probe.finish();
    let after = service_p50(&["-c", "1", "-n", "60"]);
    let closed = before.max(after);
    // Deferring each read to the next send's wake-up would make an 8 MiB body (some dozens
    // of socket-buffer refills) take dozens of 6.7 ms waits, over 100 ms; the machine's own
    // wake-up delay can add some to every refill, so it is allowed for. Not yet explained
    // (issue 28's note): run after the `tests` binary, on a quiet machine, the open loop's p50
    // is 29-43 ms against 4-8 ms closed (3 runs of 3), where alone it is 4.5-8.3 ms (8 of 8);
    // not the machine's load (under a quarter busy) nor 127.0.0.1's cached TCP metrics. The
    // 50 ms allowance keeps the deferral's signature out while that is found.
    eprintln!("8 MiB: open loop service p50 {open} µs, closed loop {before}/{after} µs; {noise}");
    assert!(
        open <= 2 * closed + 50_000 + 8 * noise.p90_us,
        "8 MiB: open loop service p50 {open} µs, closed loop {before} then {after} µs; {noise}"
    );
}

#[test]
fn limiter_names_an_expensive_server_and_a_slow_one() {
    let _alone = alone();
    // One server thread spinning 300 µs per response cannot keep up with 4 connections.
    let busy = util::ServeChild::start(&["--threads", "1", "--burn", "300us"]);
    let watch = format!("busy=pid:{}", busy.pid());
    let o = archbench(&[
        "run", &busy.url, "-d", "2s", "-c", "4", "-t", "1", "-q", "-o", "json", "--watch", &watch,
    ]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["limiter"]["side"], "server", "{}", doc["limiter"]);
    assert!(doc["servers"][0]["busiest_thread_demand"].as_f64().unwrap() >= 0.9);

    // 20 ms per response without CPU: neither side is busy.
    let slow = util::ServeChild::start(&["--threads", "1", "--delay", "20ms"]);
    let watch = format!("slow=pid:{}", slow.pid());
    let o = archbench(&[
        "run", &slow.url, "-d", "2s", "-c", "2", "-t", "1", "-q", "-o", "json", "--watch", &watch,
    ]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["limiter"]["side"], "neither", "{}", doc["limiter"]);
    assert!(doc["client"]["busiest_worker_percent"].as_f64().unwrap() < 50.0);
}

#[test]
fn limiter_names_a_starved_client() {
    let _alone = alone();
    // The client shares CPU 0 with a busy loop at a lower priority (nice 19: about 1.5% of the
    // core); the server has CPU 1 to itself. The client is runnable nearly all the time (its
    // demand counts the waiting); the server mostly idles.
    let Some(taskset) = util::require_tool("taskset") else {
        return;
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        util::cannot_run("needs two CPUs");
        return;
    }
    let server = util::ServeChild::start(&["--threads", "1"]);
    let pinned = std::process::Command::new(&taskset)
        .args(["-a", "-p", "-c", "1", &server.pid().to_string()])
        .output()
        .unwrap();
    assert!(pinned.status.success(), "{}", stderr(&pinned));
    let mut hog = std::process::Command::new(&taskset)
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let watch = format!("srv=pid:{}", server.pid());
    let o = std::process::Command::new(&taskset)
        .args([
            "-c",
            "0",
            "nice",
            "-n",
            "19",
            env!("CARGO_BIN_EXE_archbench"),
        ])
        .args([
            "run",
            &server.url,
            "-d",
            "1s",
            "-c",
            "8",
            "-t",
            "1",
            "-q",
            "-o",
            "json",
        ])
        .args(["--watch", &watch])
        .output()
        .unwrap();
    let _ = hog.kill();
    let _ = hog.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // Other tests share the machine: the pinned server may be busy too ("both").
    let side = doc["limiter"]["side"].as_str().unwrap();
    assert!(side == "client" || side == "both", "{}", doc["limiter"]);
    assert!(doc["limiter"]["reason"]
        .as_str()
        .unwrap()
        .contains("describe archbench"));
}

#[test]
fn watched_cpu_matches_a_known_burn_within_ten_percent() {
    let _alone = alone();
    let Some(mut burner) = util::Burner::spawn() else {
        return;
    };
    let mut spec: archbench::monitor::WatchSpec =
        format!("burner=pid:{}", burner.pid()).parse().unwrap();
    spec.perf = vec![
        "task-clock".parse().unwrap(),
        "instructions".parse().unwrap(),
    ];
    let monitor = archbench::monitor::Monitor::start(&spec, std::time::Instant::now()).unwrap();
    burner.burn_one_second();
    let usage = monitor.finish();
    drop(burner);
    assert!(
        (usage.cpu_s - 1.0).abs() <= 0.1,
        "watched {:.3} CPU s of a 1.000 s burn",
        usage.cpu_s
    );
    assert!(
        usage.samples >= 4,
        "sampled every 250 ms: {}",
        usage.samples
    );
    eprintln!("watched {:.3} CPU s of a 1.000 s burn", usage.cpu_s);
    // perf_event_open's task-clock agrees (nanoseconds); instructions are counted where the
    // machine has a PMU, and otherwise say why, never 0.
    let clock = &usage.counters[0];
    assert_eq!(
        (clock.event.as_str(), clock.status.as_str()),
        ("task-clock", "ok")
    );
    let ns = clock.value.unwrap() as f64;
    assert!((ns / 1e9 - 1.0).abs() <= 0.1, "task-clock {ns} ns");
    let instructions = &usage.counters[1];
    match instructions.value {
        Some(v) => assert!(v > 0, "{instructions:?}"),
        None => assert!(instructions.status.starts_with("not "), "{instructions:?}"),
    }
    eprintln!("counters: {:?}", usage.counters);
}

#[test]
fn open_loop_rate_is_achieved_within_two_percent() {
    let _alone = alone();
    let s = util::embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "--rate", "1000", "-c", "10", "-d", "5s"]);
    assert_consistent(&r);
    let achieved = r.totals.requests as f64 / r.totals.elapsed_s;
    assert!(
        (achieved - 1000.0).abs() / 1000.0 < 0.02,
        "asked 1000 req/s, achieved {achieved:.1}"
    );
    // Every request we counted was answered; at most one per connection was in flight at the end.
    assert!(s.requests() >= r.totals.requests && s.requests() <= r.totals.requests + 10);
}

#[test]
fn sends_due_within_the_slack_share_a_wake_up_early_and_are_reported() {
    let _alone = alone();
    if Nginx::start(NginxConfig::default()).is_none() {
        return;
    }
    // 20k req/s: a send every 50 µs, so with a 50 µs slack the one after each due send is
    // always within it and goes out in the same wake-up, early.
    let (doc, logged) = open_loop_with_slack("50us");
    assert_eq!(doc["totals"]["requests"], 6000);
    assert_eq!(logged, 6000);
    assert_eq!(doc["plan"]["pacing_slack_us"], 50);
    let pacing = &doc["pacing"];
    let early = pacing["early_sends"].as_u64().unwrap();
    assert!(early > 0 && early < 6000, "{pacing}");
    assert_eq!(pacing["earliness"]["count"], early);
    assert!(
        pacing["earliness"]["max_us"].as_u64().unwrap() <= 50,
        "{pacing}"
    );
    // Every send has a lateness (0 for the early ones).
    assert_eq!(pacing["lateness"]["count"], 6000);
    assert!(doc["histograms"]["send_earliness"].is_string());
    // The text report of the same document says it beside the lateness.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = archbench(&["report", file.to_str().unwrap()]);
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Early"))
        .unwrap_or_else(|| panic!("no Early line in:\n{text}"));
    let max = pacing["earliness"]["max_us"].as_u64().unwrap();
    assert!(
        line.contains("the slack is 50 µs") && line.contains(&format!("max {max} µs")),
        "{line}"
    );

    // A slack asked for beyond the default's bound, as bursty as wrk2 at this rate: a
    // wake-up sends the 40 requests due within 2 ms, all but the first early, each timed from
    // its own send.
    let (doc, logged) = open_loop_with_slack("2ms");
    assert_eq!(
        (doc["totals"]["requests"].as_u64(), logged),
        (Some(6000), 6000)
    );
    assert_eq!(doc["plan"]["pacing_slack_us"], 2000);
    let pacing = &doc["pacing"];
    let early = pacing["early_sends"].as_u64().unwrap();
    assert!(early > 3000, "{pacing}");
    let max = pacing["earliness"]["max_us"].as_u64().unwrap();
    assert!(max > 50 && max <= 2000, "{pacing}");

    let (doc, logged) = open_loop_with_slack("0");
    assert_eq!(logged, 6000);
    assert_eq!(doc["plan"]["pacing_slack_us"], 0);
    assert_eq!(doc["pacing"]["early_sends"], 0, "{}", doc["pacing"]);
    assert!(doc["histograms"].get("send_earliness").is_none());
}

#[test]
fn the_throttled_server_has_the_lower_knee_and_leaves_the_ladder_early() {
    let _alone = alone();
    let Some(fast) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let Some(slow) = Nginx::start(NginxConfig {
        http: "limit_req_zone $binary_remote_addr zone=one:1m rate=1000r/s;",
        server: "limit_req zone=one burst=100000;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let o = util::archbench_within(
        &[
            "sweep",
            &format!("fast={}", fast.url("/")),
            &format!("slow={}", slow.url("/")),
            "-c",
            "1:64:x2",
            "-d",
            "700ms",
            "-t",
            "1",
            "--no-warmup",
            "--slo",
            "p99<10ms",
            "--cost",
            "slow=0.5",
            "--json",
            json.to_str().unwrap(),
        ],
        util::PROMPTLY * 2,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    util::schema::assert_valid(&doc);
    let target = |name: &str| {
        doc["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    let (f, s) = (target("fast"), target("slow"));
    // 1,000 req/s shared by N connections: p99 ≈ N ms, so 16 connections miss 10 ms.
    let slow_knee = s["knee"].as_f64().unwrap();
    assert!((2.0..=8.0).contains(&slow_knee), "slow knee {slow_knee}");
    assert!(f["knee"].as_f64().unwrap() > slow_knee, "{f}");
    // Failing twice in a row (at 16 and 32, or already at 8 and 16 when a step's p99 lands
    // above 10 ms at 8), the slow one leaves the ladder and is not run at 64.
    let points = s["points"].as_array().unwrap();
    let failed: Vec<f64> = points[points.len() - 2..]
        .iter()
        .filter(|p| p["slo_passed"] == false)
        .map(|p| p["load"].as_f64().unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "its last two steps failed: {s}");
    assert!(failed[1] <= 32.0, "{s}");
    assert_eq!(s["stopped"]["after"].as_f64(), Some(failed[1]), "{s}");
    let said = format!(
        "slow is past its knee (the SLO failed at {} and {}",
        failed[0], failed[1]
    );
    assert!(stderr(&o).contains(&said), "{said}: {}", stderr(&o));
    let last = doc["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(last["load"], 64.0);
    let names: Vec<&str> = last["comparison"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fast"]);
    // Its throughput stays near the limit (a step's run is short: allow its burst).
    let top = s["points"].as_array().unwrap().last().unwrap()["requests_per_sec"]
        .as_f64()
        .unwrap();
    assert!((700.0..1_300.0).contains(&top), "{top}");
    // --cost: a million requests at the knee's throughput, from the price per hour.
    let at_knee = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["load"].as_f64() == Some(slow_knee))
        .unwrap();
    let want = 0.5 / (at_knee["requests_per_sec"].as_f64().unwrap() * 3600.0) * 1e6;
    let got = s["cost_per_million_at_knee"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert!(f["cost_per_million_at_knee"].is_null(), "no price for fast");
    // Either a USL fit or the reason there is none, for each.
    for t in [&f, &s] {
        assert!(t["usl"].is_object() != t["usl_refused"].is_string(), "{t}");
    }
    let text = stdout(&o);
    // The text says where it stopped as the JSON does (at 32, or at 16 on a slow machine).
    let stopped = format!("Stopped    after {}", failed[1]);
    assert!(
        text.contains("Knee       ") && text.contains(&stopped),
        "{stopped}: {text}"
    );
    // Every request counted was answered: the fast nginx logged at most one more per
    // connection of each run (in flight at the deadline).
    let counted: u64 = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["comparison"]["targets"].as_array().unwrap().clone())
        .filter(|t| t["name"] == "fast")
        .flat_map(|t| t["runs"].as_array().unwrap().clone())
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .sum();
    let logged = fast.stop_and_read_log().len() as u64;
    let in_flight: u64 = [1, 2, 4, 8, 16, 32, 64].iter().sum();
    assert!(
        logged >= counted && logged <= counted + in_flight,
        "nginx logged {logged}, archbench counted {counted}"
    );
}

#[test]
fn equal_rates_give_equal_medians() {
    let _alone = alone();
    // Both targets paced at the same rate. Whether the test calls them different is left to
    // the unit tests on fixed values: at alpha = 0.05 it must say so for 5% of identical pairs.
    let a = ServeChild::start(&["--threads", "1"]);
    let b = ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let (ta, tb) = (format!("a={}", a.url), format!("b={}", b.url));
    let o = archbench(&[
        "compare",
        &ta,
        &tb,
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "500ms",
        "--rate",
        "200",
        "--runs",
        "3",
        "--no-warmup",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    let rps = metric(&doc, "req/s");
    let (ma, mb) = (
        rps["targets"][0]["median"].as_f64().unwrap(),
        rps["targets"][1]["median"].as_f64().unwrap(),
    );
    assert!(
        (ma - 200.0).abs() < 4.0 && (mb - 200.0).abs() < 4.0,
        "{ma} {mb}"
    );
    for t in doc["targets"].as_array().unwrap() {
        for r in t["runs"].as_array().unwrap() {
            // 100 are due in 0.5 s; the last one or two may still be in flight at the end.
            let n = r["totals"]["requests"].as_u64().unwrap();
            assert!(
                (98..=100).contains(&n),
                "{n} requests at 200 req/s for 0.5 s"
            );
        }
    }
}

/// A bounded open-loop run against nginx with this slack: the document and nginx's log. A
/// hundred connections, so that a loaded machine's slower answers still leave one free for
/// most sends (all held by busy connections, none could go early).
fn open_loop_with_slack(slack: &str) -> (serde_json::Value, usize) {
    let ng = Nginx::start(NginxConfig::default()).expect("nginx is installed");
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--rate",
        "20000",
        "-c",
        "100",
        "-t",
        "1",
        "-n",
        "6000",
        "--pacing-slack",
        slack,
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_valid(&doc);
    (doc, ng.stop_and_read_log().len())
}

#[test]
fn a_pods_cpu_limit_sets_its_throughput_and_the_scaling_verdict_rests_on_it() {
    let _alone = alone();
    use crate::util::kube::{can_run, k8s, ok, options, the_run_dir};
    if !can_run() {
        return;
    }
    // One node of two cores for both variants: a tenth and a fifth of a core are what the pods
    // may use, so they (not the client beside them) are what limits each load. (At a fifth
    // and two fifths the two client threads beside them took 1.1 of the 2 cores, and the
    // larger pod, weighted far below the client under contention, got 0.367 of its 0.4 in
    // one run and under 90% of it in CI's: "neither side limited".)
    let nodes = vec![archbench_cluster::topology::NodeSpec::new(
        0,
        "aks-intel-0",
        "amd64",
        "intel",
        "Standard_D2s_v6",
    )];
    let c = archbench_cluster::TestCluster::start(&options(Some(nodes)), "limits")
        .unwrap_or_else(|e| panic!("{e}"));
    let ns = "limits";
    ok(&k8s(
        &c,
        ns,
        &[
            "up",
            "--variant",
            "tenth:arch=amd64,cpu=100m,workers=1",
            "--variant",
            "fifth:arch=amd64,cpu=200m,workers=1",
            "--wait-timeout",
            "90s",
        ],
    ));
    let dir = tempfile::tempdir().unwrap();
    let text = ok(&k8s(
        &c,
        ns,
        &[
            "load",
            "tenth",
            "fifth",
            "-d",
            "8s",
            "-c",
            "8",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
    ));
    let doc = read_json(the_run_dir(dir.path()).join("k8s-load.json"));
    assert_valid(&doc);
    let figure = |k: usize, key: &str| -> f64 {
        let run = &doc["targets"][k]["runs"][0];
        match key {
            "rps" => run["totals"]["requests_per_sec"].as_f64().unwrap(),
            _ => run["servers"][0][key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: {}", run["servers"][0])),
        }
    };
    for (k, limit) in [(0, 0.1), (1, 0.2)] {
        let run = &doc["targets"][k]["runs"][0];
        assert_eq!(run["limiter"]["side"], "server", "{}", run["limiter"]);
        assert!((figure(k, "cpu_limit_cores") - limit).abs() < 1e-9);
        let cores = figure(k, "cores");
        assert!(
            cores <= limit * 1.05,
            "{cores} cores under a limit of {limit}"
        );
    }
    let (rps, per_cpu) = (
        figure(0, "rps") / figure(1, "rps"),
        figure(0, "requests_per_cpu_s") / figure(1, "requests_per_cpu_s"),
    );
    eprintln!(
        "100m vs 200m: {:.0} vs {:.0} req/s (ratio {rps:.3}), {:.0} vs {:.0} req per pod CPU-s (ratio {per_cpu:.3}), cores {:.3} vs {:.3}",
        figure(0, "rps"),
        figure(1, "rps"),
        figure(0, "requests_per_cpu_s"),
        figure(1, "requests_per_cpu_s"),
        figure(0, "cores"),
        figure(1, "cores"),
    );
    assert!((0.4..=0.6).contains(&rps), "req/s ratio {rps}");
    // The two pods' work per CPU-second agrees, within what was seen on this machine kind:
    // 0.975, 1.002 and 0.982 run alone, 1.178 once in a full CI run (224,759 against 190,749
    // requests per pod CPU-second); CPU accounting off by the limit's factor would be 2.
    assert!(
        (per_cpu - 1.0).abs() <= 0.25,
        "req per CPU-s ratio {per_cpu}"
    );
    // The Scaling line from these measured figures: both sides server-bound, so a verdict.
    let scaling = &doc["scaling"][0];
    assert!(scaling["withheld"].is_null(), "{scaling}");
    let want = (1.0 / rps) / 2.0;
    assert!(
        (scaling["efficiency"].as_f64().unwrap() - want).abs() < 1e-9,
        "{scaling}"
    );
    assert!(text.contains("scaling efficiency"), "{text}");
    // The kernel counted the periods the smaller pod ran out of its quota.
    let pods = c.kubectl_ok(&["-n", ns, "get", "pods", "-o", "name"]);
    let tenth = pods
        .lines()
        .find(|p| p.contains("nginx-tenth-"))
        .unwrap_or_else(|| panic!("{pods}"));
    let stat = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        tenth,
        "--",
        "cat",
        "/sys/fs/cgroup/cpu.stat",
    ]);
    let throttled: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("nr_throttled ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stat}"));
    assert!(throttled > 0, "{stat}");
}

/// The open loop's latency is the server's, not the client's pacing: at 10,000 req/s its p50
/// stays within 150 µs of the closed loop's over one connection against the same nginx
/// (wrk2 reports 10–15× the server's; see issue 32's bench). Here, not beside the suite: on two
/// busy cores the server's own latency moves by more than the bound.
#[test]
fn the_open_loops_median_at_10k_is_the_closed_loops_at_one_connection() {
    let _alone = alone();
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let p50 = |args: &[&str]| {
        let o = archbench(
            &[
                &[
                    "run",
                    &ng.url("/"),
                    "-t",
                    "1",
                    "-d",
                    "2s",
                    "-q",
                    "-o",
                    "json",
                ][..],
                args,
            ]
            .concat(),
        );
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(doc["totals"]["errors"], 0, "{args:?}");
        doc["latency"]["total"]["p50_us"].as_f64().unwrap()
    };
    let closed = p50(&["-c", "1"]);
    let open = p50(&["-c", "50", "--rate", "10000"]);
    assert!(
        (open - closed).abs() <= 150.0,
        "open loop p50 {open} µs at 10k req/s, closed loop p50 {closed} µs at -c1"
    );
}
