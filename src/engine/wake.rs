//! What a wake-up costs on this machine.
//!
//! An open-loop worker sleeps between sends and is woken by a timerfd, which fires on time
//! (unlike a plain sleep, which Linux lets end up to the thread's timer slack late, 50 µs by
//! default). How late a sleep ends even with the slack at its smallest — the wake-up's own
//! latency, a few µs on a quiet machine, tens on a cloud VM where each timer and halt leaves
//! the guest — bounds the pacing slack by default: sends due within it share one wake-up (see
//! `--pacing-slack`).

use std::time::{Duration, Instant};

/// The default pacing slack never exceeds this, whatever the machine measures.
pub const MAX_SLACK: Duration = Duration::from_micros(50);

/// A slack asked for (`--pacing-slack`) never exceeds this: sends a few milliseconds early
/// are as far off an even schedule as a bursty peer's (wrk2's; `bench/open-loop.sh` measures
/// it), and further off than that the schedule would no longer be the one asked for.
pub const MAX_ASKED_SLACK: Duration = Duration::from_millis(5);

/// Sleeps of the calling thread end at their time, not up to the default 50 µs after it.
fn precise_sleeps() {
    // SAFETY: prctl on the calling thread with a plain integer argument; it cannot fail for
    // a positive value, and if it did the sleeps would only be as coarse as before.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// How late a short sleep ends on this machine: the median of 21 sleeps of 100 µs, on a
/// thread of its own with precise sleeps (about 3 ms in all).
pub fn latency() -> Duration {
    let measure = || {
        precise_sleeps();
        let mut late: Vec<Duration> = (0..21)
            .map(|_| {
                let asked = Duration::from_micros(100);
                let before = Instant::now();
                std::thread::sleep(asked);
                before.elapsed().saturating_sub(asked)
            })
            .collect();
        late.sort();
        late[late.len() / 2]
    };
    // A thread that cannot start (or panics) measures nothing: no slack, the safe side.
    std::thread::Builder::new()
        .name("archbench-wake".into())
        .spawn(measure)
        .ok()
        .and_then(|t| t.join().ok())
        .unwrap_or(Duration::ZERO)
}

/// The pacing slack a run gets unless told: a wake-up's latency here, at most [`MAX_SLACK`].
/// Measured once per process, so the targets of a comparison and the steps of a sweep share
/// one slack.
pub fn default_slack() -> Duration {
    static MEASURED: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *MEASURED.get_or_init(|| latency().min(MAX_SLACK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_is_measured_late_but_not_absurdly() {
        // A 100 µs sleep ends after its time, by the wake-up's latency: more than zero (a
        // measure that read zero would give every run no slack), and under a second (more
        // means the measure is broken, not the machine).
        let late = latency();
        assert!(
            late > Duration::ZERO && late < Duration::from_secs(1),
            "{late:?}"
        );
    }
}
