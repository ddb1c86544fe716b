//! How late this machine wakes a sleeping thread right now: a test whose verdict depends on
//! timing measures the machine's noise beside its run and allows for it, rather than guessing
//! a margin for the slowest machine it might meet (cyclictest's idea, in a thread).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Each step's sleep: about a send interval of the open-loop tests.
const STEP: Duration = Duration::from_millis(1);
/// A probe that outlives its test still ends (no wait without a deadline).
const LONGEST: Duration = Duration::from_secs(120);

/// A thread sleeping [`STEP`] at a time and recording how much longer each sleep took.
pub struct WakeupProbe {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<u64>>>,
}

/// The probe's oversleeps, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Noise {
    pub samples: usize,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl WakeupProbe {
    pub fn start() -> WakeupProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let began = Instant::now();
            let mut late = Vec::with_capacity(16_384);
            while !flag.load(Ordering::Relaxed) && began.elapsed() < LONGEST {
                let t = Instant::now();
                std::thread::sleep(STEP);
                let over = t.elapsed().saturating_sub(STEP);
                late.push(u64::try_from(over.as_micros()).unwrap_or(u64::MAX));
            }
            late
        });
        WakeupProbe {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the probe and says what it saw.
    pub fn finish(mut self) -> Noise {
        self.stop.store(true, Ordering::Relaxed);
        let mut late = self
            .thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        late.sort_unstable();
        let at = |q: f64| -> u64 {
            if late.is_empty() {
                return 0;
            }
            let i = ((late.len() - 1) as f64 * q).round() as usize;
            late[i]
        };
        assert!(!late.is_empty(), "the wake-up probe took no sample");
        Noise {
            samples: late.len(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }
}

impl Drop for WakeupProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Display for Noise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this machine's wake-ups ran late by p50 {} µs, p90 {} µs, p99 {} µs, max {} µs ({} sleeps of 1 ms)",
            self.p50_us, self.p90_us, self.p99_us, self.max_us, self.samples
        )
    }
}

/// The share of all CPUs busy over `window` (from /proc/stat; None where it cannot be read).
pub fn busy_share(window: Duration) -> Option<f64> {
    fn totals() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        Some((v.iter().take(8).sum(), idle))
    }
    let (t0, i0) = totals()?;
    std::thread::sleep(window);
    let (t1, i1) = totals()?;
    let total = t1.saturating_sub(t0);
    (total > 0).then(|| 1.0 - i1.saturating_sub(i0) as f64 / total as f64)
}

/// Waits, up to `longest`, until the machine is quiet (under a quarter of its CPUs busy in two
/// quarter-seconds in a row): what the previous test binary left running (the kernel tearing
/// down the network namespaces of its clusters, a supervisor stopping one) would otherwise
/// be measured as the client's or the server's time. Says what it saw; returns the last share.
pub fn wait_for_quiet(longest: Duration) -> f64 {
    let began = Instant::now();
    let mut quiet_in_a_row = 0;
    let mut last = 0.0;
    while quiet_in_a_row < 2 && began.elapsed() < longest {
        let Some(busy) = busy_share(Duration::from_millis(250)) else {
            return 0.0;
        };
        last = busy;
        quiet_in_a_row = if busy < 0.25 { quiet_in_a_row + 1 } else { 0 };
    }
    if quiet_in_a_row < 2 {
        eprintln!(
            "the machine stayed busy ({:.0}% of its CPUs) for {longest:?}; timing figures below include that",
            last * 100.0
        );
    } else if began.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "waited {:.1} s for the machine to be quiet",
            began.elapsed().as_secs_f64()
        );
    }
    last
}
