//! Ctrl-C and SIGTERM: a first one stops the load (and what it measured is still reported),
//! a second exits at once.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::stop::Stop;

/// SIGINT/SIGTERM set `stop` and wake what waits on it; a second one exits at once.
pub struct StopSignals {
    pub stop: Stop,
    which: Arc<AtomicUsize>,
}

impl StopSignals {
    pub fn install() -> io::Result<StopSignals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Stop::new();
        let which = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM] {
            // Registered first so it sees the flag before this signal sets it.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, stop.flag())?;
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
                for _ in seen.forever() {
                    waker.wake();
                }
            })?;
        Ok(StopSignals { stop, which })
    }

    /// What a key that stops the load does: what SIGINT would (stop, exit status 130).
    pub fn as_if_interrupted(&self) -> Box<dyn Fn() + Send> {
        let (stop, which) = (self.stop.clone(), self.which.clone());
        Box::new(move || {
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

/// Blocks until the stop flag is set, without spinning.
pub fn wait_for(stop: &AtomicBool) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut s) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        if !stop.load(Ordering::Relaxed) {
            let _ = s.forever().next();
        }
    }
}
