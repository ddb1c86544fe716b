//! Real Caddy (Debian's, HTTP/3 by quic-go; or a newer one built from the Go module proxy)
//! for the HTTP/3 tests: on loopback only, TCP and UDP on one port, a self-signed certificate
//! made here, a JSON access log that says each request's protocol and status, and no admin
//! endpoint.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// One request as Caddy's access log records it.
#[derive(Debug, Clone)]
pub struct CaddyLine {
    /// `HTTP/3.0`, `HTTP/2.0`, ...
    pub proto: String,
    pub status: u16,
    pub uri: String,
    /// Body bytes Caddy wrote.
    pub size: u64,
}

pub struct Caddy {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub port: u16,
}

#[derive(Default)]
pub struct CaddyConfig<'a> {
    /// Protocols served; empty: h1 h2 h3.
    pub protocols: &'a str,
    /// Files served beside the default answer: (path under the site, size in bytes).
    pub files: &'a [(&'a str, usize)],
    /// The certificate and key served (PEM); None: self-signed for 127.0.0.1.
    pub cert: Option<(String, String)>,
    /// The name whose certificate answers a handshake without one (a client asking for an IP
    /// address sends no name): `cert`'s, when it is not for 127.0.0.1.
    pub default_sni: Option<&'a str>,
    /// The newer Caddy `tools/caddy/build` makes from the Go module proxy (its quic-go years
    /// newer than Debian's) rather than Debian's.
    pub newer: bool,
}

/// How long Caddy may take to say its servers run.
const STARTS_WITHIN: Duration = Duration::from_secs(20);

impl Caddy {
    /// None (with a visible note) when caddy is not installed.
    pub fn start(cfg: CaddyConfig<'_>) -> Option<Caddy> {
        let bin = if cfg.newer {
            newer_caddy()?
        } else {
            super::require_tool("caddy")?
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (cert, key) = cfg.cert.clone().unwrap_or_else(|| {
            let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
                .expect("a self-signed certificate");
            (ck.cert.pem(), ck.key_pair.serialize_pem())
        });
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("cert.pem"), cert).unwrap();
        std::fs::write(path("key.pem"), key).unwrap();
        std::fs::create_dir_all(path("www")).unwrap();
        for (name, size) in cfg.files {
            std::fs::write(path("www").join(name), vec![b'x'; *size]).unwrap();
        }
        let port = free_port();
        let protocols = if cfg.protocols.is_empty() {
            "h1 h2 h3"
        } else {
            cfg.protocols
        };
        let d = dir.path().display();
        let default_sni = cfg
            .default_sni
            .map(|n| format!("\tdefault_sni {n}\n"))
            .unwrap_or_default();
        let caddyfile = format!(
            "{{
	admin off
	auto_https off
{default_sni}	storage file_system {d}/data
	servers {{
		protocols {protocols}
	}}
}}
https://127.0.0.1:{port} {{
	bind 127.0.0.1
	tls {d}/cert.pem {d}/key.pem
	log {{
		output file {d}/access.log
		format json
	}}
	root * {d}/www
	@file file
	handle @file {{
		file_server
	}}
	handle {{
		respond \"hello\" 200
	}}
}}
"
        );
        std::fs::write(path("Caddyfile"), caddyfile).unwrap();
        let mut child = Command::new(bin)
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(path("Caddyfile"))
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", path("data"))
            .env("XDG_CONFIG_HOME", path("config"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("caddy starts");
        let stderr = child.stderr.take().expect("caddy's stderr");
        let (tx, rx) = mpsc::channel();
        // Caddy logs to stderr as it goes: read on, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("\"serving initial configuration\"") {
                    let _ = tx.send(());
                }
            }
        });
        let caddy = Caddy {
            child: Some(child),
            dir,
            port,
        };
        rx.recv_timeout(STARTS_WITHIN)
            .expect("caddy says its server runs");
        Some(caddy)
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The certificate Caddy serves (PEM).
    pub fn cert(&self) -> std::path::PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// What the access log holds now (Caddy writes each request's line as it ends).
    pub fn log(&self) -> Vec<CaddyLine> {
        read_log(&self.dir.path().join("access.log"))
    }

    /// Stops Caddy (SIGTERM, waited for) and reads its whole access log.
    pub fn stop_and_read_log(mut self) -> Vec<CaddyLine> {
        self.stop();
        self.log()
    }

    fn stop(&mut self) {
        if let Some(c) = self.child.take() {
            // SAFETY: signalling our own child, not yet waited for.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = super::finish_within(c, STARTS_WITHIN);
        }
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The newer Caddy, where `tools/caddy/build` put it (tools/test builds it); without it the
/// test fails naming the script, or under ARCHBENCH_ALLOW_SKIPS=1 is a listed skip.
fn newer_caddy() -> Option<std::path::PathBuf> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/caddy/build");
    let printed = Command::new(&script).arg("--print").output().ok()?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&printed.stdout).trim());
    if printed.status.success() && path.is_file() {
        return Some(path);
    }
    super::cannot_run("the newer Caddy is not built (tools/caddy/build; tools/test builds it)");
    None
}

/// A loopback port free for TCP and UDP alike (taken by Caddy right after).
fn free_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn read_log(path: &std::path::Path) -> Vec<CaddyLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["msg"] == "handled request")
        .map(|v| CaddyLine {
            proto: v["request"]["proto"].as_str().unwrap_or("").to_string(),
            status: v["status"].as_u64().unwrap_or(0) as u16,
            uri: v["request"]["uri"].as_str().unwrap_or("").to_string(),
            size: v["size"].as_u64().unwrap_or(0),
        })
        .collect()
}
