//! Synthetic worker results: what N load workers of one distributed run would print, with
//! recordings from a fixed pseudo-random sequence (so any run can be checked against one
//! histogram of every recording). Shared by the merge scale test and `bench/merge-scale.sh`
//! (through `examples/synthetic_results.rs`).

use std::time::{Duration, SystemTime};

use archbench::stats::{
    Environment, PartSummary, PlanSummary, Recorder, ResponseTimes, RunResult, RunTimes,
};

/// Latencies one worker records: a log-uniform spread from 50 µs to ~50 ms, so the
/// histograms have many distinct buckets, as a loaded server's do.
pub fn latencies(worker: u32, requests: u64) -> impl Iterator<Item = u64> {
    // xorshift64*, seeded per worker: deterministic and cheap.
    let mut x =
        0x9E37_79B9_7F4A_7C15u64 ^ (u64::from(worker) + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (0..requests).map(move |_| {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let u = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        (50.0 * 1000f64.powf(u)) as u64
    })
}

/// The second of a worker's run in which its `k`-th of `requests` responses ended.
pub fn latency_second(k: u64, requests: u64, seconds: u32) -> u32 {
    (k * u64::from(seconds) / requests.max(1)) as u32
}

/// Worker `index` of `count`: `requests` answered over `seconds`, started `skew_us` after
/// the common start.
pub fn worker_result(
    index: u32,
    count: u32,
    requests: u64,
    seconds: u32,
    skew_us: u64,
) -> RunResult {
    let mut rec = Recorder::new(Some(Duration::from_secs(u64::from(seconds))));
    // Latency over time, as the engine's collector builds it: one histogram per second.
    let mut per_second: Vec<_> = (0..seconds)
        .map(|_| archbench::stats::latency_histogram())
        .collect();
    for (k, us) in latencies(index, requests).enumerate() {
        let second = latency_second(k as u64, requests, seconds);
        per_second[second as usize].record(us).unwrap();
        rec.response(
            second,
            200,
            612,
            ResponseTimes {
                total_us: us,
                service_us: us,
                first_byte_us: us,
                connect_us: None,
            },
        );
        rec.bytes_in(second, 850);
    }
    for (second, h) in per_second.iter().enumerate() {
        rec.latency.add(second as u32, h);
    }
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
    let plan = PlanSummary {
        url: "http://10.0.4.7:80/".into(),
        method: "GET".into(),
        http_version: "HTTP/1.1".into(),
        connections: 4,
        threads: 1,
        duration_s: Some(f64::from(seconds)),
        keepalive: true,
        timeout_s: 10.0,
        part: Some(PartSummary {
            index,
            count,
            connections: 4 * u64::from(count),
            requests: None,
            rate: None,
        }),
        ..PlanSummary::default()
    };
    RunResult::from_recording(
        rec,
        plan,
        // Each worker is its own pod.
        Environment {
            hostname: format!("archbench-load-arm-{index}"),
            ..Environment::default()
        },
        RunTimes {
            started_at: start,
            first_send_at: Some(start + Duration::from_micros(skew_us)),
            elapsed_s: f64::from(seconds),
            interrupted: false,
        },
    )
}
