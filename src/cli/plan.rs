//! Stage two of parsing: raw flags become a validated [`Plan`]. Bad combinations fail here
//! with a sentence that names the problem and the fix.

use std::path::Path;
use std::time::Duration;

use thiserror::Error;

use super::args::{AbArgs, CompareArgs, RunArgs, WrkArgs};
use crate::engine::{Pacing, Plan, StopRule};
use crate::http::{DefaultHeaders, HttpVersion, RequestSpec, Target, TargetError};

/// A command line that cannot become a plan. Always the user's to fix: exit status 2.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Watch(#[from] crate::monitor::MonitorError),
    #[error("cannot read body file {path}: {source}; check the path")]
    BodyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// Whether building a plan looks the host up. Only validation and fuzzing skip it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Resolve,
    Skip,
}

/// What every front end fills in; [`build`] validates it.
struct PlanInput<'a> {
    url: &'a str,
    method: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    version: HttpVersion,
    keepalive: bool,
    defaults: DefaultHeaders,
    connections: u64,
    threads: u64,
    duration: Option<Duration>,
    requests: Option<u64>,
    rate: Option<f64>,
    timeout: Duration,
    insecure: bool,
}

pub fn default_threads() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

fn archbench_defaults() -> DefaultHeaders {
    DefaultHeaders::AgentAndAccept(format!("archbench/{}", env!("CARGO_PKG_VERSION")))
}

fn build(input: PlanInput<'_>, lookup: Lookup) -> Result<Plan, PlanError> {
    if input.connections == 0 {
        return Err(invalid(
            "connections must be at least 1 (-c 0 opens nothing); use e.g. -c 50",
        ));
    }
    if input.threads == 0 {
        return Err(invalid("threads must be at least 1; use e.g. -t 2"));
    }
    if input.requests == Some(0) {
        return Err(invalid(
            "request count must be at least 1; use e.g. -n 1000",
        ));
    }
    if let Some(n) = input.requests {
        if n < input.connections {
            return Err(invalid(format!(
                "-n {n} is below -c {}: each connection needs at least one request; raise -n or lower -c",
                input.connections
            )));
        }
    }
    if input.duration == Some(Duration::ZERO) {
        return Err(invalid("duration must be above zero; use e.g. -d 10s"));
    }
    if input.timeout.is_zero() {
        return Err(invalid("timeout must be above zero; use e.g. --timeout 2s"));
    }
    let pacing = match input.rate {
        None => Pacing::Closed,
        Some(r) if r > 0.0 => Pacing::Open { rate: r },
        Some(_) => {
            return Err(invalid(
                "--rate must be above zero requests per second; omit it for a closed loop",
            ))
        }
    };
    if input.method.is_empty() || !input.method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(invalid(format!(
            "invalid HTTP method {:?}; use e.g. GET or POST",
            input.method
        )));
    }
    if input.connections > 1_000_000 {
        return Err(invalid("more than 1,000,000 connections is not supported"));
    }
    let target = match lookup {
        Lookup::Resolve => Target::parse(input.url)?,
        Lookup::Skip => Target::parse_unresolved(input.url)?,
    };
    let basic_auth = Target::basic_auth(input.url);
    Ok(Plan {
        target,
        request: RequestSpec {
            method: input.method,
            headers: input.headers,
            body: input.body,
            version: input.version,
            keepalive: input.keepalive,
            defaults: input.defaults,
        },
        basic_auth,
        connections: input.connections as usize,
        threads: input.threads.min(input.connections) as usize,
        stop: StopRule {
            duration: input.duration,
            requests: input.requests,
        },
        pacing,
        timeout: input.timeout,
        insecure: input.insecure,
    })
}

fn read_body(path: &Path) -> Result<Vec<u8>, PlanError> {
    std::fs::read(path).map_err(|source| PlanError::BodyFile {
        path: path.display().to_string(),
        source,
    })
}

pub fn run_plan(a: &RunArgs) -> Result<Plan, PlanError> {
    run_plan_with(a, Lookup::Resolve)
}

pub fn run_plan_with(a: &RunArgs, lookup: Lookup) -> Result<Plan, PlanError> {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => read_body(p)?,
        (None, None) => Vec::new(),
    };
    let duration = match (a.duration, a.requests) {
        (None, None) => Some(Duration::from_secs(10)),
        (d, _) => d,
    };
    build(
        PlanInput {
            url: &a.url,
            method: a.method.to_ascii_uppercase(),
            headers: a.headers.clone(),
            body,
            version: if a.http10 {
                HttpVersion::Http10
            } else {
                HttpVersion::Http11
            },
            keepalive: !a.no_keepalive,
            defaults: archbench_defaults(),
            connections: a.connections,
            threads: a.threads.unwrap_or_else(default_threads),
            duration,
            requests: a.requests,
            rate: a.rate,
            timeout: a.timeout,
            insecure: a.insecure,
        },
        lookup,
    )
}

pub fn wrk_plan(a: &WrkArgs) -> Result<Plan, PlanError> {
    wrk_plan_with(a, Lookup::Resolve)
}

pub fn wrk_plan_with(a: &WrkArgs, lookup: Lookup) -> Result<Plan, PlanError> {
    if a.script.is_some() {
        return Err(invalid(
            "-s/--script: Lua scripts are not supported by archbench; use -H for headers, or `archbench run` with -m/--body for other requests",
        ));
    }
    let url = a
        .url
        .as_deref()
        .ok_or_else(|| invalid("missing URL; usage: archbench wrk <options> <url>"))?;
    if a.connections > 0 && a.connections < a.threads {
        // wrk's own rule, kept so scripts see the same refusal.
        return Err(invalid(
            "number of connections must be >= threads; raise -c or lower -t",
        ));
    }
    build(
        PlanInput {
            url,
            method: "GET".into(),
            headers: a.headers.clone(),
            body: Vec::new(),
            version: HttpVersion::Http11,
            keepalive: true,
            defaults: DefaultHeaders::HostOnly,
            connections: a.connections,
            threads: a.threads,
            duration: Some(a.duration),
            requests: None,
            rate: None,
            timeout: a.timeout,
            insecure: true,
        },
        lookup,
    )
}

/// ab's cap on requests when only a time limit is given.
pub const AB_MAX_REQUESTS: u64 = 50_000;

pub fn ab_plan(a: &AbArgs) -> Result<Plan, PlanError> {
    ab_plan_with(a, Lookup::Resolve)
}

pub fn ab_plan_with(a: &AbArgs, lookup: Lookup) -> Result<Plan, PlanError> {
    let url = a.url.as_deref().ok_or_else(|| {
        invalid("missing URL; usage: archbench ab [options] [http[s]://]hostname[:port]/path")
    })?;
    let url_full = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let body = match &a.postfile {
        Some(p) => read_body(p)?,
        None => Vec::new(),
    };
    let method = match (&a.method, &a.postfile) {
        (Some(m), _) => m.to_ascii_uppercase(),
        (None, Some(_)) => "POST".into(),
        (None, None) => "GET".into(),
    };
    let mut headers = a.headers.clone();
    if let Some(ct) = &a.content_type {
        headers.push(("Content-Type".into(), ct.clone()));
    } else if a.postfile.is_some() {
        headers.push(("Content-Type".into(), "text/plain".into()));
    }
    let requests = match (a.requests, a.timelimit) {
        (Some(n), _) => n,
        (None, Some(_)) => AB_MAX_REQUESTS,
        (None, None) => 1,
    };
    if requests < a.concurrency {
        return Err(invalid(format!(
            "Cannot use concurrency level greater than total number of requests (-c {} > -n {requests}); lower -c or raise -n",
            a.concurrency
        )));
    }
    build(
        PlanInput {
            url: &url_full,
            method,
            headers,
            body,
            version: HttpVersion::Http10,
            keepalive: a.keepalive,
            defaults: DefaultHeaders::AgentAndAccept("ApacheBench/2.3 (archbench)".into()),
            connections: a.concurrency,
            // ab is single-threaded; one worker per core is ours, the layout is ab's.
            threads: default_threads(),
            duration: a.timelimit,
            requests: Some(requests),
            rate: None,
            timeout: a.timeout,
            insecure: true,
        },
        lookup,
    )
}

/// One plan per `NAME=URL`, the watch specs matched to their targets, and the command line
/// that reproduces one run of each.
pub fn compare_plan(a: &CompareArgs) -> Result<crate::compare::ComparePlan, PlanError> {
    use crate::compare::{ComparePlan, Contender, Schedule};
    if a.runs == 0 {
        return Err(invalid("--runs must be at least 1"));
    }
    let mut contenders: Vec<Contender> = Vec::new();
    for t in &a.targets {
        let (name, url) = t
            .split_once('=')
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
            .ok_or_else(|| {
                invalid(format!(
                    "target {t:?} is not NAME=URL; use e.g. arm=http://10.0.0.2/"
                ))
            })?;
        if contenders.iter().any(|c| c.name == name) {
            return Err(invalid(format!("target name {name:?} is given twice")));
        }
        let plan = build(
            PlanInput {
                url,
                method: "GET".into(),
                headers: a.headers.clone(),
                body: Vec::new(),
                version: HttpVersion::Http11,
                keepalive: true,
                defaults: archbench_defaults(),
                connections: a.connections,
                threads: a.threads.unwrap_or_else(default_threads),
                duration: Some(a.duration),
                requests: None,
                rate: a.rate,
                timeout: a.timeout,
                insecure: a.insecure,
            },
            Lookup::Resolve,
        )?;
        contenders.push(Contender {
            name: name.to_string(),
            plan,
            watch: Vec::new(),
        });
    }
    for w in &with_perf(&a.watch, &a.perf)? {
        let c = contenders
            .iter_mut()
            .find(|c| c.name == w.label)
            .ok_or_else(|| {
                invalid(format!(
                    "--watch {}: no target named {:?}",
                    w.target, w.label
                ))
            })?;
        c.watch.push(w.clone());
    }
    let schedule = if a.sequential {
        Schedule::Sequential
    } else if a.parallel {
        Schedule::Parallel
    } else {
        Schedule::Interleave
    };
    Ok(ComparePlan {
        contenders,
        runs: a.runs as usize,
        warmup: !a.no_warmup,
        schedule,
    })
}

/// The `archbench run` command line that reproduces one run of `plan`.
pub fn reproduce(plan: &Plan) -> String {
    let mut cmd = format!(
        "archbench run {} -c {} -t {}",
        plan.target.redacted_url, plan.connections, plan.threads
    );
    if let Some(d) = plan.stop.duration {
        cmd.push_str(&format!(" -d {}ms", d.as_millis()));
    }
    if let crate::engine::Pacing::Open { rate } = plan.pacing {
        cmd.push_str(&format!(" --rate {rate}"));
    }
    for (n, v) in plan.summary().headers {
        cmd.push_str(&format!(" -H '{n}: {v}'"));
    }
    if plan.insecure {
        cmd.push_str(" --insecure");
    }
    cmd
}

/// Attaches `--perf` events to every watch spec; they need something to watch.
pub fn with_perf(
    watch: &[crate::monitor::WatchSpec],
    perf: &[crate::monitor::perf::PerfEvent],
) -> Result<Vec<crate::monitor::WatchSpec>, PlanError> {
    if !perf.is_empty() && watch.is_empty() {
        return Err(invalid(
            "--perf counts events of watched servers; add --watch NAME=pid:PID",
        ));
    }
    Ok(watch
        .iter()
        .map(|w| crate::monitor::WatchSpec {
            perf: perf.to_vec(),
            ..w.clone()
        })
        .collect())
}
