//! Ctrl-C and SIGTERM: a first one stops the load (and what it measured is still reported),
//! a second one a while later exits at once.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::stop::Stop;

/// How long after the first signal a second one still counts as the same interruption.
/// Signals that come together are one request to stop, not two: `timeout -s INT` signals the
/// program and then its process group (so the program twice within microseconds), as does a
/// supervisor that signals a group its shell also forwards to. Only a second Ctrl-C the user
/// presses after seeing the first take effect forces the exit.
const SAME_INTERRUPTION_NS: u64 = 500_000_000;

/// SIGINT/SIGTERM set `stop` and wake what waits on it; a second one, from
/// [`SAME_INTERRUPTION_NS`] after the first on, exits at once.
pub struct StopSignals {
    pub stop: Stop,
    which: Arc<AtomicUsize>,
    /// CLOCK_MONOTONIC nanoseconds of the first stop (0: none yet).
    first_ns: Arc<AtomicU64>,
}

/// CLOCK_MONOTONIC in nanoseconds, at least 1; async-signal-safe (clock_gettime is).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into `t`; clock_gettime may be called from a handler.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
        .max(1)
}

/// Notes a stop at `now`; true when an earlier one came long enough before it to make this
/// one a second interruption.
fn is_second_interruption(first_ns: &AtomicU64, now: u64) -> bool {
    match first_ns.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => false,
        Err(first) => now.saturating_sub(first) >= SAME_INTERRUPTION_NS,
    }
}

impl StopSignals {
    pub fn install() -> io::Result<StopSignals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Stop::new();
        let which = Arc::new(AtomicUsize::new(0));
        let first_ns = Arc::new(AtomicU64::new(0));
        for sig in [SIGINT, SIGTERM] {
            let first = first_ns.clone();
            // SAFETY: the action only reads the clock, compares and swaps an atomic and, for a
            // second interruption, calls _exit: all async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    if is_second_interruption(&first, monotonic_ns()) {
                        signal_hook::low_level::exit(128 + sig);
                    }
                })?;
            }
            signal_hook::flag::register(sig, stop.flag())?;
            signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?;
        }
        // A handler can only set the flag: this thread, told of the same signals, wakes the
        // async waits (the process's whole life; it holds nothing).
        let mut seen = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let waker = stop.clone();
        std::thread::Builder::new()
            .name("stop-signals".into())
            .spawn(move || {
                for sig in seen.forever() {
                    waker.wake();
                    give_up_on_a_starting_script(sig);
                }
            })?;
        Ok(StopSignals {
            stop,
            which,
            first_ns,
        })
    }

    /// What a key that stops the load does: what SIGINT would (stop, exit status 130).
    pub fn as_if_interrupted(&self) -> Box<dyn Fn() + Send> {
        let (stop, which) = (self.stop.clone(), self.which.clone());
        let first_ns = self.first_ns.clone();
        Box::new(move || {
            // A signal after the key is a second interruption, as after a first signal.
            let _ = is_second_interruption(&first_ns, monotonic_ns());
            // A signal that came first keeps its own status.
            let _ = which.compare_exchange(
                0,
                signal_hook::consts::SIGINT as usize,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            stop.request();
        })
    }

    /// Whether a signal (or a key acting as one) has come.
    pub fn signalled(&self) -> bool {
        self.which.load(Ordering::Relaxed) != 0
    }

    /// 130 after SIGINT, 143 after SIGTERM, as shells report them.
    pub fn exit_code(&self) -> i32 {
        128 + self.which.load(Ordering::Relaxed) as i32
    }
}

/// After a signal, a script still running its functions before the load (an endless loop
/// in its request(), say) will not come back to see the stop: within [`STUCK_AFTER`] it
/// has, or the process ends with a line that says why (nothing was measured yet).
fn give_up_on_a_starting_script(sig: i32) {
    let deadline = std::time::Instant::now() + crate::engine::STUCK_AFTER;
    while crate::script::starting() {
        if std::time::Instant::now() >= deadline {
            crate::stderr_line!(
                "archbench: interrupted while the script ran before the load (a function that never returns? an endless loop in its chunk, setup(), init() or request()): nothing was measured"
            );
            std::process::exit(128 + sig);
        }
        // A poll with a deadline: the script's thread cannot tell us it returned.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Blocks until the stop flag is set, without spinning.
pub fn wait_for(stop: &AtomicBool) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut s) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        if !stop.load(Ordering::Relaxed) {
            let _ = s.forever().next();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_close_together_are_one_interruption() {
        let first = AtomicU64::new(0);
        let t0 = 10 * SAME_INTERRUPTION_NS;
        assert!(!is_second_interruption(&first, t0));
        // `timeout -s INT`'s second signal, microseconds later: the same interruption.
        assert!(!is_second_interruption(&first, t0 + 20_000));
        assert!(!is_second_interruption(
            &first,
            t0 + SAME_INTERRUPTION_NS - 1
        ));
        // A second Ctrl-C pressed after the first took effect.
        assert!(is_second_interruption(&first, t0 + SAME_INTERRUPTION_NS));
    }
}
