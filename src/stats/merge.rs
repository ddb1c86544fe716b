//! One result from several: the runs of N processes or machines that loaded together (e.g.
//! `run --part I/N`), merged exactly. Counts add; histograms merge bucket by bucket, so every
//! percentile equals that of one histogram of all requests; series line up on the wall clock.
//! The same code path merges a run's workers ([`Recorder::merge`]).

use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::recorder::{IncompatibleHistograms, Recorder};
use super::result::{ClientUsage, PartSummary, PlanSummary, RunResult, RunTimes, SourceRun};
use crate::timefmt;

#[derive(Debug, Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("{file}: started_at {value:?} {why}")]
    StartedAt {
        file: String,
        value: String,
        why: &'static str,
    },
    #[error("{file}: {why}")]
    Inconsistent { file: String, why: String },
    #[error("{file}: {source}; merge only results of archbench runs")]
    Histograms {
        file: String,
        #[source]
        source: IncompatibleHistograms,
    },
}

/// A result with the name it is known by (its file).
pub struct NamedResult {
    pub file: String,
    pub result: RunResult,
}

/// Merges the results in `sources` into one, each source's own view kept in `sources`. The
/// caller judges the limiter of the whole (it needs the monitors' rules). Holds every source
/// at once: for many, feed a [`Merger`] one at a time.
pub fn merge_results(sources: Vec<NamedResult>) -> Result<RunResult, MergeError> {
    let mut starts = Vec::with_capacity(sources.len());
    for s in &sources {
        starts.push(started_at(&s.file, &s.result.started_at)?);
    }
    let earliest = starts.iter().copied().min().ok_or(MergeError::Empty)?;
    let mut merger = Merger::new(earliest);
    for s in sources {
        merger.add(s)?;
    }
    merger.finish()
}

/// A source's `started_at`, parsed.
pub fn started_at(file: &str, value: &str) -> Result<SystemTime, MergeError> {
    timefmt::parse_rfc3339(value).ok_or_else(|| MergeError::StartedAt {
        file: file.to_string(),
        value: value.to_string(),
        why: if timefmt::rfc3339_out_of_range(value) {
            "lies beyond the times archbench represents (up to 9999-12-30T22:00:00Z)"
        } else {
            "is not an RFC 3339 time"
        },
    })
}

/// A merge fed one source at a time, so memory holds one source's histograms, not all of
/// them (a source's decoded histograms take about 0.9 MiB; its summary stays, a few KiB).
/// The earliest start of all sources must be known first: series line up on it.
pub struct Merger {
    earliest: SystemTime,
    merged: Recorder,
    end_s: f64,
    first: Option<(PlanSummary, super::result::Environment)>,
    connections: u64,
    threads: u64,
    requests: Option<u64>,
    rate: Option<f64>,
    duration_s: Option<f64>,
    client: ClientUsage,
    first_send: Option<SystemTime>,
    interrupted: bool,
    servers: Vec<super::server::ServerUsage>,
    views: Vec<SourceRun>,
    /// Whether the first source ran an open loop, and its file.
    pacing: Option<(bool, String)>,
}

impl Merger {
    /// A merge of sources none of which started before `earliest`.
    pub fn new(earliest: SystemTime) -> Merger {
        Merger {
            earliest,
            merged: Recorder::new(None),
            end_s: 0.0,
            first: None,
            connections: 0,
            threads: 0,
            requests: None,
            rate: None,
            duration_s: None,
            client: ClientUsage::default(),
            first_send: None,
            interrupted: false,
            servers: Vec::new(),
            views: Vec::new(),
            pacing: None,
        }
    }

    /// Adds one source; its histograms are dropped once merged.
    pub fn add(&mut self, s: NamedResult) -> Result<(), MergeError> {
        let NamedResult { file, result: r } = s;
        let start = started_at(&file, &r.started_at)?;
        let offset = start
            .duration_since(self.earliest)
            .map_err(|_| MergeError::Inconsistent {
                file: file.clone(),
                why: "it started before the earliest start given to the merge".into(),
            })?;
        self.same_pacing(&file, r.plan.rate.is_some())?;
        let rec = r.recording().map_err(|why| MergeError::Inconsistent {
            file: file.clone(),
            why,
        })?;
        self.merged
            .merge(&rec, offset.as_secs_f64().round() as u32)
            .map_err(|source| MergeError::Histograms {
                file: file.clone(),
                source,
            })?;
        drop(rec);
        self.end_s = self.end_s.max(offset.as_secs_f64() + r.totals.elapsed_s);
        self.connections += r.plan.connections;
        self.threads += r.plan.threads;
        self.requests = add(self.requests, r.plan.requests);
        self.rate = add(self.rate, r.plan.rate);
        self.duration_s = max(self.duration_s, r.plan.duration_s);
        self.client.cpu_user_s += r.client.cpu_user_s;
        self.client.cpu_system_s += r.client.cpu_system_s;
        self.client.cpu_s += r.client.cpu_s;
        self.client.busiest_worker_percent = self
            .client
            .busiest_worker_percent
            .max(r.client.busiest_worker_percent);
        if let Some(f) = r.first_send_at.as_deref().and_then(timefmt::parse_rfc3339) {
            self.first_send = Some(self.first_send.map_or(f, |g| g.min(f)));
        }
        self.interrupted |= r.interrupted;
        if self.first.is_none() {
            self.first = Some((r.plan.clone(), r.environment.clone()));
        }
        self.servers.extend(r.servers);
        self.views.push(SourceRun {
            file,
            started_at: r.started_at,
            first_send_at: r.first_send_at,
            start_offset_s: offset.as_secs_f64(),
            plan: r.plan,
            environment: r.environment,
            totals: r.totals,
            interrupted: r.interrupted,
            client: r.client,
            limiter: r.limiter,
            pacing: r.pacing,
        });
        Ok(())
    }

    /// Refuses a closed loop merged with an open one: an open loop's latency counts from when
    /// each request was due (coordinated omission corrected), a closed loop's from when it
    /// went out, so one histogram of both means neither; and the merged plan would call the
    /// whole an open loop at the open part's rate.
    fn same_pacing(&mut self, file: &str, open: bool) -> Result<(), MergeError> {
        let loop_of = |open| match open {
            true => "an open loop (--rate)",
            false => "a closed loop",
        };
        match &self.pacing {
            None => self.pacing = Some((open, file.to_string())),
            Some((first, first_file)) if *first != open => {
                return Err(MergeError::Inconsistent {
                    file: file.to_string(),
                    why: format!(
                        "it ran {}, {first_file} {}: their latencies are measured differently (an open loop's from when each request was due); merge runs of one kind",
                        loop_of(open),
                        loop_of(*first)
                    ),
                })
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// The merged result.
    pub fn finish(self) -> Result<RunResult, MergeError> {
        let (mut plan, environment) = self.first.ok_or(MergeError::Empty)?;
        plan.part = None;
        plan.start_at = None;
        plan.connections = self.connections;
        plan.threads = self.threads;
        plan.requests = self.requests;
        plan.rate = self.rate;
        plan.duration_s = max(plan.duration_s, self.duration_s);
        let mut result = RunResult::from_recording(
            self.merged,
            plan,
            environment,
            RunTimes {
                started_at: self.earliest,
                first_send_at: self.first_send,
                elapsed_s: self.end_s,
                interrupted: self.interrupted,
            },
        );
        let mut client = self.client;
        client.requests_per_cpu_s =
            super::server::requests_per_cpu_s(result.totals.requests, client.cpu_s);
        result.client = client;
        result.servers = self.servers;
        result.sources = self.views;
        result.start_skew_s = start_skew(&result).map(|d| d.as_secs_f64());
        Ok(result)
    }
}

/// Start skew of the sources: latest first send minus earliest, each less its place in the
/// open-loop schedule (part I's first request is due I/rate after the start), when all of
/// them sent.
pub fn start_skew(r: &RunResult) -> Option<Duration> {
    let sends: Vec<SystemTime> = r
        .sources
        .iter()
        .map(first_send_vs_schedule)
        .collect::<Option<_>>()?;
    let (lo, hi) = (sends.iter().min()?, sends.iter().max()?);
    hi.duration_since(*lo).ok()
}

/// A source's first send, less when the schedule had it due after the start (open loop).
pub fn first_send_vs_schedule(s: &SourceRun) -> Option<SystemTime> {
    let sent = s
        .first_send_at
        .as_deref()
        .and_then(timefmt::parse_rfc3339)?;
    let due = match &s.plan.part {
        Some(PartSummary {
            index,
            rate: Some(rate),
            ..
        }) if *rate > 0.0 => {
            Duration::try_from_secs_f64(f64::from(*index) / rate).unwrap_or_default()
        }
        _ => Duration::ZERO,
    };
    Some(sent.checked_sub(due).unwrap_or(sent))
}

fn add<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Whether two plans loaded the same thing the same way (apart from their sizes).
pub fn same_load(a: &PlanSummary, b: &PlanSummary) -> bool {
    a.url == b.url && a.method == b.method && a.http_version == b.http_version
}
