//! A container's startup, liveness and readiness probes, run as the kubelet's prober runs them
//! (pkg/kubelet/prober): one ticker per probe from the container's start, a probe only once
//! `initialDelaySeconds` have passed, each attempt bounded by `timeoutSeconds`, and a result
//! that changes only after `successThreshold` successes or `failureThreshold` failures in a
//! row. Readiness starts unready, liveness healthy; until a startup probe has succeeded the
//! other two do not run (and the container is neither started nor ready); a startup or
//! liveness probe that fails its threshold asks for the container to be restarted.
//!
//! The actions: `httpGet` (a GET with the probe's headers and `User-Agent: kube-probe/…`,
//! success for a status in 200–399; a redirect is not followed, so any 3xx is a success, as the
//! kubelet counts a redirect to another host; https without certificate checks, as the
//! kubelet's), `tcpSocket` (a connection opened), `exec` (the command in the container, exit 0).
//! `grpc` is not modelled: a container that asks for it is refused before it starts.
//!
//! This module decides and reports; the container's task applies (ready, started, restart)
//! and records the Events, so nothing here reaches into the pod.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe as ProbeSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::exec::{self, ExecTarget};

/// The User-Agent of the kubelet's HTTP probes (its minor version is the cluster's).
const USER_AGENT: &str = "kube-probe/1.37";
/// How much of an HTTP probe's response is read (the kubelet reads at most 10 KiB).
const MAX_RESPONSE: usize = 10 * 1024;

/// Which of a container's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    /// As the kubelet's events name it ("Readiness probe failed: …").
    pub fn title(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Kind::Startup => "startupProbe",
            Kind::Liveness => "livenessProbe",
            Kind::Readiness => "readinessProbe",
        }
    }

    /// This probe of a container's spec.
    fn of(self, container: &Container) -> Option<&ProbeSpec> {
        match self {
            Kind::Startup => container.startup_probe.as_ref(),
            Kind::Liveness => container.liveness_probe.as_ref(),
            Kind::Readiness => container.readiness_probe.as_ref(),
        }
    }
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    HttpGet {
        https: bool,
        /// `host`, else the pod's address.
        host: Option<String>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    TcpSocket {
        host: Option<String>,
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
}

/// One probe with its timing, the API server's defaults already in the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// A container's probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerProbes {
    pub startup: Option<Probe>,
    pub liveness: Option<Probe>,
    pub readiness: Option<Probe>,
}

fn seconds(v: Option<i32>, default: u64, least: u64) -> Duration {
    Duration::from_secs(
        v.and_then(|n| u64::try_from(n).ok())
            .unwrap_or(default)
            .max(least),
    )
}

fn count(v: Option<i32>, default: u32) -> u32 {
    v.and_then(|n| u32::try_from(n).ok())
        .unwrap_or(default)
        .max(1)
}

/// A port as a probe names it: a number, or the name of one of the container's ports.
fn port(container: &Container, v: &IntOrString, field: &str) -> Result<u16, String> {
    let named = |name: &str| {
        let p = container
            .ports
            .as_ref()?
            .iter()
            .find(|p| p.name.as_deref() == Some(name))?;
        u64::try_from(p.container_port).ok()
    };
    let number = match v {
        IntOrString::Int(n) => u64::try_from(*n).ok(),
        IntOrString::String(s) => s.parse().ok().or_else(|| named(s)),
    };
    number
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            // Shown as the JSON value reads ("Some(String(\"web\"))"), as it always was.
            let shown = match v {
                IntOrString::Int(n) => serde_json::Value::from(*n),
                IntOrString::String(s) => serde_json::Value::from(s.as_str()),
            };
            format!(
                "{field}.port {:?} is not a port of the container",
                Some(shown)
            )
        })
}

impl Probe {
    /// The probe `v` (a container's `readinessProbe`, say); Err names what is not modelled or
    /// not valid.
    fn parse(container: &Container, v: &ProbeSpec, kind: Kind) -> Result<Probe, String> {
        let field = kind.field();
        let action = if let Some(a) = &v.http_get {
            let headers = a
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            Action::HttpGet {
                https: a.scheme.as_deref() == Some("HTTPS"),
                host: a.host.clone(),
                port: port(container, &a.port, &format!("{field}.httpGet"))?,
                path: match a.path.as_deref() {
                    Some(p) if p.starts_with('/') => p.to_string(),
                    Some(p) => format!("/{p}"),
                    None => "/".into(),
                },
                headers,
            }
        } else if let Some(a) = &v.tcp_socket {
            Action::TcpSocket {
                host: a.host.clone(),
                port: port(container, &a.port, &format!("{field}.tcpSocket"))?,
            }
        } else if let Some(a) = &v.exec {
            let command = a.command.clone().unwrap_or_default();
            if command.is_empty() {
                return Err(format!("{field}.exec has no command"));
            }
            Action::Exec { command }
        } else if v.grpc.is_some() {
            return Err(format!("{field}.grpc is not modelled by this node agent"));
        } else {
            return Err(format!("{field} has no httpGet, tcpSocket or exec"));
        };
        Ok(Probe {
            action,
            initial_delay: seconds(v.initial_delay_seconds, 0, 0),
            period: seconds(v.period_seconds, 10, 1),
            timeout: seconds(v.timeout_seconds, 1, 1),
            success_threshold: count(v.success_threshold, 1),
            failure_threshold: count(v.failure_threshold, 3),
        })
    }
}

impl ContainerProbes {
    /// The probes of a container's spec; Err names the first one that cannot be run here.
    pub fn of(container: &Container) -> Result<ContainerProbes, String> {
        let get = |kind: Kind| {
            kind.of(container)
                .map(|v| Probe::parse(container, v, kind))
                .transpose()
        };
        Ok(ContainerProbes {
            startup: get(Kind::Startup)?,
            liveness: get(Kind::Liveness)?,
            readiness: get(Kind::Readiness)?,
        })
    }
}

/// Consecutive results against a probe's thresholds: the kubelet's rule for when its result
/// changes.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    result: bool,
    /// The run of equal outcomes so far and whether they were successes.
    run: u32,
    last: Option<bool>,
}

impl Tally {
    pub fn new(initial: bool) -> Tally {
        Tally {
            result: initial,
            run: 0,
            last: None,
        }
    }

    /// Adds one outcome; the result after it.
    pub fn record(&mut self, ok: bool, probe: &Probe) -> bool {
        self.run = if self.last == Some(ok) {
            self.run + 1
        } else {
            1
        };
        self.last = Some(ok);
        let threshold = if ok {
            probe.success_threshold
        } else {
            probe.failure_threshold
        };
        if self.run >= threshold {
            self.result = ok;
        }
        self.result
    }

    pub fn result(&self) -> bool {
        self.result
    }

    /// Failures in a row so far.
    fn failures(&self) -> u32 {
        if self.last == Some(false) {
            self.run
        } else {
            0
        }
    }
}

/// What the probes tell the container's task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeEvent {
    /// The startup probe succeeded (or there is none): liveness and readiness begin.
    Started,
    /// The readiness result changed.
    Ready(bool),
    /// One attempt failed: the kubelet's `Unhealthy` event ("Readiness probe failed: …").
    Unhealthy { kind: Kind, output: String },
    /// A startup or liveness probe failed its threshold: the container is to be restarted.
    Restart { kind: Kind },
}

/// Where the probes reach the container.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub pod_ip: Ipv4Addr,
    /// The container's process to exec in (None: an exec probe fails, saying so).
    pub exec: Option<ExecTarget>,
}

/// One attempt of `action`: Ok, or the failure's words as the kubelet's events give them.
pub async fn attempt(action: &Action, target: &ProbeTarget, limit: Duration) -> Result<(), String> {
    match action {
        Action::HttpGet {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.to_string());
            http_get(&host, *port, path, headers, *https, limit).await
        }
        Action::TcpSocket { host, port } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.to_string());
            match tokio::time::timeout(limit, TcpStream::connect((host.as_str(), *port))).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("dial tcp {host}:{port}: connect: {e}")),
                Err(_) => Err(format!("dial tcp {host}:{port}: i/o timeout")),
            }
        }
        Action::Exec { command } => {
            let Some(t) = &target.exec else {
                return Err(format!(
                    "command {command:?}: the container has no process to exec in"
                ));
            };
            exec_probe(t, command, limit).await
        }
    }
}

async fn exec_probe(t: &ExecTarget, command: &[String], limit: Duration) -> Result<(), String> {
    match exec::run_captured(t, command, limit).await {
        Ok((Some(0), _)) => Ok(()),
        // the kubelet's event quotes what the command printed
        Ok((Some(code), out)) => match String::from_utf8_lossy(&out).trim() {
            "" => Err(format!("command {command:?} exited with {code}")),
            said => Err(said.to_string()),
        },
        Ok((None, _)) => Err(format!("command {command:?} timed out")),
        Err(e) => Err(format!("command {command:?} could not run: {e}")),
    }
}

/// The status code of a GET, within `limit` for the whole exchange.
async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    https: bool,
    limit: Duration,
) -> Result<(), String> {
    let scheme = if https { "https" } else { "http" };
    let url = format!("{scheme}://{host}:{port}{path}");
    let exchange = async {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("Get \"{url}\": dial tcp {host}:{port}: connect: {e}"))?;
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n");
        let mut agent_set = false;
        for (k, v) in headers {
            agent_set |= k.eq_ignore_ascii_case("user-agent");
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        if !agent_set {
            request.push_str(&format!("User-Agent: {USER_AGENT}\r\n"));
        }
        request.push_str("Accept: */*\r\nConnection: close\r\n\r\n");
        let head = if https {
            let tls = tls_connector();
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let mut s = tls
                .connect(name, tcp)
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            exchange_head(&mut s, request.as_bytes()).await
        } else {
            let mut s = tcp;
            exchange_head(&mut s, request.as_bytes()).await
        }
        .map_err(|e| format!("Get \"{url}\": {e}"))?;
        status_of(&head).ok_or_else(|| format!("Get \"{url}\": malformed HTTP response"))
    };
    match tokio::time::timeout(limit, exchange).await {
        Err(_) => Err(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok(code)) if (200..400).contains(&code) => Ok(()),
        Ok(Ok(code)) => Err(format!("HTTP probe failed with statuscode: {code}")),
    }
}

/// Writes the request and reads until the response head is complete (or the peer closes).
async fn exchange_head<S>(s: &mut S, request: &[u8]) -> std::io::Result<Vec<u8>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    s.write_all(request).await?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while buf.len() < MAX_RESPONSE && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(buf)
}

/// `HTTP/1.x NNN …` → NNN.
fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

/// TLS as the kubelet's probes speak it: no certificate check.
fn tls_connector() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        });
    match config {
        Ok(c) => tokio_rustls::TlsConnector::from(Arc::new(c)),
        // The ring provider offers the default versions; this cannot fail.
        Err(_) => tokio_rustls::TlsConnector::from(Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        )),
    }
}

/// Accepts any server certificate (the kubelet's HTTPS probes set InsecureSkipVerify); the
/// handshake's signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Where and since when a container run's probes run, and where what they decide goes.
struct Prober<'a> {
    target: &'a ProbeTarget,
    started: Instant,
    events: &'a mpsc::UnboundedSender<ProbeEvent>,
}

impl Prober<'_> {
    /// Runs one probe on its ticker until `on_result` says to stop or the caller drops the
    /// future: each attempt's outcome goes through the probe's tally (starting at
    /// `initial`); `on_result` hears whether the result changed, and the tally.
    async fn tick(
        &self,
        kind: Kind,
        probe: &Probe,
        initial: bool,
        mut on_result: impl FnMut(bool, &Tally) -> bool,
    ) {
        let mut tally = Tally::new(initial);
        let mut next = Instant::now();
        loop {
            tokio::time::sleep_until(next).await;
            next += probe.period;
            if self.started.elapsed() < probe.initial_delay {
                continue;
            }
            let outcome = attempt(&probe.action, self.target, probe.timeout).await;
            if let Err(output) = &outcome {
                let _ = self.events.send(ProbeEvent::Unhealthy {
                    kind,
                    output: output.clone(),
                });
            }
            let before = tally.result();
            let after = tally.record(outcome.is_ok(), probe);
            if !on_result(before != after, &tally) {
                return;
            }
        }
    }

    /// The startup probe until it succeeds (true) or fails its threshold (false: a restart
    /// asked for).
    async fn startup(&self, p: &Probe) -> bool {
        let mut succeeded = false;
        self.tick(Kind::Startup, p, false, |_, t| {
            succeeded = t.result();
            if !succeeded && t.failures() >= p.failure_threshold {
                let _ = self.events.send(ProbeEvent::Restart {
                    kind: Kind::Startup,
                });
                return false;
            }
            !succeeded
        })
        .await;
        succeeded
    }

    /// Readiness, reported as it changes; without a probe, ready now.
    async fn readiness(&self, probe: Option<&Probe>) {
        match probe {
            None => {
                let _ = self.events.send(ProbeEvent::Ready(true));
            }
            Some(p) => {
                self.tick(Kind::Readiness, p, false, |changed, t| {
                    if changed {
                        let _ = self.events.send(ProbeEvent::Ready(t.result()));
                    }
                    true
                })
                .await;
            }
        }
        std::future::pending::<()>().await
    }

    /// Liveness until it fails its threshold (a restart asked for).
    async fn liveness(&self, probe: Option<&Probe>) {
        if let Some(p) = probe {
            self.tick(Kind::Liveness, p, true, |changed, t| {
                if changed && !t.result() {
                    let _ = self.events.send(ProbeEvent::Restart {
                        kind: Kind::Liveness,
                    });
                    return false;
                }
                true
            })
            .await;
        }
        std::future::pending::<()>().await
    }
}

/// The probes of one container run, from its start until the caller drops the future; what
/// they decide arrives on `events`.
pub async fn watch(
    probes: ContainerProbes,
    target: ProbeTarget,
    events: mpsc::UnboundedSender<ProbeEvent>,
) {
    let prober = Prober {
        target: &target,
        started: Instant::now(),
        events: &events,
    };
    if let Some(p) = &probes.startup {
        if !prober.startup(p).await {
            // the restart asked for ends this run: nothing more to probe
            return std::future::pending().await;
        }
    }
    let _ = events.send(ProbeEvent::Started);
    tokio::join!(
        prober.readiness(probes.readiness.as_ref()),
        prober.liveness(probes.liveness.as_ref())
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn container(c: Value) -> Container {
        serde_json::from_value(c).unwrap()
    }

    fn probe(success: u32, failure: u32) -> Probe {
        Probe {
            action: Action::TcpSocket {
                host: None,
                port: 80,
            },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn a_result_changes_only_after_its_threshold_in_a_row() {
        let p = probe(2, 3);
        let mut t = Tally::new(false);
        assert!(!t.record(true, &p), "one success of two");
        assert!(t.record(true, &p), "two in a row");
        assert!(
            t.record(false, &p) && t.record(false, &p),
            "two failures of three"
        );
        assert!(t.record(true, &p), "a success breaks the run");
        assert!(t.record(false, &p) && t.record(false, &p));
        assert!(!t.record(false, &p), "three failures in a row");
    }

    #[test]
    fn probes_are_read_with_named_ports_and_the_kubelets_defaults() {
        let c = container(json!({
            "ports": [{"name": "http", "containerPort": 80}],
            "readinessProbe": {"httpGet": {"path": "healthz", "port": "http", "scheme": "HTTPS",
                "httpHeaders": [{"name": "X-A", "value": "b"}]}, "periodSeconds": 2},
            "livenessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 5,
                "failureThreshold": 1},
            "startupProbe": {"exec": {"command": ["cat", "/tmp/up"]}},
        }));
        let p = ContainerProbes::of(&c).unwrap();
        let r = p.readiness.unwrap();
        assert_eq!(
            r.action,
            Action::HttpGet {
                https: true,
                host: None,
                port: 80,
                path: "/healthz".into(),
                headers: vec![("X-A".into(), "b".into())],
            }
        );
        assert_eq!(r.period, Duration::from_secs(2));
        assert_eq!(r.timeout, Duration::from_secs(1));
        assert_eq!((r.success_threshold, r.failure_threshold), (1, 3));
        let l = p.liveness.unwrap();
        assert_eq!(l.initial_delay, Duration::from_secs(5));
        assert_eq!(l.failure_threshold, 1);
        assert_eq!(
            p.startup.unwrap().action,
            Action::Exec {
                command: vec!["cat".into(), "/tmp/up".into()]
            }
        );
        assert_eq!(
            ContainerProbes::of(&Container::default()).unwrap(),
            ContainerProbes::default()
        );
    }

    #[test]
    fn what_cannot_run_here_is_named() {
        let grpc = container(json!({"livenessProbe": {"grpc": {"port": 9000}}}));
        assert_eq!(
            ContainerProbes::of(&grpc).unwrap_err(),
            "livenessProbe.grpc is not modelled by this node agent"
        );
        let unnamed = container(json!({"readinessProbe": {"httpGet": {"port": "web"}}}));
        assert_eq!(
            ContainerProbes::of(&unnamed).unwrap_err(),
            "readinessProbe.httpGet.port Some(String(\"web\")) is not a port of the container"
        );
        let zero = container(json!({"livenessProbe": {"tcpSocket": {"port": 0}}}));
        assert_eq!(
            ContainerProbes::of(&zero).unwrap_err(),
            "livenessProbe.tcpSocket.port Some(Number(0)) is not a port of the container"
        );
    }

    #[test]
    fn a_status_line_gives_its_code() {
        assert_eq!(status_of(b"HTTP/1.1 302 Found\r\n\r\n"), Some(302));
        assert_eq!(status_of(b"garbage"), None);
    }
}
