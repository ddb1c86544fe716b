//! h2load's layout (nghttp2 1.52), line for line with the numbers in its formats, so scripts
//! that parse h2load keep working; `--latency` adds percentiles after it.
//!
//! The time rows mean what h2load's do: `time for request` from a request's first byte
//! written to its last byte read (the service time); `time for connect` and `time to 1st
//! byte` per connection, as h2load's are per client: TCP connect, and from the connect's
//! start to the connection's first response byte.
//! What archbench does not measure as h2load does is said here and in the README: the
//! `headers` traffic is every byte read beside the bodies (HTTP/2 framing included) and its
//! space savings 0 (responses' header blocks are skipped, not decoded); the `req/s` row is
//! the run's rate per client (archbench keeps no per-client counts: min = max = mean).

use std::io::{self, Write};

use hdrhistogram::Histogram;

use crate::stats::{histogram_within_stdev, RunResult};

pub struct H2loadReport {
    /// `--latency`: percentiles after h2load's table.
    pub latency: bool,
}

/// What the preamble needs from the plan.
pub struct H2loadSetup {
    pub threads: usize,
    pub clients: u64,
    /// None: a timing-based test.
    pub requests: Option<u64>,
    pub warm_up_s: f64,
    pub duration_s: f64,
}

/// h2load's util::format_duration: whole µs below a millisecond, else two decimals.
pub fn h2load_time_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{}us", us as u64)
    }
}

/// h2load's util::utos_funit: bytes, else two decimals of KB, MB, GB (powers of 1024).
pub fn h2load_bytes(n: f64) -> String {
    let units = ["B", "KB", "MB", "GB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{}B", n as u64)
    } else {
        format!("{v:.2}{}", units[u])
    }
}

fn share(total: u64, parts: usize, w: usize) -> u64 {
    let parts = parts.max(1) as u64;
    total / parts + u64::from((w as u64) < total % parts)
}

impl H2loadReport {
    /// What h2load prints before the load: one line per thread.
    pub fn preamble(setup: &H2loadSetup, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "starting benchmark...")?;
        for w in 0..setup.threads {
            let clients = share(setup.clients, setup.threads, w);
            match setup.requests {
                Some(n) => writeln!(
                    out,
                    "spawning thread #{w}: {clients} total client(s). {} total requests",
                    share(n, setup.threads, w)
                )?,
                None => writeln!(
                    out,
                    "spawning thread #{w}: {clients} total client(s). Timing-based test with {}s of warm-up time and {}s of main duration for measurements.",
                    setup.warm_up_s, setup.duration_s
                )?,
            }
        }
        Ok(())
    }

    /// Over https, what the first handshake settled, as h2load prints it: the TLS version,
    /// cipher and key exchange in OpenSSL's names, then the protocol ALPN chose (http/1.1
    /// when it chose none). Nothing when no handshake completed: nothing was spoken (it said
    /// "Application protocol: h2c" for an https URL whose every handshake failed).
    pub fn protocol(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let Some(t) = r.tls.as_ref().filter(|t| t.version.is_some()) else {
            return Ok(());
        };
        if let (Some(version), Some(cipher)) = (&t.version, &t.cipher) {
            writeln!(out, "TLS Protocol: {version}")?;
            writeln!(out, "Cipher: {}", super::ab::openssl_cipher(cipher).0)?;
        }
        if let Some(key) = t.group.as_deref().and_then(super::ab::openssl_temp_key) {
            writeln!(out, "Server Temp Key: {key}")?;
        }
        writeln!(
            out,
            "Application protocol: {}",
            t.alpn.as_deref().unwrap_or("http/1.1")
        )
    }

    /// Everything after the load. `elapsed_s`: the whole test (warm-up included).
    pub fn write_body(&self, r: &RunResult, elapsed_s: f64, out: &mut dyn Write) -> io::Result<()> {
        let t = &r.totals;
        let e = &r.errors;
        // h2load's rates are over the duration it prints: for `-n`, the whole test from
        // before its first connect (ours: the engine's clock started after the connects
        // began, which made a 10-request run's "2.33ms, 11176.26 req/s" 2.6× its own
        // ratio); for `-D`, the main duration.
        let measured = match r.plan.requests {
            Some(_) => elapsed_s,
            None => t.elapsed_s,
        }
        .max(1e-9);
        let class = |c: char| {
            r.status_codes
                .iter()
                .filter(|(k, _)| k.starts_with(c))
                .map(|(_, n)| n)
                .sum::<u64>()
        };
        let succeeded = class('2') + class('3');
        // A request whose connection never opened, or whose TLS handshake failed, was never
        // started; done are the answered (h2load counts streams that closed with a response,
        // not requests its connections failed: "0 started, 20 done" said otherwise).
        let started = t.attempted.saturating_sub(e.connect + e.tls);
        let done = t.requests;
        let total = r.plan.requests.unwrap_or(t.attempted).max(t.attempted);
        writeln!(out)?;
        writeln!(
            out,
            "finished in {}, {:.2} req/s, {}/s",
            h2load_time_us(elapsed_s * 1e6),
            t.requests as f64 / measured,
            h2load_bytes(t.bytes_read as f64 / measured)
        )?;
        writeln!(
            out,
            "requests: {total} total, {started} started, {done} done, {succeeded} succeeded, {} failed, {} errored, {} timeout",
            total - succeeded,
            t.errors - e.timeout,
            e.timeout
        )?;
        writeln!(
            out,
            "status codes: {} 2xx, {} 3xx, {} 4xx, {} 5xx",
            class('2'),
            class('3'),
            class('4'),
            class('5')
        )?;
        let headers = t.bytes_read.saturating_sub(t.body_bytes);
        writeln!(
            out,
            "traffic: {} ({}) total, {} ({headers}) headers (space savings 0.00%), {} ({}) data",
            h2load_bytes(t.bytes_read as f64),
            t.bytes_read,
            h2load_bytes(headers as f64),
            h2load_bytes(t.body_bytes as f64),
            t.body_bytes
        )?;
        writeln!(
            out,
            "                     min         max         mean         sd        +/- sd"
        )?;
        time_rows(r, out)?;
        client_rates_row(r, out)?;
        if self.latency {
            latency_percentiles(r, out)?;
        }
        Ok(())
    }
}

/// `--latency`: the percentiles h2load does not print, after its table.
fn latency_percentiles(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "latency percentiles (archbench):")?;
    let l = &r.latency.total;
    for (label, us) in [
        ("50%", l.p50_us),
        ("75%", l.p75_us),
        ("90%", l.p90_us),
        ("99%", l.p99_us),
        ("99.9%", l.p99_9_us),
    ] {
        let figure = l
            .recorded()
            .map_or("-".into(), |_| h2load_time_us(us as f64));
        writeln!(out, "  {label:>6}  {figure}")?;
    }
    Ok(())
}

/// The time rows, from the histograms that mean what h2load's do.
fn time_rows(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let h = &r.histograms;
    // h2load times a request from its submission to its stream's close: our service time
    // (from its first byte written), never the connect before it or, under --rps, the wait
    // for its due time.
    time_row(out, "time for request:", &h.service.0)?;
    time_row(out, "time for connect:", &h.connect.0)?;
    // h2load's row is per client (one connection each), from its connect start to the first
    // response byte: the per-connection histogram, not the per-request one.
    let empty = Histogram::new(3).expect("constant histogram precision is valid");
    let per_connection = h.connection_first_byte.as_ref().map_or(&empty, |s| &s.0);
    time_row(out, "time to 1st byte:", per_connection)
}

/// h2load's `req/s` row: each client's answers over its span (`histograms.client_rates`),
/// their min, max, mean, sd and share within one sd of the mean, computed as h2load computes
/// them (population sd). A document of a build that kept no per-client figures shows none.
fn client_rates_row(r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(rates) = &r.histograms.client_rates else {
        return writeln!(
            out,
            "req/s           : {:>10}  {:>10}  {:>10}  {:>10}  {:>8}",
            "-", "-", "-", "-", "-"
        );
    };
    let [min, max, mean, sd, within] = exact_spread(rates);
    writeln!(
        out,
        "req/s           : {min:>10.2}  {max:>10.2}  {mean:>10.2}  {sd:>10.2}  {within:>7.2}%"
    )
}

/// min, max, mean, population sd and the share (%) within one sd of the mean; zeros when
/// there are no values, as h2load's.
fn exact_spread(values: &[f64]) -> [f64; 5] {
    if values.is_empty() {
        return [0.0; 5];
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let within = values
        .iter()
        .filter(|v| (mean - sd..=mean + sd).contains(v))
        .count() as f64
        * 100.0
        / n;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    [min, max, mean, sd, within]
}

/// `h`'s min, max, mean, standard deviation and the share of its values within one standard
/// deviation of the mean, in percent (h2load's columns); zeros when it is empty, as h2load's.
fn spread(h: &Histogram<u64>) -> [f64; 5] {
    if h.is_empty() {
        return [0.0; 5];
    }
    [
        h.min() as f64,
        h.max() as f64,
        h.mean(),
        h.stdev(),
        histogram_within_stdev(h),
    ]
}

fn time_row(out: &mut dyn Write, name: &str, h: &Histogram<u64>) -> io::Result<()> {
    let [min, max, mean, sd, within] = spread(h);
    writeln!(
        out,
        "{name} {:>10}  {:>10}  {:>10}  {:>10}  {within:>7.2}%",
        h2load_time_us(min),
        h2load_time_us(max),
        h2load_time_us(mean),
        h2load_time_us(sd)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_h2loads_formats() {
        assert_eq!(h2load_time_us(49.0), "49us");
        assert_eq!(h2load_time_us(9_630.0), "9.63ms");
        assert_eq!(h2load_time_us(713_680.0), "713.68ms");
        assert_eq!(h2load_time_us(2_000_000.0), "2.00s");
        assert_eq!(h2load_bytes(600.0), "600B");
        assert_eq!(h2load_bytes(24_000.0), "23.44KB");
        assert_eq!(h2load_bytes(2_560_196.0), "2.44MB");
        assert_eq!(share(5, 2, 0), 3);
        assert_eq!(share(5, 2, 1), 2);
    }

    #[test]
    fn client_rates_spread_as_h2load_computes_it() {
        assert_eq!(exact_spread(&[]), [0.0; 5]);
        assert_eq!(exact_spread(&[5.0, 5.0]), [5.0, 5.0, 5.0, 0.0, 100.0]);
        // Population sd of 1, 2, 3, 4: sqrt(1.25); 2 and 3 lie within one sd of 2.5.
        let [min, max, mean, sd, within] = exact_spread(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((min, max, mean, within), (1.0, 4.0, 2.5, 50.0));
        assert!((sd - 1.25f64.sqrt()).abs() < 1e-12);
    }
}
