//! Tests whose verdict depends on the machine's timing (latencies predicted in closed form,
//! send lateness, a read deferred or not), in a binary of their own: cargo runs test binaries
//! one after another, so nothing else of the suite loads the machine beside them, and one lock
//! runs them one at a time. Each also measures the noise it can (the stalling server's overrun,
//! the client's own send lateness, a wake-up probe) and allows for it, saying what it saw.

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench, stderr, stdout};

#[path = "util/mod.rs"]
mod util;

/// One timing test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
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
        // The largest slack: sends that go out early are timed from their send, so the
        // correction holds with it.
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
    // sleeps toward another connection's send: it must wake for it, not send late.
    let server = crate::util::stalling::StallingServer::start_with(crate::util::stalling::jitter);
    let probe = crate::util::noise::WakeupProbe::start();
    let o = archbench(&[
        "run",
        &server.url(),
        "--rate",
        "600",
        "-c",
        "3",
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
    // of socket-buffer refills) take dozens of 6.7 ms waits; the machine's own wake-up delay
    // can add some to every refill, so it is allowed for.
    eprintln!("8 MiB: open loop service p50 {open} µs, closed loop {before}/{after} µs; {noise}");
    assert!(
        open <= 2 * closed + 1_000 + 8 * noise.p90_us,
        "8 MiB: open loop service p50 {open} µs, closed loop {before} then {after} µs; {noise}"
    );
}
