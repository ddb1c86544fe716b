//! The stop a user asks for (Ctrl-C, SIGTERM, the dashboard's key, an agent's `POST /stop`):
//! a flag the load's loops read where they wake anyway, and a notification that wakes an
//! async wait (the k8s commands') at once, rather than its polling the flag.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A stop flag and its notification. Clones share both.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// The flag alone, for what can only set it (a signal handler) or only reads it.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Asks for the stop: the flag set, every wait woken.
    pub fn request(&self) {
        self.flag.store(true, Ordering::Relaxed);
        self.notify.notify_waiters();
    }

    /// Wakes the waits after the flag was set where nothing else can be done (a signal
    /// handler): the thread that sees the signal calls this.
    pub fn wake(&self) {
        self.notify.notify_waiters();
    }

    /// Resolves once the stop is asked for (at once if it was).
    pub async fn requested(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so a request between the two still wakes it.
            notified.as_mut().enable();
            if self.flag.load(Ordering::Relaxed) {
                return;
            }
            notified.await;
        }
    }
}

/// The load's loops and the synchronous waits read the flag as they always did.
impl Deref for Stop {
    type Target = AtomicBool;

    fn deref(&self) -> &AtomicBool {
        &self.flag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_wakes_on_the_request_and_a_late_one_returns_at_once() {
        let stop = Stop::new();
        let waiter = {
            let stop = stop.clone();
            tokio::spawn(async move { stop.requested().await })
        };
        let other = stop.clone();
        std::thread::spawn(move || other.request());
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken within the deadline")
            .expect("the waiter ran");
        assert!(stop.load(Ordering::Relaxed));
        // Asked for before anyone waits: no notification to miss.
        stop.requested().await;
    }

    #[tokio::test]
    async fn a_flag_set_elsewhere_wakes_the_wait_through_wake() {
        let stop = Stop::new();
        let flag = stop.flag();
        let waiter = {
            let stop = stop.clone();
            tokio::spawn(async move { stop.requested().await })
        };
        tokio::task::yield_now().await;
        flag.store(true, Ordering::Relaxed);
        stop.wake();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken within the deadline")
            .expect("the waiter ran");
    }
}
