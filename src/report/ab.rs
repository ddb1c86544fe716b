//! ApacheBench 2.3's layout, line for line, so scripts that parse ab keep working.

use std::io::{self, Write};

use hdrhistogram::Histogram;

use super::Report;
use crate::stats::RunResult;

pub struct AbReport {
    /// `-l`: differing body lengths are not failures.
    pub variable_length: bool,
}

/// ab's ap_round_ms: microseconds to whole milliseconds, rounding half up.
fn ms(us: f64) -> i64 {
    ((us + 500.0) / 1000.0).floor() as i64
}

/// One row of the Connection Times table, in ms as ab rounds them.
struct Row {
    min: i64,
    mean: i64,
    sd: f64,
    median: i64,
    max: i64,
}

impl Row {
    fn of(h: &Histogram<u64>) -> Row {
        let (min, mean, sd, median, max) = if h.is_empty() {
            (0, 0, 0.0, 0, 0)
        } else {
            (
                ms(h.min() as f64),
                (h.mean() / 1000.0 + 0.5).floor() as i64,
                h.stdev() / 1000.0,
                ms(h.value_at_quantile(0.5) as f64),
                ms(h.max() as f64),
            )
        };
        Row {
            min,
            mean,
            sd,
            median,
            max,
        }
    }

    fn write(&self, out: &mut dyn Write, name: &str) -> io::Result<()> {
        let Row {
            min,
            mean,
            sd,
            median,
            max,
        } = self;
        writeln!(
            out,
            "{name:<12}{min:5} {mean:4} {sd:5.1} {median:6} {max:7}"
        )
    }

    /// ab's SANE() check: warn when mean and median are more than one (or two) standard
    /// deviations apart.
    fn sanity(&self, out: &mut dyn Write, what: &str) -> io::Result<()> {
        let d = (self.mean - self.median).abs() as f64;
        if d > 2.0 * self.sd {
            writeln!(
                out,
                "ERROR: The median and mean for {what} are more than twice the standard"
            )?;
            writeln!(
                out,
                "       deviation apart. These results are NOT reliable."
            )
        } else if d > self.sd {
            writeln!(
                out,
                "WARNING: The median and mean for {what} are not within a normal deviation"
            )?;
            writeln!(out, "        These results are probably not that reliable.")
        } else {
            Ok(())
        }
    }
}

/// Host, port and path from the stored URL.
fn url_parts(url: &str) -> (String, u16, String) {
    match url::Url::parse(url) {
        Ok(u) => {
            let mut path = u.path().to_string();
            if let Some(q) = u.query() {
                path.push('?');
                path.push_str(q);
            }
            // An IPv6 literal as ab says it: without its URL brackets.
            let host = match u.host() {
                Some(url::Host::Ipv6(a)) => a.to_string(),
                _ => u.host_str().unwrap_or("").to_string(),
            };
            (host, u.port_or_known_default().unwrap_or(80), path)
        }
        Err(_) => (url.to_string(), 80, "/".to_string()),
    }
}

impl AbReport {
    /// The lines ab prints before the run starts.
    pub fn preamble(url: &str, quiet: bool, out: &mut dyn Write) -> io::Result<()> {
        let (host, _, _) = url_parts(url);
        writeln!(
            out,
            "This is ApacheBench, Version 2.3 <archbench {}>",
            env!("CARGO_PKG_VERSION")
        )?;
        writeln!(
            out,
            "Copyright 1996 Adam Twiss, Zeus Technology Ltd, http://www.zeustech.net/"
        )?;
        writeln!(
            out,
            "Licensed to The Apache Software Foundation, http://www.apache.org/"
        )?;
        writeln!(out)?;
        write!(
            out,
            "Benchmarking {host} (be patient){}",
            if quiet { "..." } else { "\n" }
        )?;
        out.flush()
    }
}

impl Report<RunResult> for AbReport {
    fn write(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "\n")?;
        self.write_document(r, out)?;
        writeln!(out)?;
        self.write_counts(r, out)?;
        write_rates(r, out)?;
        if r.totals.requests > 0 {
            write_connection_times(r, out)?;
        }
        // ab prints its percentages from two requests on (one request's are all its time).
        if r.totals.requests > 1 {
            write_percentages(r, out)?;
        }
        Ok(())
    }
}

/// ab's lines for an https target: the protocol, cipher (OpenSSL's names) and its bits, the
/// key exchange, and the name sent for SNI (ab sends none to an IP address).
fn write_tls_lines(
    t: &crate::stats::TlsFigures,
    host: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    if let (Some(version), Some(cipher)) = (&t.version, &t.cipher) {
        let (name, bits) = openssl_cipher(cipher);
        writeln!(
            out,
            "SSL/TLS Protocol:       {version},{name},{bits},{bits}"
        )?;
    }
    if let Some(key) = t.group.as_deref().and_then(openssl_temp_key) {
        writeln!(out, "Server Temp Key:        {key}")?;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_err() {
        writeln!(out, "TLS Server Name:        {host}")?;
    }
    Ok(())
}

/// A cipher suite as OpenSSL (and so ab) names it, with its key bits; rustls's own name for
/// a suite it has no OpenSSL name for here.
pub(super) fn openssl_cipher(rustls_name: &str) -> (String, u32) {
    crate::stats::CIPHER_SUITES
        .iter()
        .find(|(ours, _, _)| *ours == rustls_name)
        .map_or((rustls_name.to_string(), 0), |(_, name, bits)| {
            (name.to_string(), *bits)
        })
}

/// The key exchange as ab prints it from OpenSSL: "X25519 253 bits", "ECDH P-256 256 bits".
pub(super) fn openssl_temp_key(group: &str) -> Option<&'static str> {
    crate::stats::KX_GROUPS
        .iter()
        .find(|(ours, _, _)| *ours == group)
        .map(|(_, _, key)| *key)
}

impl AbReport {
    /// The server (software, host, port) and the document (path, length) asked for.
    fn write_document(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let (host, port, path) = url_parts(&r.plan.url);
        writeln!(
            out,
            "Server Software:        {}",
            r.response.server.as_deref().unwrap_or("")
        )?;
        writeln!(out, "Server Hostname:        {host}")?;
        writeln!(out, "Server Port:            {port}")?;
        if let Some(t) = &r.tls {
            write_tls_lines(t, &host, out)?;
        }
        writeln!(out)?;
        writeln!(out, "Document Path:          {path}")?;
        if self.variable_length {
            writeln!(out, "Document Length:        Variable")
        } else {
            writeln!(
                out,
                "Document Length:        {} bytes",
                r.response.first_body_bytes.unwrap_or(0)
            )
        }
    }

    /// Concurrency, time taken, complete and failed requests (by ab's kinds), non-2xx and
    /// keep-alive answers, and the bytes transferred.
    fn write_counts(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let t = &r.totals;
        let e = &r.errors;
        let length_failures = if self.variable_length {
            0
        } else {
            r.response.body_length_mismatches
        };
        let (err_conn, err_recv, err_except) =
            (e.connect + e.tls, e.read + e.timeout, e.protocol + e.write);
        let bad = err_conn + err_recv + err_except + length_failures;
        writeln!(out, "Concurrency Level:      {}", r.plan.connections)?;
        writeln!(out, "Time taken for tests:   {:.3} seconds", t.elapsed_s)?;
        writeln!(out, "Complete requests:      {}", t.requests)?;
        writeln!(out, "Failed requests:        {bad}")?;
        if bad > 0 {
            writeln!(
                out,
                "   (Connect: {err_conn}, Receive: {err_recv}, Length: {length_failures}, Exceptions: {err_except})"
            )?;
        }
        let non_2xx: u64 = r
            .status_codes
            .iter()
            .filter(|(c, _)| !c.starts_with('2'))
            .map(|(_, n)| n)
            .sum();
        if non_2xx > 0 {
            writeln!(out, "Non-2xx responses:      {non_2xx}")?;
        }
        if r.plan.keepalive {
            writeln!(out, "Keep-Alive requests:    {}", t.keepalive_responses)?;
        }
        writeln!(out, "Total transferred:      {} bytes", t.bytes_read)?;
        if r.plan.body_bytes > 0 {
            writeln!(out, "Total body sent:        {}", t.bytes_written)?;
        }
        writeln!(out, "HTML transferred:       {} bytes", t.body_bytes)
    }
}

/// Requests per second, time per request (per connection and across them) and transfer
/// rates, when anything was answered.
fn write_rates(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let t = &r.totals;
    let (done, timetaken) = (t.requests, t.elapsed_s);
    if timetaken <= 0.0 || done == 0 {
        return Ok(());
    }
    let conc = r.plan.connections as f64;
    writeln!(
        out,
        "Requests per second:    {:.2} [#/sec] (mean)",
        done as f64 / timetaken
    )?;
    writeln!(
        out,
        "Time per request:       {:.3} [ms] (mean)",
        conc * timetaken * 1000.0 / done as f64
    )?;
    writeln!(
        out,
        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
        timetaken * 1000.0 / done as f64
    )?;
    writeln!(
        out,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        t.bytes_read as f64 / 1024.0 / timetaken
    )?;
    if r.plan.body_bytes > 0 {
        let sent = t.bytes_written as f64 / 1024.0 / timetaken;
        writeln!(out, "                        {sent:.2} kb/s sent")?;
        writeln!(
            out,
            "                        {:.2} kb/s total",
            sent + t.bytes_read as f64 / 1024.0 / timetaken
        )?;
    }
    Ok(())
}

/// The Connection Times table (connect, processing, waiting, total) and ab's warnings
/// where a row's mean and median lie far apart.
fn write_connection_times(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let h = &r.histograms;
    // ab counts a reused keep-alive connection's connect time as zero.
    let mut connect = h.connect.0.clone();
    let reused = r.totals.requests.saturating_sub(connect.len());
    if reused > 0 {
        let _ = connect.record_n(0, reused);
    }
    writeln!(out, "\nConnection Times (ms)")?;
    writeln!(out, "              min  mean[+/-sd] median   max")?;
    let rows = [
        ("Connect:", "the initial connection time", Row::of(&connect)),
        ("Processing:", "the processing time", Row::of(&h.service.0)),
        ("Waiting:", "the waiting time", Row::of(&h.first_byte.0)),
        ("Total:", "the total time", Row::of(&h.total.0)),
    ];
    for (name, _, row) in &rows {
        row.write(out, name)?;
    }
    for (_, what, row) in &rows {
        row.sanity(out, what)?;
    }
    Ok(())
}

/// The percentage of the requests served within each time, up to the longest request.
fn write_percentages(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let total = &r.histograms.total.0;
    writeln!(
        out,
        "\nPercentage of the requests served within a certain time (ms)"
    )?;
    for p in [50u32, 66, 75, 80, 90, 95, 98, 99] {
        let v = total.value_at_percentile(p as f64);
        writeln!(out, "  {p}%  {:5}", ms(v as f64))?;
    }
    writeln!(out, " 100%  {:5} (longest request)", ms(total.max() as f64))
}
