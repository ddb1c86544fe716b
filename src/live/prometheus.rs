//! `--prometheus ADDR`: the running load as OpenMetrics text on `GET /metrics`, for users who
//! watch everything in Grafana. A plain thread with a blocking listener: a scrape every few
//! seconds needs no runtime.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Board, ServerLive, TargetLive, BUCKETS_US};
use crate::stats::{ErrorKind, QuicFigures};

/// The endpoint: serving until dropped.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Could not listen where asked.
#[derive(Debug, thiserror::Error)]
#[error("--prometheus {addr}: cannot listen there: {source}")]
pub struct BindError {
    addr: SocketAddr,
    #[source]
    source: std::io::Error,
}

impl Endpoint {
    /// Listens on `addr` and serves `board`'s figures from a thread of its own.
    pub fn start(addr: SocketAddr, board: Arc<Board>) -> Result<Endpoint, BindError> {
        let listener = TcpListener::bind(addr).map_err(|source| BindError { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| BindError { addr, source })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("archbench-prometheus".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    // A scraper that misbehaves costs its own connection, nothing else; a
                    // failing accept (no descriptors left) is retried, not spun on.
                    match conn {
                        Ok(conn) => {
                            let _ = serve(conn, &board);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .map_err(|source| BindError { addr, source })?;
        Ok(Endpoint {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, board: &Board) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 8192];
    let mut len = 0;
    let path = loop {
        let n = conn.read(&mut buf[len..])?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                break (req.method == Some("GET")).then(|| req.path.unwrap_or("").to_string());
            }
            Ok(httparse::Status::Partial) if len < buf.len() => continue,
            _ => break None,
        }
    };
    let (status, ctype, body) = match path.as_deref() {
        Some("/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            render(&board.snapshot()),
        ),
        Some(_) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "archbench serves /metrics\n".to_string(),
        ),
        None => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_string(),
        ),
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

/// A label value with OpenMetrics' escapes.
fn label(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// A family's metadata: its type, its unit where it has one, and what it counts.
fn header(out: &mut String, name: &str, kind: &str, unit: &str, help: &str) {
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if !unit.is_empty() {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
    let _ = writeln!(out, "# HELP {name} {help}");
}

/// A per-target gauge: name, unit ("" for none), help, and how to read it (None: the target
/// has no such figure now, and no sample is written for it).
type Gauge = (
    &'static str,
    &'static str,
    &'static str,
    fn(&TargetLive) -> Option<f64>,
);

/// A per-server gauge, as [`Gauge`].
type ServerGauge = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ServerLive) -> f64,
);

/// The OpenMetrics exposition of every target.
pub fn render(targets: &[TargetLive]) -> String {
    let mut out = String::new();
    render_requests(&mut out, targets);
    render_errors(&mut out, targets);
    render_latency(&mut out, targets);
    render_target_gauges(&mut out, targets);
    render_worker_busy(&mut out, targets);
    render_server_gauges(&mut out, targets);
    render_quic(&mut out, targets);
    out.push_str("# EOF\n");
    out
}

/// `archbench_requests_total`: each target's answered requests.
fn render_requests(out: &mut String, targets: &[TargetLive]) {
    header(
        out,
        "archbench_requests",
        "counter",
        "",
        "Responses received in full, in every run of the target so far (warm-ups included).",
    );
    for t in targets {
        let _ = writeln!(
            out,
            "archbench_requests_total{{target=\"{}\"}} {}",
            label(&t.name),
            t.answered_total
        );
    }
}

/// `archbench_errors_total`: each target's failed requests, by kind (every kind, zeros
/// included).
fn render_errors(out: &mut String, targets: &[TargetLive]) {
    header(
        out,
        "archbench_errors",
        "counter",
        "",
        "Requests that failed, by kind, in every run of the target so far (warm-ups included).",
    );
    for t in targets {
        for k in ErrorKind::ALL {
            let _ = writeln!(
                out,
                "archbench_errors_total{{target=\"{}\",kind=\"{}\"}} {}",
                label(&t.name),
                k.name(),
                t.errors_by_kind[k as usize]
            );
        }
    }
}

/// `archbench_latency_seconds`: each target's latency histogram (buckets, count, sum).
fn render_latency(out: &mut String, targets: &[TargetLive]) {
    header(
        out,
        "archbench_latency_seconds",
        "histogram",
        "seconds",
        "Total latency of each response (buckets from HDR histograms at 3 significant digits; the sum is exact to the microsecond).",
    );
    for t in targets {
        let name = label(&t.name);
        for (bound, n) in BUCKETS_US.iter().zip(t.buckets) {
            let _ = writeln!(
                out,
                "archbench_latency_seconds_bucket{{target=\"{name}\",le=\"{:?}\"}} {n}",
                *bound as f64 / 1e6
            );
        }
        let _ = writeln!(
            out,
            "archbench_latency_seconds_bucket{{target=\"{name}\",le=\"+Inf\"}} {}",
            t.answered_total
        );
        let _ = writeln!(
            out,
            "archbench_latency_seconds_count{{target=\"{name}\"}} {}",
            t.answered_total
        );
        let _ = writeln!(
            out,
            "archbench_latency_seconds_sum{{target=\"{name}\"}} {:?}",
            t.latency_sum_us as f64 / 1e6
        );
    }
}

/// The per-target gauges: throughput now, p99 over the last second, time into the run,
/// and whether it still runs.
fn render_target_gauges(out: &mut String, targets: &[TargetLive]) {
    let gauges: [Gauge; 4] = [
        (
            "archbench_throughput",
            "requests_per_second",
            "Responses per second over the latest quarter second (0 once the run has ended).",
            // A run that has ended answers nothing now: its last quarter second stood as
            // the present until the next run began.
            |t| Some(if t.finished { 0.0 } else { t.rps_now() }),
        ),
        (
            "archbench_latency_p99",
            "seconds",
            "p99 of total latency over the last second (no sample without an answer in it, none once the run has ended).",
            |t| Some(t.last_second.recorded().filter(|_| !t.finished)?.p99_us as f64 / 1e6),
        ),
        (
            "archbench_elapsed",
            "seconds",
            "Seconds into the target's current run.",
            |t| Some(t.elapsed_s),
        ),
        (
            "archbench_running",
            "",
            "1 while the target's run goes on, 0 once it has ended.",
            |t| Some(if t.finished { 0.0 } else { 1.0 }),
        ),
    ];
    for (name, unit, help, value) in gauges {
        let full = if unit.is_empty() {
            name.to_string()
        } else {
            format!("{name}_{unit}")
        };
        header(out, &full, "gauge", unit, help);
        for t in targets {
            if let Some(v) = value(t) {
                let _ = writeln!(out, "{full}{{target=\"{}\"}} {v}", label(&t.name));
            }
        }
    }
}

/// `archbench_client_worker_busy_ratio`: each load worker's demand, where it is known.
fn render_worker_busy(out: &mut String, targets: &[TargetLive]) {
    header(
        out,
        "archbench_client_worker_busy_ratio",
        "gauge",
        "",
        "Share of a core each load worker thread wanted over the latest quarter second: the time it ran plus waited to run, as the final limiter verdict counts it.",
    );
    for t in targets {
        for (w, b) in t.worker_busy.iter().enumerate() {
            if let Some(b) = b {
                let _ = writeln!(
                    out,
                    "archbench_client_worker_busy_ratio{{target=\"{}\",worker=\"{w}\"}} {b}",
                    label(&t.name)
                );
            }
        }
    }
}

/// The per-server gauges: each watched server's cores and resident memory.
fn render_server_gauges(out: &mut String, targets: &[TargetLive]) {
    let server_gauges: [ServerGauge; 2] = [
        (
            "archbench_server_cpu_cores",
            "",
            "Cores a watched server used over its latest sample.",
            |s| s.now.cores,
        ),
        (
            "archbench_server_memory_bytes",
            "bytes",
            "Resident memory of a watched server.",
            |s| s.now.memory_bytes as f64,
        ),
    ];
    for (name, unit, help, value) in server_gauges {
        header(out, name, "gauge", unit, help);
        for t in targets {
            for s in &t.servers {
                let _ = writeln!(
                    out,
                    "{name}{{target=\"{}\",server=\"{}\"}} {}",
                    label(&t.name),
                    label(&s.now.target),
                    value(s)
                );
            }
        }
    }
}

/// A QUIC counter: name (before `_total`), unit ("" for none), help, and how to read it.
type QuicCounter = (
    &'static str,
    &'static str,
    &'static str,
    fn(&QuicFigures) -> u64,
);

/// The QUIC counters of the targets loaded over HTTP/3 (families only when one is): what
/// the QUIC stack counted, of the ended connections and the open ones as of the workers'
/// latest tick.
fn render_quic(out: &mut String, targets: &[TargetLive]) {
    let quic: Vec<(&TargetLive, &QuicFigures)> = targets
        .iter()
        .filter_map(|t| Some((t, t.quic.as_ref()?)))
        .collect();
    if quic.is_empty() {
        return;
    }
    let counters: [QuicCounter; 8] = [
        (
            "archbench_quic_handshakes",
            "",
            "QUIC handshakes completed.",
            |q| q.handshakes,
        ),
        (
            "archbench_quic_handshakes_failed",
            "",
            "QUIC connections whose handshake did not complete.",
            |q| q.handshakes_failed,
        ),
        (
            "archbench_quic_datagrams_sent",
            "",
            "UDP datagrams the QUIC stack sent.",
            |q| q.datagrams_sent,
        ),
        (
            "archbench_quic_datagrams_received",
            "",
            "UDP datagrams the QUIC stack received.",
            |q| q.datagrams_received,
        ),
        (
            "archbench_quic_sent_bytes",
            "bytes",
            "UDP payload bytes sent.",
            |q| q.udp_bytes_sent,
        ),
        (
            "archbench_quic_received_bytes",
            "bytes",
            "UDP payload bytes received.",
            |q| q.udp_bytes_received,
        ),
        (
            "archbench_quic_packets_lost",
            "",
            "Packets QUIC's loss detection declared lost (their frames sent again).",
            |q| q.packets_lost,
        ),
        (
            "archbench_quic_congestion_events",
            "",
            "Congestion events (the congestion window reduced).",
            |q| q.congestion_events,
        ),
    ];
    for (name, unit, help, value) in counters {
        header(out, name, "counter", unit, help);
        for (t, q) in &quic {
            let _ = writeln!(
                out,
                "{name}_total{{target=\"{}\"}} {}",
                label(&t.name),
                value(q)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target with no answer in its last second has no p99 sample (not a 0), and gets one
    /// once it has.
    #[test]
    fn p99_without_an_answer_is_absent() {
        let mut t = TargetLive::new("t", "", None);
        let text = render(std::slice::from_ref(&t));
        assert!(text.contains("archbench_running{target=\"t\"} 1"), "{text}");
        assert!(!text.contains("archbench_latency_p99_seconds{"), "{text}");
        t.last_second = crate::stats::LatencySummary {
            count: 1,
            p99_us: 2_500,
            ..Default::default()
        };
        let text = render(std::slice::from_ref(&t));
        assert!(
            text.contains("archbench_latency_p99_seconds{target=\"t\"} 0.0025"),
            "{text}"
        );
        // Its run has ended: nothing is answered now, and no last second stands for the
        // present (they kept the run's last figures).
        t.rps_history = vec![31_304.0];
        t.finished = true;
        let text = render(&[t]);
        assert!(text.contains("archbench_running{target=\"t\"} 0"), "{text}");
        assert!(
            text.contains("archbench_throughput_requests_per_second{target=\"t\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("archbench_latency_p99_seconds{"), "{text}");
    }
}
