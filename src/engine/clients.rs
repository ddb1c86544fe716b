//! Each client's span, for the per-client request rate (h2load's `req/s` row): a connection
//! slot, across its reconnects, from its first connect's start to its last answer (a run
//! bounded by count: the client was done then) or to the run's end (bounded by time), and
//! the answers it got in it.

use std::time::Instant;

use crate::stats::Recorder;

/// One worker's clients, by local connection index.
pub(super) struct ClientSpans {
    each: Box<[Span]>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Span {
    began: Option<Instant>,
    last_answer: Option<Instant>,
    answered: u64,
}

impl ClientSpans {
    pub fn new(clients: usize) -> ClientSpans {
        ClientSpans {
            each: vec![Span::default(); clients].into_boxed_slice(),
        }
    }

    /// Client `i` begins a connect at `now` (only its first counts).
    #[inline]
    pub fn connecting(&mut self, i: usize, now: Instant) {
        if let Some(s) = self.each.get_mut(i) {
            s.began.get_or_insert(now);
        }
    }

    /// Client `i` got an answer at `now`.
    #[inline]
    pub fn answered(&mut self, i: usize, now: Instant) {
        if let Some(s) = self.each.get_mut(i) {
            s.answered += 1;
            s.last_answer = Some(now);
        }
    }

    /// Each client that began records its rate in `rec`: its answers over its span, which
    /// ends at its last answer when the run was `bounded_by_count`, else at `end`. A client
    /// whose span is empty records none (h2load skips it too).
    pub fn record(&self, rec: &mut Recorder, bounded_by_count: bool, end: Instant) {
        for s in self.each.iter() {
            let Some(began) = s.began else { continue };
            let ended = match s.last_answer {
                Some(t) if bounded_by_count => t,
                _ => end,
            };
            let span = ended.saturating_duration_since(began).as_secs_f64();
            if span > 1e-9 {
                rec.client_rate(s.answered as f64 / span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_clients_rate_is_its_answers_over_its_own_span() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut c = ClientSpans::new(3);
        // Client 0: 10 answers from 0 to 100 ms; client 1: 5 from 50 ms (a reconnect at
        // 60 ms does not move its start) to 100 ms; client 2 never connected.
        c.connecting(0, at(0));
        c.connecting(1, at(50));
        c.connecting(1, at(60));
        for k in 1..=10 {
            c.answered(0, at(10 * k));
        }
        for k in 1..=5 {
            c.answered(1, at(50 + 10 * k));
        }
        let mut rec = Recorder::new(None);
        c.record(&mut rec, true, at(1000));
        // 10 answers over 0.1 s and 5 over 0.05 s: 100 req/s each.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert_eq!(rec.client_rates.len(), 2);
        assert!(
            rec.client_rates.iter().all(|r| close(*r, 100.0)),
            "{:?}",
            rec.client_rates
        );
        // Bounded by time: both spans run to the end, 1 s and 0.95 s.
        let mut rec = Recorder::new(None);
        c.record(&mut rec, false, at(1000));
        assert!(close(rec.client_rates[0], 10.0), "{:?}", rec.client_rates);
        assert!(
            close(rec.client_rates[1], 5.0 / 0.95),
            "{:?}",
            rec.client_rates
        );
    }
}
