//! archbench's own text report: what ran, throughput, errors by kind, status codes, and the
//! latency distributions side by side.

use std::io::{self, Write};

use super::Report;
use crate::stats::{ErrorKind, LatencySummary, RunResult};
use crate::units::{bytes_iec, grouped, grouped_rounded, wrk_time_us};

pub struct TextReport;

/// Says what it means when connects failed for lack of a local port, or nothing.
pub fn ports_note(r: &RunResult) -> Option<String> {
    let n = r.errors.connect_no_local_port;
    (n > 0).then(|| {
        format!(
            "{} connects found no free local port: ephemeral ports are exhausted (every local port is held by an open connection or TIME_WAIT); use keep-alive, fewer connections, or widen net.ipv4.ip_local_port_range",
            grouped(n)
        )
    })
}

/// Why QUIC got nowhere, when every sign says no HTTP/3 listens as we speak it: the UDP port
/// answered with ICMP port unreachable, or with a Version Negotiation listing no version we
/// speak, or nothing answered a handshake within the timeout.
pub fn quic_note(r: &RunResult) -> Option<String> {
    let q = r.quic.as_ref()?;
    let count = |code: &str| {
        q.connection_errors
            .iter()
            .find(|c| c.code == code)
            .map_or(0, |c| c.count)
    };
    if q.handshakes > 0 {
        return None;
    }
    let at = url::Url::parse(&r.plan.url)
        .ok()
        .and_then(|u| {
            Some(format!(
                "UDP port {} of {}",
                u.port_or_known_default()?,
                u.host_str()?
            ))
        })
        .unwrap_or_else(|| format!("the UDP port of {}", r.plan.url));
    let versions = count("version_mismatch");
    if versions > 0 {
        return Some(format!(
            "{} handshakes were answered with a QUIC Version Negotiation listing versions, none of them QUIC v1 (RFC 9000), the one archbench speaks: the server at {at} speaks another QUIC version (an older draft?)",
            grouped(versions)
        ));
    }
    let (unreachable, silent) = (count("port_unreachable"), count("handshake_timeout"));
    let why = match (unreachable, silent) {
        (0, 0) => return None,
        (0, _) => format!(
            "{} handshakes got no answer within the timeout",
            grouped(silent)
        ),
        _ => format!(
            "{} handshakes were answered with ICMP port unreachable",
            grouped(unreachable)
        ),
    };
    Some(format!(
        "{why}: no HTTP/3 at {at}; a server that offers it says so over https in an Alt-Svc: h3 header (`--http2` speaks h2 to its TCP port)"
    ))
}

fn pacing(r: &RunResult) -> String {
    match (r.plan.rate, staged(r)) {
        (Some(rate), Some(stages)) => {
            format!("open loop in stages {stages} (mean {rate:.1} req/s)")
        }
        (Some(rate), None) => format!("open loop at {rate} req/s"),
        (None, _) => "closed loop".to_string(),
    }
}

/// The run's stages, if its rate changed (`--stages`).
fn staged(r: &RunResult) -> Option<crate::stages::Stages> {
    crate::stages::Stages::new(r.plan.stages.clone()?).ok()
}

/// Per stage: the rate the schedule asked for and the rate achieved, from the series' steps
/// that began in the stage (answered and failed: both were sent).
fn write_stages(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(stages) = staged(r) else {
        return Ok(());
    };
    let step = f64::from(r.series_step_s.max(1));
    let mut from = 0.0;
    for (k, stage) in stages.list().iter().enumerate() {
        let to = from + stage.length_s;
        let steps: Vec<_> = r
            .series
            .iter()
            .filter(|s| (from..to).contains(&f64::from(s.second)))
            .collect();
        let covered = steps.len() as f64 * step;
        let asked: f64 = steps.iter().filter_map(|s| s.target_rate).sum::<f64>() * step;
        let done: u64 = steps.iter().map(|s| s.completed + s.errors).sum();
        let achieved = if covered > 0.0 {
            format!(
                "asked {:.1} req/s, achieved {:.1}",
                asked / covered,
                done as f64 / covered
            )
        } else {
            "not reached".to_string()
        };
        writeln!(
            out,
            "  {} {stage}: {achieved}",
            if k == 0 { "Stages    " } else { "          " }
        )?;
        from = to;
    }
    Ok(())
}

fn stop(r: &RunResult) -> String {
    match (r.plan.duration_s, r.plan.requests) {
        (Some(d), Some(n)) => format!("{n} requests or {d}s"),
        (Some(d), None) => format!("{d}s"),
        (None, Some(n)) => format!("{n} requests"),
        (None, None) => "until stopped".to_string(),
    }
}

/// One figure of a latency summary, "-" when nothing was recorded (there is no figure).
fn figure_us(l: &LatencySummary, us: u64) -> String {
    l.recorded().map_or("-".into(), |_| us.to_string())
}

fn latency_row(out: &mut dyn Write, name: &str, s: &LatencySummary) -> io::Result<()> {
    if s.count == 0 {
        return writeln!(out, "  {name:<11}{:>9}", "-");
    }
    writeln!(
        out,
        "  {name:<11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9.1}{:>9.1}",
        s.min_us,
        s.p50_us,
        s.p75_us,
        s.p90_us,
        s.p99_us,
        s.p99_9_us,
        s.p99_99_us,
        s.max_us,
        s.mean_us,
        s.stdev_us
    )
}

/// One watched server's lines: its CPU, memory and requests per CPU-second, what happened to
/// it during the run, its fingerprint and counters.
fn write_server(
    r: &RunResult,
    s: &crate::stats::ServerUsage,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "  Server     {} ({}): {:.2} CPU s (user {:.2}, sys {:.2}) = {:.2} cores ({:.0}% of machine), peak memory {}{}",
        s.label,
        s.target,
        s.cpu_s,
        s.cpu_user_s,
        s.cpu_system_s,
        s.cores,
        s.machine_percent,
        bytes_iec(s.peak_memory_bytes as f64),
        match s.requests_per_cpu_s {
            Some(v) => format!(", {} req per CPU-s", grouped_rounded(v)),
            None => String::new(),
        }
    )?;
    if s.requests_per_cpu_s.is_none() {
        // Documents of older builds say no reason: then it was too little CPU or a
        // sampling stopped early.
        let why = s
            .why_unmeasured(crate::stats::Figure::RequestsPerCpuS)
            .map_or_else(
                || {
                    format!(
                        "under {} CPU s measured, or sampling stopped early",
                        crate::stats::MEASURABLE_CPU_S
                    )
                },
                str::to_string,
            );
        writeln!(out, "             req per CPU-s not measurable: {why}")?;
    }
    for p in &s.pods {
        writeln!(out, "             {}", super::pod_line(p))?;
    }
    for e in &s.events {
        writeln!(out, "             during the run: {e}")?;
    }
    if let Some(st) = &s.sampling_stopped {
        writeln!(
            out,
            "             sampling stopped {:.1} s in: {} (figures cover {:.1} s)",
            st.after_s, st.reason, s.sampled_s
        )?;
    }
    let f = &s.fingerprint;
    for line in f.lines() {
        writeln!(out, "             {line}")?;
    }
    for w in &f.warnings {
        writeln!(out, "             WARNING: {w}")?;
    }
    let counters: Vec<String> = s
        .counters
        .iter()
        .map(|c| match c.value {
            Some(v) if r.totals.requests > 0 => format!(
                "{} {} ({:.1} per request)",
                c.event,
                grouped(v),
                v as f64 / r.totals.requests as f64
            ),
            Some(v) => format!("{} {}", c.event, grouped(v)),
            None => format!("{}: {}", c.event, c.status),
        })
        .collect();
    if !counters.is_empty() {
        writeln!(out, "             counters: {}", counters.join("; "))?;
    }
    Ok(())
}

impl Report<RunResult> for TextReport {
    fn write(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        write_header(r, out)?;
        writeln!(out)?;
        write_totals(r, out)?;
        write_errors(r, out)?;
        write_tls(r, out)?;
        write_http2(r, out)?;
        write_quic(r, out)?;
        write_client(r, out)?;
        for s in &r.servers {
            write_server(r, s, out)?;
        }
        if !r.limiter.reason.is_empty() {
            writeln!(out, "  Limiter    {}", r.limiter.reason)?;
        }
        if let Some(slo) = &r.slo {
            super::write_slo("SLO", slo, out)?;
            // Only a percentile counts them (`SloMetric::judged`); the mean stays the answered's.
            let on_percentile = slo.conditions.iter().any(|c| {
                crate::slo::parse(&c.condition).is_ok_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| matches!(c.metric, crate::slo::SloMetric::Percentile(_)))
                })
            });
            if on_percentile && r.totals.unanswered_at_end > 0 && r.pacing.is_some() {
                writeln!(
                    out,
                    "  {:<10} latency percentiles count the {} requests still unanswered at the end as the slowest",
                    "",
                    crate::units::grouped(r.totals.unanswered_at_end)
                )?;
            }
        }
        write_sources(r, out)?;
        writeln!(out)?;
        write_latency(r, out)?;
        write_entries(r, out)
    }
}

/// A request mix: per entry its share, answers, errors, status codes and total latency.
fn write_entries(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    if r.entries.is_empty() {
        return Ok(());
    }
    let total_weight: u64 = r.entries.iter().map(|e| e.weight).sum();
    let answered: u64 = r.entries.iter().map(|e| e.requests + e.errors).sum();
    writeln!(out)?;
    writeln!(
        out,
        "  Mix              weight     sent   answered  errors     p50 µs   p99 µs   max µs  status"
    )?;
    for e in &r.entries {
        let share = |n: u64, of: u64| {
            if of == 0 {
                0.0
            } else {
                100.0 * n as f64 / of as f64
            }
        };
        let status: Vec<String> = e
            .status_codes
            .iter()
            .map(|(c, n)| format!("{c}:{n}"))
            .collect();
        writeln!(
            out,
            "  {:<14} {:>7.1}% {:>7.1}% {:>10} {:>7} {:>10} {:>8} {:>8}  {}",
            e.name,
            share(e.weight, total_weight),
            share(e.requests + e.errors, answered),
            grouped(e.requests),
            grouped(e.errors),
            figure_us(&e.latency, e.latency.p50_us),
            figure_us(&e.latency, e.latency.p99_us),
            figure_us(&e.latency, e.latency.max_us),
            status.join(" ")
        )?;
    }
    Ok(())
}

/// The lines on what a run did beside its latency: Requests, Transfer, Errors, Status,
/// Client and (open loop) Stages, Pacing and Early, as the text report has them; the HTML
/// page shows them as they are.
pub(super) fn run_lines(r: &RunResult) -> io::Result<String> {
    let mut out = Vec::new();
    write_totals(r, &mut out)?;
    write_errors(r, &mut out)?;
    write_client(r, &mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The first two lines: version, method and URL, then the load (connections, threads,
/// pacing, stop rule, connection reuse) and whether the run was interrupted.
fn write_header(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let p = &r.plan;
    writeln!(
        out,
        "archbench {}  {} {}",
        r.environment.archbench_version, p.method, p.url
    )?;
    writeln!(
        out,
        "  {} connections, {} threads, {}, {}, {}{}{}",
        p.connections,
        p.threads,
        pacing(r),
        stop(r),
        if p.keepalive {
            "keep-alive"
        } else {
            "new connection per request"
        },
        match &p.pinned_cert {
            _ if !p.url.starts_with("https") => String::new(),
            _ if p.insecure => ", TLS NOT VERIFIED (--insecure)".into(),
            Some(file) => format!(", TLS pinned to the certificate of {file}"),
            None => String::new(),
        },
        if r.interrupted { "  [INTERRUPTED]" } else { "" },
    )
}

/// "; N sent and still unanswered when it ended", when the server held some at the end.
pub(super) fn unanswered_note(t: &crate::stats::Totals) -> String {
    match t.unanswered_at_end {
        0 => String::new(),
        n => format!("; {} sent and still unanswered when it ended", grouped(n)),
    }
}

/// The Requests and Transfer lines: answers, time, rate, bytes both ways, connections.
fn write_totals(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let t = &r.totals;
    writeln!(
        out,
        "  Requests   {} answered in {:.2}s  {:.2} req/s{}",
        grouped(t.requests),
        t.elapsed_s,
        t.requests_per_sec,
        unanswered_note(t)
    )?;
    writeln!(
        out,
        "  Transfer   {} read ({}/s), {} written, {} connections opened",
        bytes_iec(t.bytes_read as f64),
        bytes_iec(t.bytes_read_per_sec),
        bytes_iec(t.bytes_written as f64),
        grouped(t.connections_opened)
    )
}

/// The Errors line (by kind) with the note on exhausted local ports, the Status line, and
/// a warning when the answers were errors.
fn write_errors(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let kinds: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| r.errors.get(**k) > 0)
        .map(|k| format!("{} {}", k.name(), grouped(r.errors.get(*k))))
        .collect();
    if kinds.is_empty() {
        writeln!(out, "  Errors     0")?;
    } else {
        writeln!(
            out,
            "  Errors     {} ({})",
            grouped(r.totals.errors),
            kinds.join(", ")
        )?;
    }
    if let Some(note) = ports_note(r) {
        writeln!(out, "             {note}")?;
    }
    let statuses: Vec<String> = r
        .status_codes
        .iter()
        .map(|(c, n)| format!("{c}: {}", grouped(*n)))
        .collect();
    writeln!(
        out,
        "  Status     {}",
        if statuses.is_empty() {
            "-".to_string()
        } else {
            statuses.join(", ")
        }
    )?;
    if let Some(answers) = r.error_answers() {
        writeln!(out, "  WARNING    {answers}")?;
    }
    Ok(())
}

/// Over https, the TLS line: what was negotiated, handshakes full and resumed; and why
/// handshakes failed, with what to do.
fn write_tls(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(t) = &r.tls else { return Ok(()) };
    if t.handshakes() > 0 {
        let alpn = t.alpn.as_deref().map(|p| format!("ALPN {p}"));
        let negotiated: Vec<&str> = [&t.version, &t.cipher, &t.group, &alpn]
            .into_iter()
            .filter_map(|x| x.as_deref())
            .collect();
        let resumed = if t.resumed_handshakes > 0 {
            " (--tls-resume off makes every one full)"
        } else {
            ""
        };
        let timing = match (&t.handshake, t.handshakes_per_s) {
            (Some(h), Some(rate)) => format!(
                "; {} per s, p50 {}, p99 {}",
                grouped_rounded(rate),
                wrk_time_us(h.p50_us as f64),
                wrk_time_us(h.p99_us as f64)
            ),
            _ => String::new(),
        };
        writeln!(
            out,
            "  TLS        {}; handshakes {} full, {} resumed{resumed}{timing}",
            negotiated.join(" "),
            grouped(t.full_handshakes),
            grouped(t.resumed_handshakes)
        )?;
    }
    if let Some(line) = tls_failure_note(t) {
        writeln!(out, "  TLS errors {line}")?;
    }
    Ok(())
}

/// Over HTTP/2, the HTTP/2 line: streams per connection (and when the server allowed fewer
/// than asked), GOAWAYs, the requests sent again (above a GOAWAY's last stream, or refused),
/// resets (refused_stream among them) and connection errors by error code.
fn write_http2(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(h) = &r.http2 else { return Ok(()) };
    let streams = match h.server_max_streams {
        Some(max) if max < h.streams_asked => format!(
            "{} streams per connection (asked {}; the server's MAX_CONCURRENT_STREAMS is {max})",
            h.streams_used(),
            h.streams_asked
        ),
        _ => format!("{} streams per connection", h.streams_asked),
    };
    writeln!(
        out,
        "  HTTP/2     {streams}; {}",
        sent_again(h.goaways, h.retried, &h.resets, &h.connection_errors)
    )
}

/// HTTP/2's and HTTP/3's losses: `n GOAWAY, n requests sent again; streams reset …;
/// connection errors …`.
fn sent_again(
    goaways: u64,
    retried: u64,
    resets: &[crate::stats::H2CodeCount],
    connection_errors: &[crate::stats::H2CodeCount],
) -> String {
    format!(
        "{} GOAWAY, {} requests sent again{}{}",
        grouped(goaways),
        grouped(retried),
        codes("streams reset", resets),
        codes("connection errors", connection_errors)
    )
}

/// `; WHAT code n, code n` for error codes counted, or nothing.
fn codes(what: &str, counts: &[crate::stats::H2CodeCount]) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let each: Vec<String> = counts
        .iter()
        .map(|c| format!("{} {}", c.code, grouped(c.count)))
        .collect();
    format!("; {what} {}", each.join(", "))
}

/// Over HTTP/3, the QUIC line: streams per connection, handshakes, the datagrams and what the
/// QUIC stack lost and reduced its window for, the path MTU, GOAWAYs, the requests sent
/// again, resets and connection errors by code.
fn write_quic(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(q) = &r.quic else { return Ok(()) };
    writeln!(out, "  QUIC       {}", quic_summary(q))?;
    if q.goaways + q.retried > 0 || !q.resets.is_empty() || !q.connection_errors.is_empty() {
        writeln!(
            out,
            "             {}",
            sent_again(q.goaways, q.retried, &q.resets, &q.connection_errors)
        )?;
    }
    if let Some(note) = quic_note(r) {
        writeln!(out, "  QUIC errors {note}")?;
    }
    Ok(())
}

/// The QUIC line's figures: streams per connection, handshakes, datagrams, losses,
/// congestion, path MTU.
pub fn quic_summary(q: &crate::stats::QuicFigures) -> String {
    let mtu = match (q.path_mtu_min, q.path_mtu_max) {
        (Some(a), Some(b)) if a == b => format!(", path MTU {a}"),
        (Some(a), Some(b)) => format!(", path MTU {a}-{b}"),
        _ => String::new(),
    };
    let failed = match q.handshakes_failed {
        0 => String::new(),
        n => format!(" ({} failed)", grouped(n)),
    };
    let dropped = match q.datagrams_dropped_by_socket {
        0 => String::new(),
        n => format!(", {} not taken by the socket", grouped(n)),
    };
    format!(
        "{} streams per connection; {} handshakes{failed}{}; datagrams {} sent, {} received{dropped}; {} packets lost, {} congestion events{mtu}",
        q.streams_asked,
        grouped(q.handshakes),
        zero_rtt_summary(q),
        grouped(q.datagrams_sent),
        grouped(q.datagrams_received),
        grouped(q.packets_lost),
        grouped(q.congestion_events),
    )
}

/// `--0rtt`: what the server did with the early data, and the sessions fetched for it.
fn zero_rtt_summary(q: &crate::stats::QuicFigures) -> String {
    if q.fetch_handshakes == 0 {
        return String::new();
    }
    let offered = q.zero_rtt_accepted + q.zero_rtt_rejected;
    let without = match q.zero_rtt_unavailable {
        0 => String::new(),
        n => format!(", {} without a session", grouped(n)),
    };
    format!(
        " (0-RTT accepted on {} of {} offered{without}; {} sessions fetched by {} handshakes before the run)",
        grouped(q.zero_rtt_accepted),
        grouped(offered),
        grouped(q.sessions_fetched),
        grouped(q.fetch_handshakes)
    )
}

/// Why TLS failed, in one line: how many, the main reason with what to do, the first message.
pub fn tls_failure_note(t: &crate::stats::TlsFigures) -> Option<String> {
    let main = t.main_failure()?;
    let total: u64 = t.failures.iter().map(|f| f.count).sum();
    Some(format!(
        "{}: {}{}",
        grouped(total),
        main.reason.advice(),
        t.first_failure
            .as_deref()
            .map(|m| format!(" (first: {m})"))
            .unwrap_or_default()
    ))
}

/// The Client line (archbench's own CPU) and, in open loop, the Pacing line.
fn write_client(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let c = &r.client;
    writeln!(
        out,
        "  Client     {:.2} CPU s (user {:.2}, sys {:.2}), busiest worker {:.0}% of a core, {}",
        c.cpu_s,
        c.cpu_user_s,
        c.cpu_system_s,
        c.busiest_worker_percent,
        match c.requests_per_cpu_s {
            Some(v) => format!("{} req per CPU-s", grouped_rounded(v)),
            None => format!(
                "req per CPU-s not measurable (under {} CPU s)",
                crate::stats::MEASURABLE_CPU_S
            ),
        }
    )?;
    write_stages(r, out)?;
    if let Some(pc) = &r.pacing {
        let l = &pc.lateness;
        writeln!(
            out,
            "  Pacing     target {} req/s, achieved {:.1}; send lateness p50 {} µs, p99 {} µs, max {} µs; {} requests held by a busy connection",
            // A whole rate as typed (2000); a staged run's mean to a tenth; below one request
            // a second (down to 0.001), to the thousandth, never "0.0".
            if pc.target_rate.fract() == 0.0 {
                format!("{}", pc.target_rate)
            } else if pc.target_rate < 1.0 {
                format!("{}", (pc.target_rate * 1000.0).round() / 1000.0)
            } else {
                format!("{:.1}", pc.target_rate)
            },
            pc.achieved_rate,
            figure_us(l, l.p50_us),
            figure_us(l, l.p99_us),
            figure_us(l, l.max_us),
            grouped(pc.held_by_busy_connection)
        )?;
        if pc.early_sends > 0 {
            let e = &pc.earliness;
            writeln!(
                out,
                "  Early      {} requests sent before their time (the slack is {} µs) to share a wake-up: earliness p50 {} µs, p99 {} µs, max {} µs; timed from their actual send",
                grouped(pc.early_sends),
                r.plan.pacing_slack_us.unwrap_or(0),
                e.p50_us,
                e.p99_us,
                e.max_us
            )?;
        }
    }
    Ok(())
}

/// For a merged result, the Sources lines: how many, how far apart they started, and one
/// line per source.
fn write_sources(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    if r.sources.is_empty() {
        return Ok(());
    }
    let skew = r
        .start_skew_s
        .map(|d| format!(", first sends {:.3} ms apart", d * 1000.0))
        .unwrap_or_default();
    writeln!(out, "  Sources    {} merged{skew}", r.sources.len())?;
    for src in &r.sources {
        writeln!(
            out,
            "             {}: {} on {}, started {} (+{:.3} s), {} requests, limiter {}",
            src.file,
            src.plan.url,
            src.environment.hostname,
            src.started_at,
            src.start_offset_s,
            grouped(src.totals.requests),
            src.limiter.side.as_str()
        )?;
    }
    Ok(())
}

/// The latency table: total, service (open loop), connect and first byte, with the note on
/// what open-loop latency runs from.
fn write_latency(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let open_loop = r.plan.rate.is_some();
    writeln!(
        out,
        "  Latency µs       min      p50      p75      p90      p99    p99.9   p99.99      max     mean    stdev"
    )?;
    let l = &r.latency;
    latency_row(out, "total", &l.total)?;
    if open_loop {
        latency_row(out, "service", &l.service)?;
    }
    latency_row(out, "connect", &l.connect)?;
    latency_row(out, "first byte", &l.first_byte)?;
    if open_loop {
        writeln!(
            out,
            "  (total runs from each request's intended send time; service from its actual send)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stats::{Environment, PlanSummary, Recorder, RunTimes, ServerUsage, WatchedPod};

    fn run_with(servers: Vec<ServerUsage>) -> RunResult {
        let mut r = RunResult::from_recording(
            Recorder::new(None),
            PlanSummary::default(),
            Environment::default(),
            RunTimes {
                started_at: std::time::SystemTime::now(),
                first_send_at: None,
                elapsed_s: 3.0,
                interrupted: false,
            },
        );
        r.servers = servers;
        r
    }

    fn pod(name: &str, node: &str, cpu_s: f64, not_measured: Option<&str>) -> WatchedPod {
        WatchedPod {
            name: name.into(),
            node: Some(node.into()),
            cpu_user_s: cpu_s,
            cpu_system_s: 0.0,
            cpu_s,
            peak_memory_bytes: 2 << 20,
            seen_from_s: not_measured.is_none().then_some(0.0),
            seen_until_s: not_measured.is_none().then_some(3.0),
            not_measured: not_measured.map(str::to_string),
        }
    }

    #[test]
    fn a_server_of_pods_shows_each_and_why_a_ratio_is_missing() {
        let mut s = ServerUsage {
            sampled_s: 3.0,
            samples: 13,
            cpu_s: 0.9,
            pods: vec![
                pod("nginx-two-a", "aks-arm-0", 0.9, None),
                pod("nginx-two-b", "aks-intel-0", 0.0, Some("exec refused")),
            ],
            ..ServerUsage::empty("two".into(), "pod:ns/nginx-two-deployment".into())
        };
        s.rate_answers(9_000);
        let mut out = Vec::new();
        TextReport.write(&run_with(vec![s]), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("pod nginx-two-a on aks-arm-0: 0.90 CPU s (user 0.90, sys 0.00), peak memory 2.00 MiB, read 0.0-3.0 s"),
            "{text}"
        );
        assert!(
            text.contains("pod nginx-two-b on aks-intel-0: 0.00 CPU s (user 0.00, sys 0.00), peak memory 2.00 MiB; not measured whole: exec refused"),
            "{text}"
        );
        assert!(
            text.contains("req per CPU-s not measurable: pod nginx-two-b of two: exec refused"),
            "{text}"
        );
        // No number stands where the ratio has none, neither the server's nor the client's
        // (which ran no CPU here).
        assert!(!text.contains(" req per CPU-s,"), "{text}");
        assert!(
            text.contains("req per CPU-s not measurable (under 0.02 CPU s)"),
            "{text}"
        );
    }
}
