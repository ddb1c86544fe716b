//! Stage two of parsing: raw flags become a validated plan. Bad combinations fail here with a
//! sentence that names the problem and the fix. Validation looks nothing up: it builds a
//! `Plan<Unresolved>` ([`run_draft`], [`wrk_draft`], [`ab_draft`]); resolving the host is the
//! one further step to a plan the engine accepts ([`run_plan`], …).

use std::path::Path;
use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::args::{AbArgs, CompareArgs, H2loadArgs, LoadArgs, RequestArgs, RunArgs, WrkArgs};
use crate::engine::{wake, AtTimeout, CountSplit, Http2, Http3, Pacing, Part, Plan, StopRule};
use crate::http::tls::TlsOptions;
use crate::http::{
    DefaultHeaders, HttpVersion, RequestSpec, Scheme, Target, TargetError, Unresolved,
};
use crate::stages::Stages;
use crate::units::typed_number;

/// A command line that cannot become a plan. Always the user's to fix: exit status 2.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Watch(#[from] crate::monitor::MonitorError),
    #[error(transparent)]
    Script(#[from] crate::script::ScriptError),
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

/// Most worker threads one process runs: each holds its own histograms (about 1 MiB).
pub const MAX_THREADS: u64 = 256;
/// Most connections one process opens.
pub const MAX_CONNECTIONS: u64 = 1_000_000;
/// Slowest open-loop rate: one request per 1,000 s (the interval must fit a clock).
pub const MIN_RATE: f64 = 0.001;
/// Fastest open-loop rate of one process; beyond it, split the load with --part.
pub const MAX_LOCAL_RATE: f64 = 10_000_000.0;
/// Furthest ahead a start time may lie.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// Most parts one load is split into.
pub const MAX_PARTS: u32 = 100_000;
/// Most measured runs per target of a comparison (each is kept in full in the result).
pub const MAX_RUNS: u64 = 10_000;

/// `--runs`, checked.
pub fn runs(runs: u64) -> Result<usize, PlanError> {
    match runs {
        0 => Err(invalid("--runs must be at least 1")),
        n if n > MAX_RUNS => Err(invalid(format!(
            "--runs {n}: at most {MAX_RUNS} runs per target (each is kept in full in the result)"
        ))),
        n => Ok(n as usize),
    }
}

/// Run durations when none is given.
pub const RUN_DURATION: Duration = Duration::from_secs(10);
pub const COMPARE_DURATION: Duration = Duration::from_secs(3);

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
    /// `--stages` (or a ramp given to `--rate`): the open loop's rate over the run.
    stages: Option<Stages>,
    /// `--pacing-slack`; None: measured.
    slack: Option<Duration>,
    timeout: Duration,
    insecure: bool,
    tls: TlsOptions,
    part: Part,
    start_at: Option<SystemTime>,
    /// `--http2`: the streams per connection (`--streams`, default 1), and whether http/1.1
    /// is offered beside h2 (`--alpn h2,http/1.1`).
    http2: Option<(u64, bool)>,
    /// `--http3`: the streams per connection (`--streams`, default 1), and `--0rtt`.
    http3: Option<(u64, bool)>,
    /// Why `--streams` was given in vain (without --http2 or --http3), if it was.
    stray_streams: Option<&'static str>,
}

pub fn default_threads() -> u64 {
    crate::os::logical_cores()
}

fn archbench_defaults() -> DefaultHeaders {
    DefaultHeaders::AgentAndAccept(format!("archbench/{}", env!("CARGO_PKG_VERSION")))
}

fn build(input: PlanInput<'_>) -> Result<Plan<Unresolved>, PlanError> {
    check_counts(&input)?;
    check_stop_and_timeout(&input)?;
    check_part(&input)?;
    let pacing = pacing(&input)?;
    check_start_at(input.start_at)?;
    check_method(&input.method)?;
    let target = Target::parse(input.url)?;
    let http2 = http2(&input, &target)?;
    let http3 = http3(&input, &target)?;
    if let Some(why) = input.stray_streams {
        return Err(invalid(why));
    }
    let basic_auth = Target::basic_auth(input.url);
    // Over http:// there is no certificate to leave unverified.
    let insecure = input.insecure && target.scheme == Scheme::Https;
    Ok(Plan {
        target,
        addrs: Unresolved,
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
            split: CountSplit::Pooled,
        },
        pacing,
        stages: input.stages,
        timeout: input.timeout,
        at_timeout: AtTimeout::Abandon,
        insecure,
        tls: input.tls,
        part: input.part,
        start_at: input.start_at,
        hooks: None,
        http2,
        http3,
    })
}

/// Most streams per connection: h2load allows more, but a slot per stream is kept for the
/// run, and past a few hundred a server's MAX_CONCURRENT_STREAMS caps it anyway.
const MAX_STREAMS: u64 = 10_000;

/// Streams per connection as `flag` gave them (`--streams`, h2load's `-m`).
fn check_streams(streams: u64, flag: &str) -> Result<(), PlanError> {
    if streams == 0 || streams > MAX_STREAMS {
        return Err(invalid(format!(
            "{flag} {streams}: give 1 to {MAX_STREAMS} concurrent streams per connection"
        )));
    }
    Ok(())
}

/// `--http2` and `--streams`, and what HTTP/2 does not combine with yet.
fn http2(input: &PlanInput<'_>, target: &Target) -> Result<Option<Http2>, PlanError> {
    let Some((streams, offer_http11)) = input.http2 else {
        return Ok(None);
    };
    check_streams(streams, "--streams")?;
    if offer_http11 && target.scheme == Scheme::Http {
        return Err(invalid(
            "--alpn is negotiated in the TLS handshake: it needs an https:// URL (http:// speaks h2c)",
        ));
    }
    if !input.keepalive {
        return Err(invalid(
            "--http2 keeps its connections (streams are its requests); drop --no-keepalive",
        ));
    }
    if input.version == HttpVersion::Http10 {
        return Err(invalid(
            "--http2 and --http1.0 contradict each other; pick one",
        ));
    }
    Ok(Some(Http2 {
        streams: streams as u32,
        offer_http11,
    }))
}

/// `--http3` and `--streams`, and what HTTP/3 does not combine with yet.
fn http3(input: &PlanInput<'_>, target: &Target) -> Result<Option<Http3>, PlanError> {
    let Some((streams, zero_rtt)) = input.http3 else {
        return Ok(None);
    };
    check_streams(streams, "--streams")?;
    if target.scheme == Scheme::Http {
        return Err(invalid(
            "--http3 runs over QUIC, which is always TLS: give an https:// URL",
        ));
    }
    if !input.keepalive {
        return Err(invalid(
            "--http3 keeps its connections (streams are its requests); drop --no-keepalive",
        ));
    }
    if input.version == HttpVersion::Http10 {
        return Err(invalid(
            "--http3 and --http1.0 contradict each other; pick one",
        ));
    }
    if input.tls.version == Some(crate::http::tls::TlsVersion::V1_2) {
        return Err(invalid(
            "--http3 runs over QUIC, which needs TLS 1.3; drop --tls-version 1.2",
        ));
    }
    if zero_rtt && !input.tls.resume {
        return Err(invalid(
            "--0rtt resumes a TLS session, which --tls-resume off forbids; drop one",
        ));
    }
    Ok(Some(Http3 {
        streams: streams as u32,
        zero_rtt,
    }))
}

/// Connections and threads: at least one each, at most what one process supports.
fn check_counts(input: &PlanInput<'_>) -> Result<(), PlanError> {
    if input.connections == 0 {
        return Err(invalid(
            "connections must be at least 1 (-c 0 opens nothing); use e.g. -c 50",
        ));
    }
    if input.connections > MAX_CONNECTIONS {
        return Err(invalid(format!(
            "more than {MAX_CONNECTIONS} connections from one process is not supported; split the load across processes (--part I/N; for `k8s load`, --in-cluster --workers N)"
        )));
    }
    if input.threads == 0 {
        return Err(invalid("threads must be at least 1; use e.g. -t 2"));
    }
    if input.threads > MAX_THREADS {
        return Err(invalid(format!(
            "at most {MAX_THREADS} threads (this machine has {} cores; one per core is the default)",
            crate::os::logical_cores()
        )));
    }
    Ok(())
}

/// The stop rule (a request count no lower than the connections, a duration above zero) and
/// the request timeout (no shorter than the workers' timeout scan can keep).
fn check_stop_and_timeout(input: &PlanInput<'_>) -> Result<(), PlanError> {
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
    let shortest = crate::engine::TIMEOUT_SCAN_MIN;
    if input.timeout < shortest {
        return Err(invalid(format!(
            "--timeout {:?}: at least {shortest:?} (timeouts are checked every {shortest:?} at most)",
            input.timeout
        )));
    }
    Ok(())
}

/// `--part`: every part needs at least one connection.
fn check_part(input: &PlanInput<'_>) -> Result<(), PlanError> {
    let part = input.part;
    if part.count > MAX_PARTS || u64::from(part.count) > input.connections {
        return Err(invalid(format!(
            "--part {}/{}: every part needs at least one connection, so at most {} parts (-c {}); raise -c or use fewer parts",
            part.index,
            part.count,
            input.connections.min(u64::from(MAX_PARTS)),
            input.connections
        )));
    }
    Ok(())
}

/// Closed loop without `--rate`; open at a rate this process's share of which it can keep.
fn pacing(input: &PlanInput<'_>) -> Result<Pacing, PlanError> {
    if let Some(stages) = &input.stages {
        return staged_pacing(input, stages);
    }
    match input.rate {
        None if input.slack.is_some() => Err(invalid(
            "--pacing-slack applies to an open loop only: give --rate too".to_string(),
        )),
        None => Ok(Pacing::Closed),
        Some(r) if r.is_finite() && r >= MIN_RATE => {
            within_one_process(input, r, &format!("--rate {}", typed_number(r)))?;
            Ok(Pacing::Open {
                rate: r,
                slack: slack(input.slack)?,
            })
        }
        Some(r) => Err(invalid(format!(
            "--rate {} is below {MIN_RATE} requests per second (one per 1,000 s); omit it for a closed loop",
            typed_number(r)
        ))),
    }
}

/// The open loop of `--stages`: paced at their mean rate (the figure results compare the
/// achieved rate with), the schedule following them; no stage may ask for more than one
/// process keeps, and the stages set the run's length.
fn staged_pacing(input: &PlanInput<'_>, stages: &Stages) -> Result<Pacing, PlanError> {
    let peak = stages.peak_rate();
    let given = format!("--stages (at their peak, {})", typed_number(peak));
    within_one_process(input, peak, &given)?;
    if stages.mean_rate() < MIN_RATE {
        return Err(invalid(format!(
            "--stages ask for {} requests over {}s, below {MIN_RATE} per second",
            stages.total(),
            stages.length_s()
        )));
    }
    if input
        .duration
        .is_some_and(|d| (d.as_secs_f64() - stages.length_s()).abs() > 1e-6)
    {
        return Err(invalid(format!(
            "the ramp or stages of --rate/--stages last {}s, which is the run's length: drop -d",
            stages.length_s()
        )));
    }
    Ok(Pacing::Open {
        rate: stages.mean_rate(),
        slack: slack(input.slack)?,
    })
}

/// This process's share of `rate` (its connections' share of the whole load) is one machine's
/// to send.
fn within_one_process(input: &PlanInput<'_>, rate: f64, given: &str) -> Result<(), PlanError> {
    let local = rate * input.part.share(input.connections) as f64 / input.connections as f64;
    if local > MAX_LOCAL_RATE {
        return Err(invalid(format!(
            "{given}: more than {MAX_LOCAL_RATE} requests per second from one process is beyond one machine; split the load with --part"
        )));
    }
    Ok(())
}

/// `--pacing-slack` (at most 5 ms), or a wake-up's latency measured here (at most 50 µs); in
/// whole µs.
fn slack(given: Option<Duration>) -> Result<Duration, PlanError> {
    match given {
        Some(d) if d > wake::MAX_ASKED_SLACK => Err(invalid(format!(
            "--pacing-slack {}: at most {}ms (a send earlier than that is off its schedule)",
            duration_arg(d),
            wake::MAX_ASKED_SLACK.as_millis()
        ))),
        // Whole microseconds, as results and reproduce lines state it.
        Some(d) => Ok(whole_micros(d)),
        None => Ok(whole_micros(wake::default_slack())),
    }
}

fn whole_micros(d: Duration) -> Duration {
    Duration::from_micros(d.as_micros() as u64)
}

/// `--start-at`: at most a day ahead.
fn check_start_at(start_at: Option<SystemTime>) -> Result<(), PlanError> {
    if let Some(at) = start_at {
        if at
            .duration_since(SystemTime::now())
            .is_ok_and(|ahead| ahead > MAX_START_AHEAD)
        {
            return Err(invalid(
                "--start-at lies more than a day ahead; check the time (RFC 3339 is UTC unless it says otherwise)",
            ));
        }
    }
    Ok(())
}

/// The method: one or more ASCII letters.
fn check_method(method: &str) -> Result<(), PlanError> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(invalid(format!(
            "invalid HTTP method {method:?}; use e.g. GET or POST"
        )));
    }
    Ok(())
}

fn read_body(path: &Path) -> Result<Vec<u8>, PlanError> {
    std::fs::read(path).map_err(|source| PlanError::BodyFile {
        path: path.display().to_string(),
        source,
    })
}

/// `archbench run`'s plan, resolved (a script's setup and init run).
pub fn run_plan(a: &RunArgs) -> Result<Plan, PlanError> {
    with_script(run_draft(a)?.resolve()?, &a.load, &a.url)
}

/// The plan with `--script`'s hooks: the script loaded, its setup and init run for the
/// plan's threads (a failure here is the user's to fix, before any load).
fn with_script(mut plan: Plan, l: &LoadArgs, url: &str) -> Result<Plan, PlanError> {
    if (plan.http2.is_some() || plan.http3.is_some())
        && (l.script.is_some() || l.request.mix.is_some())
    {
        // The HTTP/2 worker builds its header blocks once per connection and calls no hooks.
        return Err(invalid(
            "--script and --mix speak HTTP/1.1 only so far; leave out --http2/--http3 (or the script)",
        ));
    }
    if let Some(path) = &l.request.mix {
        if l.script.is_some() {
            return Err(invalid(
                "--mix and --script both choose the requests; give one (a script can build a mix itself)",
            ));
        }
        let mix = crate::mix::Mix::load(path, &plan).map_err(PlanError::Invalid)?;
        plan.hooks = Some(std::sync::Arc::new(mix));
    }
    if let Some(path) = &l.script {
        let file = crate::script::ScriptFile {
            path: path.clone(),
            args: l.script_args.clone(),
        };
        let session = crate::script::Session::start(
            &file,
            url,
            &plan.target,
            &l.request.headers,
            plan.local_threads(),
        )?;
        plan.hooks = Some(std::sync::Arc::new(session));
    }
    Ok(plan)
}

/// `archbench run`'s plan, validated without any lookup.
pub fn run_draft(a: &RunArgs) -> Result<Plan<Unresolved>, PlanError> {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => read_body(p)?,
        (None, None) => Vec::new(),
    };
    let duration = match (a.load.duration, a.requests, a.load.rate.staged()) {
        // The stages are the run's length.
        (None, _, Some(st)) => Some(Duration::from_secs_f64(st.length_s())),
        (None, None, None) => Some(RUN_DURATION),
        (d, _, _) => d,
    };
    let mut plan = build(PlanInput {
        method: {
            // Checked as typed: the error quotes what the user wrote, not its upper case.
            check_method(&a.method)?;
            a.method.to_ascii_uppercase()
        },
        body,
        version: if a.http10 {
            HttpVersion::Http10
        } else {
            HttpVersion::Http11
        },
        duration,
        requests: a.requests,
        part: a.part.unwrap_or(Part::WHOLE),
        start_at: a.start_at,
        ..load_input(&a.url, &a.load)
    })?;
    tls_flags_apply(&a.load.request, plan.target.scheme == Scheme::Https)?;
    plan.tls.pinned = pinned_cert(a.load.request.pinned_cert.as_deref())?;
    Ok(plan)
}

/// TLS flags shape handshakes: where no target has one they would be ignored without a
/// word (a user believing `-k` or `--tls-version` took part), so they are refused.
fn tls_flags_apply(request: &RequestArgs, any_https: bool) -> Result<(), PlanError> {
    match request.tls_flag_given() {
        Some(flag) if !any_https => Err(invalid(format!(
            "{flag} applies to https:// targets only, and none is https://; drop it"
        ))),
        _ => Ok(()),
    }
}

/// `--pinned-cert FILE`'s certificate.
pub fn pinned_cert(
    path: Option<&std::path::Path>,
) -> Result<Option<crate::http::tls::PinnedCert>, PlanError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let pem = std::fs::read(path).map_err(|e| {
        PlanError::Invalid(format!(
            "--pinned-cert {shown}: {e}; give a PEM certificate file"
        ))
    })?;
    crate::http::tls::PinnedCert::from_pem(&shown, &pem)
        .map(Some)
        .map_err(|e| PlanError::Invalid(e.to_string()))
}

/// The input a `LoadArgs` gives: GET, archbench's own headers, no stop rule yet.
fn load_input<'a>(url: &'a str, l: &LoadArgs) -> PlanInput<'a> {
    PlanInput {
        url,
        method: "GET".into(),
        headers: l.request.headers.clone(),
        body: Vec::new(),
        version: HttpVersion::Http11,
        keepalive: !l.no_keepalive,
        defaults: archbench_defaults(),
        connections: l.connections.connections,
        threads: l.threads.threads.unwrap_or_else(default_threads),
        duration: l.duration,
        requests: None,
        rate: l.rate.steady(),
        stages: l.rate.staged(),
        slack: l.pacing_slack.pacing_slack,
        timeout: l.request.timeout.timeout,
        insecure: l.request.insecure,
        tls: l.request.tls_options(),
        part: Part::WHOLE,
        start_at: None,
        http2: l
            .request
            .http2
            .streams()
            .map(|streams| (streams, l.request.alpn.unwrap_or(false))),
        http3: l.request.http2.http3_streams(),
        stray_streams: l.request.http2.stray_streams(),
    }
}

/// `archbench h2load`'s plan, resolved.
pub fn h2load_plan(a: &H2loadArgs) -> Result<Plan, PlanError> {
    Ok(h2load_draft(a)?.resolve()?)
}

/// `archbench h2load`'s plan, validated without any lookup: -n across -c clients of -m
/// streams (h2c), or HTTP/1.1 with --h1 / -p http/1.1; -D a timing-based test; --rps per
/// client.
pub fn h2load_draft(a: &H2loadArgs) -> Result<Plan<Unresolved>, PlanError> {
    // h2load's own words.
    let url = a
        .url
        .as_deref()
        .ok_or_else(|| invalid("no URI or input file given"))?;
    refuse_connection_timeouts(a)?;
    // Checked in h2load's own flags: the plan's words would name run's --streams and --rate.
    check_streams(a.streams, "-m")?;
    if let Some(rps) = a.rps {
        let total = rps * a.clients as f64;
        if !(rps > 0.0 && total <= MAX_LOCAL_RATE) {
            return Err(invalid(format!(
                "--rps {}: give a rate above 0 whose total over -c {} clients is at most {MAX_LOCAL_RATE:.0} requests per second",
                crate::units::typed_number(rps),
                a.clients
            )));
        }
    }
    let alpn = h2load_alpn(a.alpn_list.as_deref(), url)?;
    let h1 = a.h1 || a.proto == "http/1.1" || alpn == Some(H2loadAlpn::Http11);
    if !h1 && a.proto != "h2c" {
        return Err(invalid(format!(
            "-p {}: archbench h2load speaks h2c or http/1.1 (h2 over https by ALPN)",
            a.proto
        )));
    }
    if a.threads > a.clients {
        // h2load's own refusal: a thread with no client of its own.
        return Err(invalid(format!(
            "-c {}, -t {}: the number of clients must be greater than or equal to the number of threads",
            a.clients, a.threads
        )));
    }
    if a.duration.is_none() && a.requests < a.clients {
        return Err(invalid(format!(
            "-n {} is below -c {}: each client needs at least one request; raise -n or lower -c",
            a.requests, a.clients
        )));
    }
    let body = match &a.data {
        Some(p) => read_body(p)?,
        None => Vec::new(),
    };
    let (method, headers) = h2load_method(a);
    let mut plan = build(PlanInput {
        url,
        method,
        headers,
        body,
        version: HttpVersion::Http11,
        keepalive: true,
        // h2load's own: what the server sees (and logs, and counts in bytes) is the tool's.
        defaults: DefaultHeaders::AgentOnly("h2load nghttp2/1.52.0".into()),
        connections: a.clients,
        threads: a.threads,
        duration: a.duration,
        requests: a.duration.is_none().then_some(a.requests),
        rate: a.rps.map(|r| r * a.clients as f64),
        stages: None,
        slack: None,
        timeout: a.timeout.timeout,
        insecure: true,
        // h2load makes a full handshake per client (no session resumed), which its TLS lines
        // describe.
        tls: TlsOptions::full_handshakes(),
        part: Part::WHOLE,
        start_at: None,
        // Over https h2load offers h2 and http/1.1 by ALPN and speaks what the server chooses.
        http2: (!h1 && alpn != Some(H2loadAlpn::H3))
            .then_some((a.streams, url.starts_with("https://"))),
        http3: (alpn == Some(H2loadAlpn::H3)).then_some((a.streams, false)),
        stray_streams: None,
    })?;
    // Each h2load client makes its own n/c, however fast the others go.
    plan.stop.split = CountSplit::PerConnection;
    Ok(plan)
}

/// h2load's method and headers: `-H ':method: M'` overrides the method, -d's POST included
/// (the last one given).
fn h2load_method(a: &H2loadArgs) -> (String, Vec<(String, String)>) {
    use super::values::H2loadHeader;
    let mut method = if a.data.is_some() { "POST" } else { "GET" }.to_string();
    let mut headers = Vec::new();
    for h in &a.headers {
        match h {
            H2loadHeader::Field(name, value) => headers.push((name.clone(), value.clone())),
            H2loadHeader::Method(m) => method = m.clone(),
        }
    }
    (method, headers)
}

/// h2load's connection timeouts end a client's connection (and the client with it), which
/// the engine's connections never do: refused rather than taken for --timeout.
fn refuse_connection_timeouts(a: &H2loadArgs) -> Result<(), PlanError> {
    if a.active_timeout.is_some() {
        return Err(invalid(
            "-T is h2load's --connection-active-timeout (how long a client waits for its answers after its last request went out, then gives up on them and on the connection), which archbench h2load does not implement; the nearest is --timeout D, a per-request timeout",
        ));
    }
    if a.inactivity_timeout.is_some() {
        return Err(invalid(
            "-N is h2load's --connection-inactivity-timeout (how long a client waits without reading or writing anything, then gives up on its connection and its remaining requests), which archbench h2load does not implement; the nearest is --timeout D, a per-request timeout",
        ));
    }
    Ok(())
}

/// What h2load's `--alpn-list` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H2loadAlpn {
    /// h3 first: QUIC (h2load's rule: the list's first protocol decides).
    H3,
    /// http/1.1 alone.
    Http11,
    /// h2, with http/1.1 as the server chooses.
    H2,
}

fn h2load_alpn(list: Option<&str>, url: &str) -> Result<Option<H2loadAlpn>, PlanError> {
    let Some(list) = list else { return Ok(None) };
    let protocols: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(p) = protocols
        .iter()
        .find(|p| !matches!(**p, "h3" | "h2" | "http/1.1"))
    {
        return Err(invalid(format!(
            "--alpn-list {list}: {p:?} is none of h3, h2, http/1.1 (what archbench h2load speaks)"
        )));
    }
    if !url.starts_with("https://") {
        return Err(invalid(
            "--alpn-list is negotiated in the TLS handshake: it needs an https:// URL",
        ));
    }
    Ok(Some(match protocols.as_slice() {
        ["h3", ..] => H2loadAlpn::H3,
        ["http/1.1"] => H2loadAlpn::Http11,
        _ => H2loadAlpn::H2,
    }))
}

/// `archbench wrk`'s plan, resolved.
pub fn wrk_plan(a: &WrkArgs) -> Result<Plan, PlanError> {
    Ok(wrk_draft(a)?.resolve()?)
}

/// `archbench wrk`'s plan, validated without any lookup.
pub fn wrk_draft(a: &WrkArgs) -> Result<Plan<Unresolved>, PlanError> {
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
    let plan = build(PlanInput {
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
        stages: None,
        slack: None,
        timeout: a.timeout,
        insecure: true,
        tls: TlsOptions::full_handshakes(),
        part: Part::WHOLE,
        start_at: None,
        http2: None,
        http3: None,
        stray_streams: None,
    })?;
    // wrk's -T only sorts answers: one slower is still waited for and counted, and its layout
    // calls it a timeout (closing the connection and asking again loaded the server with
    // requests wrk never sends: 14 where wrk sent 11).
    Ok(Plan {
        at_timeout: AtTimeout::KeepWaiting,
        ..plan
    })
}

/// ab's cap on requests when only a time limit is given.
pub const AB_MAX_REQUESTS: u64 = 50_000;

/// `archbench ab`'s plan, resolved.
pub fn ab_plan(a: &AbArgs) -> Result<Plan, PlanError> {
    Ok(ab_draft(a)?.resolve()?)
}

/// `archbench ab`'s plan, validated without any lookup.
pub fn ab_draft(a: &AbArgs) -> Result<Plan<Unresolved>, PlanError> {
    if let Some(level) = a.verbosity.filter(|v| *v >= 2) {
        return Err(invalid(format!(
            "-v {level}: from 2 ab prints each request's and response's headers (\"LOG: header received\"), which archbench ab does not; -v 0 and 1 print the report, and --json has the run's figures"
        )));
    }
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
    if a.head && a.postfile.is_some() {
        // ab's own words.
        return Err(invalid("Cannot mix POST and HEAD (-p and -i)"));
    }
    let method = match (&a.method, &a.postfile) {
        (Some(m), _) => {
            check_method(m)?;
            m.to_ascii_uppercase()
        }
        (None, Some(_)) => "POST".into(),
        (None, None) if a.head => "HEAD".into(),
        (None, None) => "GET".into(),
    };
    let mut headers = a.headers.clone();
    // ab sends the last -C given (each replaces the one before).
    if let Some(cookie) = a.cookies.last() {
        if !crate::http::is_header_value(cookie) {
            return Err(invalid(format!(
                "-C {cookie:?}: a cookie is a header value (no control characters)"
            )));
        }
        headers.push(("Cookie".into(), cookie.clone()));
    }
    if let Some(ct) = &a.content_type {
        headers.push(("Content-Type".into(), ct.clone()));
    } else if a.postfile.is_some() {
        headers.push(("Content-Type".into(), "text/plain".into()));
    }
    if a.requests == Some(0) {
        // ab's own words.
        return Err(invalid(
            "Invalid number of requests (-n 0); use e.g. -n 1000",
        ));
    }
    if a.timelimit.is_some_and(|t| t.is_zero()) {
        // The plan's own words would name run's -d.
        return Err(invalid(
            "-t 0: the time limit must be above zero; use e.g. -t 10",
        ));
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
    let plan = build(PlanInput {
        url: &url_full,
        method,
        headers,
        body,
        version: HttpVersion::Http10,
        keepalive: a.keepalive,
        // ab's own, byte for byte: its "Total body sent" counts them.
        defaults: DefaultHeaders::AgentAndAccept("ApacheBench/2.3".into()),
        connections: a.concurrency,
        // ab is single-threaded; one worker per core is ours, the layout is ab's.
        threads: default_threads(),
        duration: a.timelimit,
        requests: Some(requests),
        rate: None,
        stages: None,
        slack: None,
        timeout: a.timeout,
        insecure: true,
        tls: TlsOptions::full_handshakes(),
        part: Part::WHOLE,
        start_at: None,
        http2: None,
        http3: None,
        stray_streams: None,
    })?;
    // ab's -s fails no request: it ends the whole run when nothing happened for that long
    // (`cmd_ab` watches); a slow answer meanwhile is still waited for, as ab does (failing
    // each at -s turned 8 answers ab counted into 5 "Receive" failures).
    Ok(Plan {
        at_timeout: AtTimeout::KeepWaiting,
        ..plan
    })
}

/// One plan per `NAME=URL`, the watch specs matched to their targets, and the command line
/// that reproduces one run of each.
pub fn compare_plan(a: &CompareArgs) -> Result<crate::compare::ComparePlan, PlanError> {
    use crate::compare::Schedule;
    let schedule = if a.sequential {
        Schedule::Sequential
    } else if a.parallel {
        Schedule::Parallel
    } else {
        Schedule::Interleave
    };
    let load = LoadArgs {
        duration: Some(a.load.duration.unwrap_or_else(|| {
            // Staged, each run lasts the stages.
            a.load.rate.staged().map_or(COMPARE_DURATION, |st| {
                Duration::from_secs_f64(st.length_s())
            })
        })),
        ..a.load.clone()
    };
    targets_plan(
        &a.targets,
        &load,
        a.runs.runs,
        !a.no_warmup.no_warmup,
        schedule,
    )
}

/// The plan of a comparison of `targets` (NAME=URL) under one load (`compare`, and each step
/// of `sweep`).
pub fn targets_plan(
    targets: &[String],
    load: &LoadArgs,
    runs_per_target: u64,
    warmup: bool,
    schedule: crate::compare::Schedule,
) -> Result<crate::compare::ComparePlan, PlanError> {
    use crate::compare::{ComparePlan, Contender};
    let runs = runs(runs_per_target)?;
    let mut contenders: Vec<Contender> = Vec::new();
    for t in targets {
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
        let mut draft = build(load_input(url, load))?;
        draft.tls.pinned = pinned_cert(load.request.pinned_cert.as_deref())?;
        let plan = with_script(draft.resolve()?, load, url)?;
        contenders.push(Contender {
            name: name.to_string(),
            plan,
            watch: Vec::new(),
        });
    }
    let any_https = contenders
        .iter()
        .any(|c| c.plan.target.scheme == Scheme::Https);
    tls_flags_apply(&load.request, any_https)?;
    for w in &with_perf(&load.request.watch, &load.perf)? {
        let c = contenders
            .iter_mut()
            .find(|c| c.name == w.label)
            .ok_or_else(|| {
                invalid(format!(
                    "--watch {}: no target named {:?}",
                    w.target, w.label
                ))
            })?;
        c.watch.push(std::sync::Arc::new(w.clone()));
    }
    Ok(ComparePlan {
        contenders,
        runs,
        warmup,
        schedule,
    })
}

/// The plan of one service of `k8s load`: GET with archbench's headers, a duration.
#[cfg(feature = "k8s")]
pub fn service_plan(
    url: &str,
    known: Option<std::net::SocketAddr>,
    load: &crate::k8s::WholeLoad,
    pinned: Option<&crate::http::tls::PinnedCert>,
) -> Result<Plan, PlanError> {
    let unresolved = service_draft(url, load, pinned)?;
    Ok(match known {
        // An in-cluster name only the cluster's DNS knows: its address came from the API.
        Some(addr) => unresolved.at(crate::http::Addresses::one(addr)),
        None => unresolved.resolve()?,
    })
}

/// Whether a service could be loaded at `load`, asked before any cluster is: the plan of a
/// stand-in loopback URL of the load's scheme, never resolved nor sent to.
#[cfg(feature = "k8s")]
pub fn check_service_load(load: &crate::k8s::WholeLoad) -> Result<(), PlanError> {
    let url = if load.tls {
        "https://127.0.0.1/"
    } else {
        "http://127.0.0.1/"
    };
    service_draft(url, load, None).map(drop)
}

/// [`service_plan`] before its addresses.
#[cfg(feature = "k8s")]
fn service_draft(
    url: &str,
    load: &crate::k8s::WholeLoad,
    pinned: Option<&crate::http::tls::PinnedCert>,
) -> Result<Plan<Unresolved>, PlanError> {
    let crate::k8s::WholeLoad {
        connections,
        threads,
        duration,
        rate,
        timeout,
        http2_streams,
        http3_streams,
        zero_rtt,
        tls: _,
        stages: _,
    } = *load;
    build(PlanInput {
        url,
        method: "GET".into(),
        headers: Vec::new(),
        body: Vec::new(),
        version: HttpVersion::Http11,
        keepalive: true,
        defaults: archbench_defaults(),
        connections,
        threads,
        duration: Some(duration),
        requests: None,
        rate,
        stages: load.stages.clone(),
        slack: None,
        timeout,
        insecure: false,
        tls: TlsOptions {
            pinned: pinned.cloned(),
            ..TlsOptions::default()
        },
        part: Part::WHOLE,
        start_at: None,
        http2: http2_streams.map(|s| (s, false)),
        http3: http3_streams.map(|s| (s, zero_rtt)),
        stray_streams: None,
    })
}

/// A word for a POSIX shell: bare when it is safe, else in single quotes.
fn shell_word(w: &str) -> String {
    let safe = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if safe {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Durations as `run` reads them back exactly: whole milliseconds, else microseconds.
pub(super) fn duration_arg(d: Duration) -> String {
    if d.as_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}us", d.as_micros())
    }
}

/// The `archbench run` command line that reproduces one run of `plan`: every flag that
/// shaped it, credentials redacted. A body that is not short text is left out, and the line
/// says so.
pub fn reproduce<A>(plan: &Plan<A>) -> String {
    let mut w = super::argv::Argv::new("run", &["archbench", "run"]);
    w.word(shell_word(&plan.target.redacted_url))
        .short("connections", plan.connections.to_string())
        .short("threads", plan.threads.to_string());
    if let Some(d) = plan.stop.duration {
        w.short("duration", duration_arg(d));
    }
    if let Some(n) = plan.stop.requests {
        w.short("requests", n.to_string());
    }
    reproduce_tls(plan, &mut w);
    if let Pacing::Open { rate, slack } = plan.pacing {
        match &plan.stages {
            Some(stages) => w.value("stages", shell_word(&stages.to_string())),
            None => w.value("rate", rate.to_string()),
        };
        w.value("pacing_slack", duration_arg(slack));
    }
    w.value("timeout", duration_arg(plan.timeout));
    if plan.request.method != "GET" {
        w.short("method", plan.request.method.clone());
    }
    for (n, v) in plan.summary().headers {
        w.short("headers", shell_word(&format!("{n}: {v}")));
    }
    reproduce_protocol(plan, &mut w);
    if !plan.request.keepalive {
        w.switch("no_keepalive");
    }
    if plan.part != Part::WHOLE {
        w.value("part", format!("{}/{}", plan.part.index, plan.part.count));
    }
    if let Some(h) = &plan.hooks {
        for (id, value) in h.flags() {
            w.value(id, shell_word(&value));
        }
    }
    let mut line = w.into_words().join(" ");
    match std::str::from_utf8(&plan.request.body) {
        Ok("") => {}
        Ok(text) if text.len() <= 1024 => {
            let mut body = super::argv::Argv::new("run", &[]);
            body.value("body", shell_word(text));
            line = format!("{line} {}", body.into_words().join(" "));
        }
        _ => line.push_str(&format!(
            " # plus the {}-byte body (--body-file)",
            plan.request.body.len()
        )),
    }
    line
}

/// [`reproduce`]'s TLS flags: none over http:// (where `run` refuses them; ab's and wrk's
/// plans are insecure whatever their scheme).
fn reproduce_tls<A>(plan: &Plan<A>, w: &mut super::argv::Argv) {
    if plan.target.scheme != Scheme::Https {
        return;
    }
    let tls = &plan.tls;
    if plan.insecure {
        w.switch("insecure");
    }
    if !tls.resume {
        w.value("tls_resume", "off");
    }
    if !tls.ciphers.is_empty() {
        w.value("tls_ciphers", tls.ciphers.join(","));
    }
    if !tls.groups.is_empty() {
        w.value("tls_groups", tls.groups.join(","));
    }
    if let Some(v) = tls.version {
        w.value("tls_version", v.number());
    }
    if let Some(p) = &tls.pinned {
        w.value("pinned_cert", p.path.clone());
    }
}

/// [`reproduce`]'s protocol flags: the HTTP version, HTTP/2's or HTTP/3's streams.
fn reproduce_protocol<A>(plan: &Plan<A>, w: &mut super::argv::Argv) {
    if plan.request.version == HttpVersion::Http10 {
        w.switch("http10");
    }
    if let Some(h2) = plan.http2 {
        w.switch("http2");
        if h2.streams != 1 {
            w.value("streams", h2.streams.to_string());
        }
        if h2.offer_http11 {
            w.value("alpn", "h2,http/1.1");
        }
    }
    if let Some(h3) = plan.http3 {
        w.switch("http3");
        if h3.streams != 1 {
            w.value("streams", h3.streams.to_string());
        }
        if h3.zero_rtt {
            w.switch("zero_rtt");
        }
    }
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

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    /// Splits a POSIX shell line: words, single quotes, `'\''`; a `#` word ends it.
    fn shell_split(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let (mut quoted, mut in_word) = (false, false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    in_word = true;
                }
                '\\' if !quoted => {
                    word.extend(chars.next());
                    in_word = true;
                }
                '#' if !quoted && !in_word => break,
                c if c.is_whitespace() && !quoted => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                    }
                    in_word = false;
                }
                c => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            words.push(word);
        }
        words
    }

    fn parse(argv: &[String]) -> Command {
        Cli::try_parse_from(argv).expect("the line parses").command
    }

    fn assert_same_plan(a: &Plan, b: &Plan) {
        assert_eq!(a.target, b.target);
        assert_eq!(a.addrs, b.addrs);
        assert_eq!(a.request, b.request);
        assert_eq!(a.connections, b.connections);
        assert_eq!(a.threads, b.threads);
        assert_eq!(a.stop, b.stop);
        assert_eq!(a.pacing, b.pacing);
        assert_eq!(a.timeout, b.timeout);
        assert_eq!(a.insecure, b.insecure);
        assert_eq!(a.part, b.part);
        assert_eq!((a.http2, a.http3), (b.http2, b.http3));
    }

    #[test]
    fn reproduce_lines_rebuild_the_plan_they_describe() {
        let compare = shell_split(
            "archbench compare a=http://127.0.0.1:8080/x?y=1 b=https://127.0.0.1:8081/ -c 7 -t 1 \
             -d 1500ms --rate 250.5 -H 'X-Note: it'\\''s here' --timeout 2500us -k --runs 4",
        );
        let Command::Compare(args) = parse(&compare) else {
            panic!("parsed as compare")
        };
        let plan = compare_plan(&args).unwrap();
        let runs: Vec<Vec<String>> = vec![
            shell_split(
                "archbench run http://127.0.0.1:9/ -n 900 -c 30 -t 2 -m post --body 'a b' \
                 --http1.0 --no-keepalive --part 1/3 --timeout 7s",
            ),
            shell_split("archbench run http://127.0.0.1:9/ -d 2m --rate 10k -c 5"),
            shell_split("archbench run https://127.0.0.1:9/ --http3 --streams 8 -n 100 -c 2"),
        ];
        let mut plans: Vec<Plan> = plan.contenders.into_iter().map(|c| c.plan).collect();
        for argv in runs {
            let Command::Run(a) = parse(&argv) else {
                panic!("parsed as run")
            };
            plans.push(run_plan(&a).unwrap());
        }
        for original in &plans {
            let line = reproduce(original);
            let Command::Run(a) = parse(&shell_split(&line)) else {
                panic!("{line} parsed as run")
            };
            let again = run_plan(&a).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_same_plan(original, &again);
            assert_eq!(reproduce(&again), line);
        }
        assert!(reproduce(&plans[0]).contains("--timeout 2500us"));
        // -k reaches the https target's line only: over http:// `run` refuses it.
        assert!(!reproduce(&plans[0]).contains("--insecure"));
        assert!(reproduce(&plans[1]).contains("--insecure"));
    }
}
