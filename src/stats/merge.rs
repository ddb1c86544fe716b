//! One result from several: the runs of N processes or machines that loaded together (e.g.
//! `run --part I/N`), merged exactly. Counts add; histograms merge bucket by bucket, so every
//! percentile equals that of one histogram of all requests; series line up on the wall clock.
//! The same code path merges a run's workers ([`Recorder::merge`]).

use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::recorder::{IncompatibleHistograms, Recorder};
use super::result::{ClientUsage, PlanSummary, RunResult, RunTimes, SourceRun};
use crate::timefmt;

#[derive(Debug, Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("{file}: started_at {value:?} is not an RFC 3339 time")]
    StartedAt { file: String, value: String },
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
/// caller judges the limiter of the whole (it needs the monitors' rules).
pub fn merge_results(sources: Vec<NamedResult>) -> Result<RunResult, MergeError> {
    let first = sources.first().ok_or(MergeError::Empty)?;
    let mut starts = Vec::with_capacity(sources.len());
    for s in &sources {
        let at =
            timefmt::parse_rfc3339(&s.result.started_at).ok_or_else(|| MergeError::StartedAt {
                file: s.file.clone(),
                value: s.result.started_at.clone(),
            })?;
        starts.push(at);
    }
    let earliest = starts
        .iter()
        .copied()
        .min()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut merged = Recorder::new(None);
    let mut end_s: f64 = 0.0;
    let mut plan = first.result.plan.clone();
    plan.part = None;
    plan.start_at = None;
    let (mut connections, mut threads) = (0, 0);
    let (mut requests, mut rate): (Option<u64>, Option<f64>) = (None, None);
    let mut client = ClientUsage::default();
    let mut first_send: Option<SystemTime> = None;
    let mut interrupted = false;
    let mut servers = Vec::new();
    let mut views = Vec::with_capacity(sources.len());
    for (s, start) in sources.iter().zip(&starts) {
        let r = &s.result;
        let offset = start.duration_since(earliest).unwrap_or_default();
        let rec = r.recording().map_err(|why| MergeError::Inconsistent {
            file: s.file.clone(),
            why,
        })?;
        merged
            .merge(&rec, offset.as_secs_f64().round() as u32)
            .map_err(|source| MergeError::Histograms {
                file: s.file.clone(),
                source,
            })?;
        end_s = end_s.max(offset.as_secs_f64() + r.totals.elapsed_s);
        connections += r.plan.connections;
        threads += r.plan.threads;
        requests = add(requests, r.plan.requests);
        rate = add(rate, r.plan.rate);
        plan.duration_s = max(plan.duration_s, r.plan.duration_s);
        client.cpu_user_s += r.client.cpu_user_s;
        client.cpu_system_s += r.client.cpu_system_s;
        client.cpu_s += r.client.cpu_s;
        client.busiest_worker_percent = client
            .busiest_worker_percent
            .max(r.client.busiest_worker_percent);
        if let Some(f) = r.first_send_at.as_deref().and_then(timefmt::parse_rfc3339) {
            first_send = Some(first_send.map_or(f, |g| g.min(f)));
        }
        interrupted |= r.interrupted;
        servers.extend(r.servers.iter().cloned());
        views.push(SourceRun {
            file: s.file.clone(),
            started_at: r.started_at.clone(),
            first_send_at: r.first_send_at.clone(),
            start_offset_s: offset.as_secs_f64(),
            plan: r.plan.clone(),
            environment: r.environment.clone(),
            totals: r.totals.clone(),
            interrupted: r.interrupted,
            client: r.client.clone(),
            limiter: r.limiter.clone(),
            pacing: r.pacing.clone(),
        });
    }
    plan.connections = connections;
    plan.threads = threads;
    plan.requests = requests;
    plan.rate = rate;
    let environment = first.result.environment.clone();
    let mut result = RunResult::from_recording(
        merged,
        plan,
        environment,
        RunTimes {
            started_at: earliest,
            first_send_at: first_send,
            elapsed_s: end_s,
            interrupted,
        },
    );
    if client.cpu_s > 0.0 {
        client.requests_per_cpu_s = result.totals.requests as f64 / client.cpu_s;
    }
    result.client = client;
    result.servers = servers;
    result.sources = views;
    result.start_skew_s = start_skew(&result).map(|d| d.as_secs_f64());
    Ok(result)
}

/// Start skew of the sources: latest first send minus earliest, when all of them sent.
pub fn start_skew(r: &RunResult) -> Option<Duration> {
    let sends: Vec<SystemTime> = r
        .sources
        .iter()
        .map(|s| s.first_send_at.as_deref().and_then(timefmt::parse_rfc3339))
        .collect::<Option<_>>()?;
    let (lo, hi) = (sends.iter().min()?, sends.iter().max()?);
    hi.duration_since(*lo).ok()
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
