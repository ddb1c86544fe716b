//! What a wake-up costs on this machine, and sleeps that end when they are asked to.
//!
//! An open-loop worker sleeps between sends. Linux lets a sleeping thread's timer fire up to
//! its timer slack late (50 µs by default) so wake-ups can be merged; a send time is not to be
//! merged that way, so workers ask for the smallest slack. How late a sleep of ours then ends
//! anyway — the wake-up's own latency, a few µs on a quiet machine, tens on a cloud VM where
//! each timer and halt leaves the guest — bounds the pacing slack by default: sends due within
//! it share one wake-up (see `--pacing-slack`).

use std::time::{Duration, Instant};

/// The default pacing slack never exceeds this, whatever the machine measures.
pub const MAX_SLACK: Duration = Duration::from_micros(50);

/// Sleeps of the calling thread end at their time, not up to the default 50 µs after it.
pub fn precise_sleeps() {
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
    // A thread that cannot start measures nothing: no slack, the safe side.
    std::thread::spawn(measure).join().unwrap_or(Duration::ZERO)
}

/// The pacing slack a run gets unless told: a wake-up's latency here, at most [`MAX_SLACK`].
pub fn default_slack() -> Duration {
    latency().min(MAX_SLACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_slack_is_a_measured_latency_within_its_bound() {
        let s = default_slack();
        assert!(s <= MAX_SLACK, "{s:?}");
        // A sleep cannot end before its time: the measured latency is never below zero,
        // and a 100 µs sleep measured as late by more than a second means the measure is
        // broken, not the machine.
        assert!(latency() < Duration::from_secs(1));
    }
}
