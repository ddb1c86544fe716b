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
