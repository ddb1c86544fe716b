//! One wait for the k8s commands (kube-runtime's `Condition` and `await_condition` are the
//! model): a condition folds what the watches send into what it has seen and says, when
//! looked at, whether it is met or what is still missing; one driver owns the deadline, the
//! stop (a notification, not a polled flag) and the progress line. `up`'s rollout, the old
//! pods leaving the Services after `config`, and `down`'s removal are its conditions.

use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use super::K8sError;
use crate::stop::Stop;

/// What a condition says when looked at.
#[derive(Debug, PartialEq)]
pub enum Look<T> {
    /// Met: the wait is over.
    Met(T),
    /// Not yet: what is still missing, as the progress line (empty: nothing to say yet).
    Pending(String),
}

/// What a wait waits for.
pub trait Condition {
    /// What the watches send.
    type Event;
    /// What the wait returns once the condition is met.
    type Met;

    /// Folds one event in; `None` when the watches ended. An error ends the wait.
    fn seen(&mut self, event: Option<Self::Event>) -> Result<(), K8sError>;

    /// Whether the condition is met by what was seen, at this instant (a condition may ask
    /// the API server what the watches do not carry, e.g. why a ReplicaSet makes no pods).
    fn look(&mut self, now: Instant) -> impl Future<Output = Result<Look<Self::Met>, K8sError>>;

    /// The error at the deadline, given the last progress line.
    fn timed_out(&self, last_line: &str) -> K8sError;
}

/// How soon a condition is looked at again when nothing was sent: some depend on time
/// passing alone (the scheduler's retry after a release).
const LOOK_AGAIN: Duration = Duration::from_millis(250);

/// A wait's deadline, stop and progress line.
pub struct Wait<'a> {
    /// What is waited for, for the interruption's message ("the rollout").
    pub waiting_for: &'static str,
    pub deadline: Instant,
    pub stop: &'a Stop,
    pub progress: &'a mut dyn FnMut(&str),
}

impl Wait<'_> {
    /// Feeds `events` to `condition` and looks at it after each (and every [`LOOK_AGAIN`])
    /// until it is met, fails, the deadline passes or the stop comes. The progress line is
    /// said whenever it changes.
    pub async fn until<C, S>(self, mut events: S, condition: &mut C) -> Result<C::Met, K8sError>
    where
        C: Condition,
        S: Stream<Item = C::Event> + Unpin,
    {
        let Wait {
            waiting_for,
            deadline,
            stop,
            progress,
        } = self;
        let interrupted = || K8sError::interrupted(format!("waiting for {waiting_for}"));
        let mut last_line = String::new();
        loop {
            tokio::select! {
                // A stop wins over anything that came with it.
                biased;
                () = stop.requested() => return Err(interrupted()),
                () = tokio::time::sleep_until(deadline) => {}
                next = events.next() => condition.seen(next)?,
                () = tokio::time::sleep(LOOK_AGAIN) => {}
            }
            let now = Instant::now();
            match condition.look(now).await? {
                Look::Met(met) => return Ok(met),
                Look::Pending(line) => {
                    if !line.is_empty() && line != last_line {
                        progress(&line);
                        last_line = line;
                    }
                }
            }
            if now >= deadline {
                return Err(condition.timed_out(&last_line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Met once `want` events were seen; says how many are missing.
    struct Count {
        seen: u32,
        want: u32,
    }

    impl Condition for Count {
        type Event = u32;
        type Met = u32;

        fn seen(&mut self, event: Option<u32>) -> Result<(), K8sError> {
            match event {
                Some(_) => {
                    self.seen += 1;
                    Ok(())
                }
                None => Err(K8sError::Failed {
                    what: "watch".into(),
                    message: "ended".into(),
                }),
            }
        }

        async fn look(&mut self, _now: Instant) -> Result<Look<u32>, K8sError> {
            Ok(if self.seen >= self.want {
                Look::Met(self.seen)
            } else {
                Look::Pending(format!("{} to go", self.want - self.seen))
            })
        }

        fn timed_out(&self, last_line: &str) -> K8sError {
            K8sError::Timeout {
                seconds: 0,
                what: last_line.to_string(),
                advice: String::new(),
            }
        }
    }

    fn wait<'a>(stop: &'a Stop, lines: &'a mut dyn FnMut(&str), within: Duration) -> Wait<'a> {
        Wait {
            waiting_for: "the count",
            deadline: Instant::now() + within,
            stop,
            progress: lines,
        }
    }

    #[tokio::test]
    async fn met_after_the_events_with_each_new_line_said_once() {
        let stop = Stop::new();
        let mut said = Vec::new();
        let mut lines = |l: &str| said.push(l.to_string());
        let events = futures::stream::iter([1, 2, 3]).chain(futures::stream::pending());
        let mut c = Count { seen: 0, want: 3 };
        let met = wait(&stop, &mut lines, Duration::from_secs(10))
            .until(events, &mut c)
            .await;
        assert_eq!(met.ok(), Some(3));
        assert_eq!(said, ["2 to go", "1 to go"]);
    }

    #[tokio::test]
    async fn the_deadline_gives_the_conditions_error_with_the_last_line() {
        let stop = Stop::new();
        let mut lines = |_: &str| {};
        let events = futures::stream::iter([1]).chain(futures::stream::pending());
        let mut c = Count { seen: 0, want: 3 };
        let started = std::time::Instant::now();
        let err = wait(&stop, &mut lines, Duration::from_millis(300))
            .until(events, &mut c)
            .await
            .expect_err("not met");
        assert!(
            matches!(&err, K8sError::Timeout { what, .. } if what == "2 to go"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_stop_ends_the_wait_at_once_and_says_what_it_waited_for() {
        let stop = Stop::new();
        let asker = stop.clone();
        let mut lines = |_: &str| {};
        let mut c = Count { seen: 0, want: 1 };
        std::thread::spawn(move || asker.request());
        let err = wait(&stop, &mut lines, Duration::from_secs(600))
            .until(futures::stream::pending(), &mut c)
            .await
            .expect_err("stopped");
        assert_eq!(
            err.to_string(),
            K8sError::interrupted("waiting for the count").to_string()
        );
    }

    #[tokio::test]
    async fn watches_that_end_end_the_wait() {
        let stop = Stop::new();
        let mut lines = |_: &str| {};
        let mut c = Count { seen: 0, want: 5 };
        let err = wait(&stop, &mut lines, Duration::from_secs(600))
            .until(futures::stream::iter([1]), &mut c)
            .await
            .expect_err("ended");
        assert!(matches!(err, K8sError::Failed { .. }), "{err}");
    }
}
