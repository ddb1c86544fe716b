use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::latency_histogram;
use super::latency_series::LatencySeries;

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

/// One step of the run's time series (one second unless the run outgrew [`MAX_SERIES`]
/// steps), counted when requests finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondSample {
    /// Seconds since the start of the run; this sample covers [second, second + step).
    pub second: u32,
    /// Responses completed in this second.
    pub completed: u64,
    /// Requests that failed in this second.
    pub errors: u64,
    /// Bytes received in this second.
    pub bytes_read: u64,
    /// Open loop with `--stages`: the rate the schedule asked for over this step (this
    /// process's share), beside what `completed` achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
}

impl SecondSample {
    /// Counts another sample's requests, errors and bytes into this one (and its target: two
    /// parts of one load each ask for their share).
    pub fn add(&mut self, other: &SecondSample) {
        self.completed += other.completed;
        self.errors += other.errors;
        self.bytes_read += other.bytes_read;
        self.target_rate = match (self.target_rate, other.target_rate) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// Whether `theirs` merges exactly into `mine`: the same floor and precision (so buckets line
/// up) and a range no wider (so the counts fit).
fn mergeable(mine: &Histogram<u64>, theirs: &Histogram<u64>) -> bool {
    theirs.low() == mine.low() && theirs.sigfig() == mine.sigfig() && theirs.high() <= mine.high()
}

/// Status codes are counted in a fixed array by their value: every three-digit code a
/// response line can carry (a server may answer 999; it was counted as 0).
pub const STATUS_SLOTS: usize = 1000;

/// Most steps a series holds (2 MiB). A longer run doubles its step and pairs up the samples
/// it has, so a soak run of days stays in bounded memory: 18 h at 1 s, 36 h at 2 s, …
pub const MAX_SERIES: usize = 65_536;

/// Two histograms cannot be merged: one was recorded with narrower bounds than the values of
/// the other (a document from another tool or version).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {which} histograms were recorded with incompatible bounds")]
pub struct IncompatibleHistograms {
    pub which: &'static str,
}

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
    /// Open loop: how late each request went out after it could have (its intended send
    /// time, or the moment its connection came free if that was later), in microseconds.
    /// Made on the first open-loop send: a closed loop never pays its 140 KB.
    pub send_lateness: Option<Histogram<u64>>,
    /// Open loop: how early each request sent before its due time went out (within the
    /// pacing slack, so that sends due close together share a wake-up), in microseconds.
    /// Made on the first early send.
    pub send_earliness: Option<Histogram<u64>>,
    /// Over https: each handshake's time from TCP connected to TLS established, in
    /// microseconds. Made on the first handshake.
    pub tls_handshake: Option<Histogram<u64>>,
    /// Per connection that got a response: from its connect start to the first byte of a
    /// response read on it (TLS handshake included), in microseconds — h2load's "time to 1st
    /// byte", which is per client. Made by the first such connection.
    pub connection_first_byte: Option<Histogram<u64>>,
    /// Per client (a connection slot, across its reconnects): its answers over its span,
    /// from its first connect's start to its last answer (bounded by count) or the run's end
    /// (by time), in requests per second — h2load's per-client req/s. Kept exact, one value
    /// per connection: clients' rates often differ by less than a histogram's resolution.
    pub client_rates: Vec<f64>,
    /// Open loop: requests whose connection was still busy with the previous response at
    /// their intended send time (the server held them up; they went out on its response).
    pub sends_held_by_busy_connection: u64,
    pub completed: u64,
    /// Requests sent (some of their bytes written) whose response had not come in full when
    /// the run ended: neither answered nor failed. A server that answers slower than the
    /// run lasts shows here, not as nothing at all.
    pub unanswered_at_end: u64,
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
    /// Over https: handshakes, what they negotiated, why they failed (None over plain HTTP).
    pub tls: Option<Box<super::TlsFigures>>,
    /// Over HTTP/2: streams, resets, GOAWAYs (made by the first HTTP/2 connection).
    pub h2: Option<Box<super::H2Figures>>,
    /// Over HTTP/3: QUIC's counters, streams, resets, GOAWAYs.
    pub quic: Option<Box<super::QuicFigures>>,
    pub series: Vec<SecondSample>,
    /// Seconds each series sample covers: 1, doubled each time the series outgrows
    /// [`MAX_SERIES`].
    pub series_step_s: u32,
    /// Latency over time: per step, the histogram of total latency. Workers do not fill it
    /// (the engine's live collector does, from their interval shipments); merged documents
    /// add theirs.
    pub latency: LatencySeries,
}

/// One of a recording's histograms by name, to read and to write (`H`: a histogram, or one
/// made on first use).
type Field<H> = (
    &'static str,
    fn(&Recorder) -> &H,
    fn(&mut Recorder) -> &mut H,
);

/// The histograms every recording has, as merges check and add them.
const HISTOGRAMS: [Field<Histogram<u64>>; 5] = [
    ("total", |r| &r.total, |r| &mut r.total),
    ("service", |r| &r.service, |r| &mut r.service),
    ("connect", |r| &r.connect, |r| &mut r.connect),
    ("first_byte", |r| &r.first_byte, |r| &mut r.first_byte),
    ("worker_rate", |r| &r.worker_rate, |r| &mut r.worker_rate),
];

/// The histograms made on first use (so a closed loop over plain HTTP pays none of them):
/// one list, so a merge checks and adds each of them alike.
const OPTIONAL_HISTOGRAMS: [Field<Option<Histogram<u64>>>; 4] = [
    (
        "send_lateness",
        |r| &r.send_lateness,
        |r| &mut r.send_lateness,
    ),
    (
        "send_earliness",
        |r| &r.send_earliness,
        |r| &mut r.send_earliness,
    ),
    (
        "tls_handshake",
        |r| &r.tls_handshake,
        |r| &mut r.tls_handshake,
    ),
    (
        "connection_first_byte",
        |r| &r.connection_first_byte,
        |r| &mut r.connection_first_byte,
    ),
];

impl Recorder {
    pub fn new(expected: Option<Duration>) -> Recorder {
        let seconds = expected.map_or(16, |d| d.as_secs().saturating_add(2) as usize);
        Recorder {
            total: latency_histogram(),
            service: latency_histogram(),
            connect: latency_histogram(),
            first_byte: latency_histogram(),
            worker_rate: Histogram::new_with_bounds(1, 1_000_000_000, 3)
                .expect("constant histogram bounds are valid"),
            send_lateness: None,
            send_earliness: None,
            tls_handshake: None,
            connection_first_byte: None,
            client_rates: Vec::new(),
            sends_held_by_busy_connection: 0,
            completed: 0,
            unanswered_at_end: 0,
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
            tls: None,
            h2: None,
            quic: None,
            // Room for the expected run, grown once a second beyond it; never sized by
            // what a user typed alone (-d 100000h would ask for gigabytes).
            series: Vec::with_capacity(seconds.min(4096)),
            series_step_s: 1,
            latency: LatencySeries::default(),
        }
    }

    /// The series sample covering `second`, coarsening the series when it would outgrow
    /// [`MAX_SERIES`]. Amortised: at most one push per step, one coarsening per doubling.
    fn second(&mut self, second: u32) -> &mut SecondSample {
        while (second / self.series_step_s) as usize >= MAX_SERIES {
            self.coarsen();
        }
        let i = (second / self.series_step_s) as usize;
        while self.series.len() <= i {
            let s = self.series.len() as u32 * self.series_step_s;
            self.series.push(SecondSample {
                second: s,
                ..SecondSample::default()
            });
        }
        &mut self.series[i]
    }

    /// Doubles the series step, adding samples up in pairs.
    fn coarsen(&mut self) {
        self.series_step_s = self.series_step_s.saturating_mul(2);
        let step = self.series_step_s;
        let pairs = self.series.len().div_ceil(2);
        for k in 0..pairs {
            let mut s = self.series[2 * k];
            if let Some(b) = self.series.get(2 * k + 1) {
                s.add(b);
            }
            s.second = k as u32 * step;
            self.series[k] = s;
        }
        self.series.truncate(pairs);
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

    /// Over https: one handshake done, `took_us` after the TCP connection was.
    pub fn tls_handshake(&mut self, resumed: bool, took_us: u64) {
        self.tls().handshake(resumed);
        self.tls_handshake
            .get_or_insert_with(latency_histogram)
            .saturating_record(took_us);
    }

    /// A connection's first response byte came `us` after its connect began (once per
    /// connection).
    pub fn connection_first_byte(&mut self, us: u64) {
        self.connection_first_byte
            .get_or_insert_with(latency_histogram)
            .saturating_record(us);
    }

    /// A client's rate over its span, `per_s` requests per second.
    pub fn client_rate(&mut self, per_s: f64) {
        self.client_rates.push(per_s);
    }

    /// Over HTTP/2: its figures, made on first use.
    pub fn h2(&mut self) -> &mut super::H2Figures {
        self.h2.get_or_insert_with(Default::default)
    }

    /// Over HTTP/3: its figures, made on first use.
    pub fn quic(&mut self) -> &mut super::QuicFigures {
        self.quic.get_or_insert_with(Default::default)
    }

    /// Over https: the TLS figures, made on first use.
    pub fn tls(&mut self) -> &mut super::TlsFigures {
        self.tls.get_or_insert_with(Default::default)
    }

    /// Open loop: one request went out `lateness_us` after it could have.
    #[inline]
    pub fn sent_late(&mut self, lateness_us: u64) {
        self.send_lateness
            .get_or_insert_with(latency_histogram)
            .saturating_record(lateness_us);
    }

    /// Open loop: one request went out `earliness_us` before it was due (so it was not
    /// late: its lateness is 0).
    #[inline]
    pub fn sent_early(&mut self, earliness_us: u64) {
        self.sent_late(0);
        self.send_earliness
            .get_or_insert_with(latency_histogram)
            .saturating_record(earliness_us);
    }

    /// Adds another recording into this one: another worker's, or another process's
    /// (`offset_s` seconds later on the wall clock; 0 for workers of one run). Histograms
    /// of equal bounds merge exactly: counts add and every percentile equals that of one
    /// histogram of all values. Histograms from elsewhere with values beyond ours are
    /// refused, and nothing is changed then.
    pub fn merge(&mut self, other: &Recorder, offset_s: u32) -> Result<(), IncompatibleHistograms> {
        self.merge_histograms(other)?;
        self.merge_latency_series(other, offset_s);
        self.add_counts(other);
        if self.server_header.is_none() {
            self.server_header.clone_from(&other.server_header);
        }
        if let Some(theirs) = &other.h2 {
            self.h2.get_or_insert_with(Default::default).add(theirs);
        }
        if let Some(theirs) = &other.quic {
            self.quic.get_or_insert_with(Default::default).add(theirs);
        }
        if let Some(theirs) = &other.tls {
            self.tls.get_or_insert_with(Default::default).add(theirs);
        }
        self.merge_series(other, offset_s);
        Ok(())
    }

    /// Adds the other's histograms to ours, or refuses before changing any when one's
    /// configuration differs.
    fn merge_histograms(&mut self, other: &Recorder) -> Result<(), IncompatibleHistograms> {
        // Checked first, so a refused merge changes nothing. Compared by configuration, not
        // contents: a value in the top bucket reads back as the bucket's top, above `high`.
        for (which, field, _) in HISTOGRAMS {
            if !mergeable(field(self), field(other)) {
                return Err(IncompatibleHistograms { which });
            }
        }
        for (which, field, _) in OPTIONAL_HISTOGRAMS {
            if let Some(theirs) = field(other) {
                let fits = match field(self) {
                    Some(mine) => mergeable(mine, theirs),
                    None => mergeable(&latency_histogram(), theirs),
                };
                if !fits {
                    return Err(IncompatibleHistograms { which });
                }
            }
        }
        for (which, field, field_mut) in HISTOGRAMS {
            field_mut(self)
                .add(field(other))
                .map_err(|_| IncompatibleHistograms { which })?;
        }
        for (which, field, field_mut) in OPTIONAL_HISTOGRAMS {
            if let Some(theirs) = field(other) {
                field_mut(self)
                    .get_or_insert_with(latency_histogram)
                    .add(theirs)
                    .map_err(|_| IncompatibleHistograms { which })?;
            }
        }
        Ok(())
    }

    /// Merges the latency series, before the counts are added (they tell which recording
    /// has responses). A recording with responses but no latency series (a document of an
    /// older build) leaves the merge without one: a partial series would not add up to the
    /// totals.
    fn merge_latency_series(&mut self, other: &Recorder, offset_s: u32) {
        let without_series = |r: &Recorder| r.completed > 0 && r.latency.is_empty();
        if without_series(self) || without_series(other) {
            self.latency = LatencySeries::default();
        } else {
            self.latency.merge(&other.latency, offset_s);
        }
    }

    /// Adds the other's counts to ours: requests, errors, statuses, bytes, connections and
    /// body-length mismatches (against our first body length).
    fn add_counts(&mut self, other: &Recorder) {
        self.sends_held_by_busy_connection += other.sends_held_by_busy_connection;
        self.completed += other.completed;
        self.unanswered_at_end += other.unanswered_at_end;
        self.client_rates.extend_from_slice(&other.client_rates);
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
    }

    /// Adds the other's per-second series, `offset_s` later than ours.
    fn merge_series(&mut self, other: &Recorder, offset_s: u32) {
        // A coarser series absorbs a finer one; steps are powers of two, so they nest.
        while self.series_step_s < other.series_step_s {
            self.coarsen();
        }
        for s in &other.series {
            self.second(s.second.saturating_add(offset_s)).add(s);
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

impl ResponseTimes {
    /// A response that ended at `now`: its total from when it was intended (the open loop's
    /// coordinated-omission correction), service and first byte from its actual send.
    pub fn ended(
        now: std::time::Instant,
        intended: std::time::Instant,
        sent: std::time::Instant,
        first_byte: Option<std::time::Instant>,
        connect_us: Option<u64>,
    ) -> ResponseTimes {
        let us = |from: std::time::Instant, to: std::time::Instant| {
            to.saturating_duration_since(from).as_micros() as u64
        };
        ResponseTimes {
            total_us: us(intended, now),
            service_us: us(sent, now),
            first_byte_us: us(sent, first_byte.unwrap_or(now)),
            connect_us,
        }
    }
}

/// The part of a step of `step_s` seconds from `from_s` that a run of `elapsed_s` covered,
/// when it is enough to show as a rate: the last step of a run ends with it, and one a few
/// milliseconds long (responses read at the deadline, or a stop by `q`) would show as a
/// collapse of throughput or a p99 of two values. Charts and live views leave such steps out.
pub fn step_covered(from_s: f64, step_s: f64, elapsed_s: f64) -> Option<f64> {
    let to = (from_s + step_s).min(elapsed_s.max(from_s));
    (to - from_s >= 0.25 * step_s).then_some(to - from_s)
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
            merged.merge(w, 0).unwrap();
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
    fn series_of_a_soak_run_stays_bounded_and_adds_up() {
        let mut r = Recorder::new(Some(Duration::from_secs(1_000_000_000)));
        assert!(r.series.capacity() <= 4096);
        // One response per hour for ten years of run time.
        let hours = 24 * 365 * 10;
        for h in 0..hours {
            r.response(h * 3600, 200, 1, times(5));
        }
        assert!(r.series.len() <= MAX_SERIES, "{}", r.series.len());
        assert!(r.series_step_s > 1);
        let total: u64 = r.series.iter().map(|s| s.completed).sum();
        assert_eq!(total, u64::from(hours));
        // Samples stay in order and each starts on its step.
        for (k, s) in r.series.iter().enumerate() {
            assert_eq!(s.second, k as u32 * r.series_step_s);
        }
        // Merging a finer series into it keeps every count.
        let mut fine = Recorder::new(None);
        fine.response(7, 200, 1, times(5));
        r.merge(&fine, 0).unwrap();
        let total: u64 = r.series.iter().map(|s| s.completed).sum();
        assert_eq!(total, u64::from(hours) + 1);
    }

    #[test]
    fn a_source_without_latency_series_leaves_the_merge_without_one() {
        let with = |values: &[u64]| {
            let mut r = Recorder::new(None);
            let mut h = latency_histogram();
            for v in values {
                r.response(0, 200, 1, times(*v));
                h.record(*v).unwrap();
            }
            r.latency.add(0, &h);
            r
        };
        let mut a = with(&[10, 20]);
        a.merge(&with(&[30]), 0).unwrap();
        assert_eq!(a.latency.count(), 3);
        let mut old = with(&[40]);
        old.latency = LatencySeries::default();
        a.merge(&old, 0).unwrap();
        assert!(
            a.latency.is_empty(),
            "4 responses, a series of 3 would not add up"
        );
        a.merge(&with(&[50]), 0).unwrap();
        assert!(a.latency.is_empty());
    }

    #[test]
    fn merge_shifts_by_the_offset_and_refuses_wider_histograms() {
        let mut a = Recorder::new(None);
        let mut b = Recorder::new(None);
        a.response(0, 200, 1, times(5));
        b.response(0, 200, 1, times(5));
        a.merge(&b, 3).unwrap();
        assert_eq!(a.series[3].completed, 1);
        assert_eq!(a.series[0].completed, 1);
        let mut wide = Recorder::new(None);
        wide.total = Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        wide.total.record(3_000_000_000).unwrap();
        let before = a.total.clone();
        assert_eq!(
            a.merge(&wide, 0),
            Err(IncompatibleHistograms { which: "total" })
        );
        assert_eq!(a.total, before);
    }

    #[test]
    fn latencies_of_a_minute_and_more_merge() {
        // A value in the top bucket reads back above the 60 s bound; a value a little above
        // it is stored unclamped. Both are ours and must merge.
        for us in [60_000_000u64, 65_000_000, 90_000_000] {
            let mut w = Recorder::new(None);
            w.response(0, 200, 1, times(us));
            w.sent_late(us);
            let mut merged = Recorder::new(None);
            merged.merge(&w, 0).unwrap();
            assert_eq!(merged.total.len(), 1);
            assert_eq!(merged.total.max(), w.total.max());
            assert_eq!(merged.send_lateness.as_ref().map(|h| h.len()), Some(1));
        }
    }

    #[test]
    fn a_refused_merge_changes_nothing() {
        let mut a = Recorder::new(None);
        a.response(0, 200, 1, times(5));
        let mut other = Recorder::new(None);
        other.sent_late(3);
        other.service = Histogram::new_with_bounds(1, 60_000_000, 2).unwrap();
        assert_eq!(
            a.merge(&other, 0),
            Err(IncompatibleHistograms { which: "service" })
        );
        assert!(a.send_lateness.is_none());
        assert_eq!(a.completed, 1);
    }

    #[test]
    fn body_length_mismatch_across_workers() {
        let mut a = Recorder::new(None);
        let mut b = Recorder::new(None);
        a.response(0, 200, 10, times(5));
        b.response(0, 200, 11, times(5));
        b.response(0, 200, 11, times(5));
        a.merge(&b, 0).unwrap();
        assert_eq!(a.body_len_mismatches, 2);
        assert_eq!(a.status_counts().collect::<Vec<_>>(), vec![(200, 3)]);
    }
}
