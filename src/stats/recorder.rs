use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::latency_histogram;

/// Why a request failed. A failed request is data: counted by kind, never by message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// TCP connect failed (refused, unreachable, ports exhausted).
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// No complete response within `--timeout`.
    Timeout,
    /// Reset or closed by the server before the response was complete.
    Read,
    /// Sending the request failed.
    Write,
    /// The response could not be framed (bad status line, bad chunking, oversized head).
    Protocol,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Connect,
        ErrorKind::Tls,
        ErrorKind::Timeout,
        ErrorKind::Read,
        ErrorKind::Write,
        ErrorKind::Protocol,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Tls => "tls",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Read => "read",
            ErrorKind::Write => "write",
            ErrorKind::Protocol => "protocol",
        }
    }
}

/// One second of the run, counted when requests finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondSample {
    /// Seconds since the start of the run (this sample covers [second, second+1)).
    pub second: u32,
    /// Responses completed in this second.
    pub completed: u64,
    /// Requests that failed in this second.
    pub errors: u64,
    /// Bytes received in this second.
    pub bytes_read: u64,
}

/// Status codes 100..=599 are counted in a fixed array; anything else lands in slot 0.
const STATUS_SLOTS: usize = 600;

/// Everything one worker measures. Workers never share one; [`Recorder::merge`] combines them.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency from the intended start of each request to its last byte (coordinated-omission
    /// corrected under `--rate`; includes connect when the request opened its connection).
    pub total: Histogram<u64>,
    /// From writing the request to the last byte: the uncorrected service time.
    pub service: Histogram<u64>,
    /// TCP connect time, for requests that opened a connection.
    pub connect: Histogram<u64>,
    /// From writing the request to the first response byte.
    pub first_byte: Histogram<u64>,
    /// Requests per second of each worker, sampled every 100 ms (wrk's Req/Sec row).
    pub worker_rate: Histogram<u64>,
    pub completed: u64,
    pub errors: [u64; ErrorKind::COUNT],
    pub status: Box<[u64; STATUS_SLOTS]>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Response body bytes (de-chunked), summed.
    pub body_bytes: u64,
    /// Responses that left their connection open for another request.
    pub keepalive_responses: u64,
    pub connections_opened: u64,
    /// Connect errors that were EADDRNOTAVAIL: no free local (ephemeral) port.
    pub ports_exhausted: u64,
    /// Body length of the first response (ab's "Document Length").
    pub first_body_len: Option<u64>,
    /// Responses whose body length differed from the first one.
    pub body_len_mismatches: u64,
    pub server_header: Option<String>,
    pub series: Vec<SecondSample>,
}

impl Recorder {
    pub fn new(expected: Option<Duration>) -> Recorder {
        let seconds = expected.map_or(16, |d| d.as_secs() as usize + 2);
        Recorder {
            total: latency_histogram(),
            service: latency_histogram(),
            connect: latency_histogram(),
            first_byte: latency_histogram(),
            worker_rate: Histogram::new_with_bounds(1, 1_000_000_000, 3).expect("valid bounds"),
            completed: 0,
            errors: [0; ErrorKind::COUNT],
            status: Box::new([0; STATUS_SLOTS]),
            bytes_read: 0,
            bytes_written: 0,
            body_bytes: 0,
            keepalive_responses: 0,
            connections_opened: 0,
            ports_exhausted: 0,
            first_body_len: None,
            body_len_mismatches: 0,
            server_header: None,
            series: Vec::with_capacity(seconds),
        }
    }

    fn second(&mut self, second: u32) -> &mut SecondSample {
        let i = second as usize;
        while self.series.len() <= i {
            let s = self.series.len() as u32;
            self.series.push(SecondSample {
                second: s,
                ..SecondSample::default()
            });
        }
        &mut self.series[i]
    }

    /// Records one answered request. Durations are in microseconds.
    #[inline]
    pub fn response(&mut self, at_second: u32, status: u16, body_len: u64, times: ResponseTimes) {
        self.completed += 1;
        self.body_bytes += body_len;
        let slot = if (status as usize) < STATUS_SLOTS {
            status as usize
        } else {
            0
        };
        self.status[slot] += 1;
        self.total.saturating_record(times.total_us);
        self.service.saturating_record(times.service_us);
        self.first_byte.saturating_record(times.first_byte_us);
        if let Some(c) = times.connect_us {
            self.connect.saturating_record(c);
        }
        match self.first_body_len {
            None => self.first_body_len = Some(body_len),
            Some(first) if first != body_len => self.body_len_mismatches += 1,
            Some(_) => {}
        }
        self.second(at_second).completed += 1;
    }

    #[inline]
    pub fn error(&mut self, at_second: u32, kind: ErrorKind) {
        self.errors[kind as usize] += 1;
        self.second(at_second).errors += 1;
    }

    #[inline]
    pub fn bytes_in(&mut self, at_second: u32, n: u64) {
        self.bytes_read += n;
        self.second(at_second).bytes_read += n;
    }

    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Status codes with their counts, for reports.
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code as u16, n))
    }

    /// Adds another worker's recording into this one. Histograms share bounds, so the merge
    /// is exact: counts add and every percentile equals that of one histogram of all values.
    pub fn merge(&mut self, other: &Recorder) {
        for (a, b) in [
            (&mut self.total, &other.total),
            (&mut self.service, &other.service),
            (&mut self.connect, &other.connect),
            (&mut self.first_byte, &other.first_byte),
        ] {
            a.add(b).expect("histograms share bounds");
        }
        let _ = self.worker_rate.add(&other.worker_rate);
        self.completed += other.completed;
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(other.status.iter()) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.body_bytes += other.body_bytes;
        self.keepalive_responses += other.keepalive_responses;
        self.connections_opened += other.connections_opened;
        self.ports_exhausted += other.ports_exhausted;
        self.body_len_mismatches += other.body_len_mismatches;
        match (self.first_body_len, other.first_body_len) {
            (None, theirs) => self.first_body_len = theirs,
            (Some(mine), Some(theirs)) if mine != theirs => {
                // Their responses all differ from our first length, except the mismatches
                // they already counted against their own first length.
                self.body_len_mismatches += other.completed - other.body_len_mismatches;
            }
            _ => {}
        }
        if self.server_header.is_none() {
            self.server_header.clone_from(&other.server_header);
        }
        for s in &other.series {
            let mine = self.second(s.second);
            mine.completed += s.completed;
            mine.errors += s.errors;
            mine.bytes_read += s.bytes_read;
        }
    }
}

/// The durations of one answered request, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct ResponseTimes {
    pub total_us: u64,
    pub service_us: u64,
    pub first_byte_us: u64,
    pub connect_us: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(us: u64) -> ResponseTimes {
        ResponseTimes {
            total_us: us,
            service_us: us,
            first_byte_us: us / 2,
            connect_us: None,
        }
    }

    #[test]
    fn merge_is_exact() {
        // Three workers with different value distributions vs one recorder of everything.
        let mut all = Recorder::new(None);
        let mut workers: Vec<Recorder> = (0..3).map(|_| Recorder::new(None)).collect();
        let mut x: u64 = 12345;
        for i in 0..30_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let us = 1 + (x >> 33) % (1 + 1000 * (i % 3 + 1) * (i % 3 + 1) * 100);
            let sec = (i / 10_000) as u32;
            workers[(i % 3) as usize].response(sec, 200, 615, times(us));
            all.response(sec, 200, 615, times(us));
        }
        let mut merged = Recorder::new(None);
        for w in &workers {
            merged.merge(w);
        }
        assert_eq!(merged.completed, 30_000);
        assert_eq!(
            merged.total.len(),
            workers.iter().map(|w| w.total.len()).sum::<u64>()
        );
        for q in [0.0, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(
                merged.total.value_at_quantile(q),
                all.total.value_at_quantile(q)
            );
        }
        assert_eq!(merged.total, all.total);
        assert_eq!(merged.series, all.series);
        assert_eq!(merged.body_len_mismatches, 0);
    }

    #[test]
    fn body_length_mismatch_across_workers() {
        let mut a = Recorder::new(None);
        let mut b = Recorder::new(None);
        a.response(0, 200, 10, times(5));
        b.response(0, 200, 11, times(5));
        b.response(0, 200, 11, times(5));
        a.merge(&b);
        assert_eq!(a.body_len_mismatches, 2);
        assert_eq!(a.status_counts().collect::<Vec<_>>(), vec![(200, 3)]);
    }
}
