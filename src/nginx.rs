//! Local nginx processes: the demo's two servers, the tests' real server, the benches' target
//! (`archbench serve --nginx`). One way to start them: a private directory with the
//! configuration, a port outside the kernel's ephemeral range (where the load's own
//! connections take theirs), a retry when someone else holds it, and readiness proven by the
//! listening socket belonging to our process, not by whoever answers on the port.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum NginxError {
    #[error("nginx is not installed (looked in /usr/sbin, /usr/local/sbin, /usr/bin, /usr/local/nginx/sbin); apt-get install nginx")]
    NotInstalled,
    #[error("cannot prepare nginx's directory {path}: {source}")]
    Files {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {bin}: {source}")]
    Spawn {
        bin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("nginx exited ({status}): {log}")]
    Exited { status: String, log: String },
    #[error("nginx did not listen on {addr} within {seconds} s")]
    NotListening { addr: SocketAddr, seconds: u64 },
    #[error("every port tried on {addr} was taken ({tries} tries)")]
    PortsTaken { addr: Ipv4Addr, tries: u32 },
}

/// nginx as Debian ships it (logging on, 768 connections per worker).
const STOCK: &str = r#"
worker_processes auto;
events { worker_connections 768; }
http {
  sendfile on;
  tcp_nopush on;
  types_hash_max_size 2048;
  types { text/html html; }
  access_log {dir}/access.log;
  error_log {dir}/error.log;
  gzip on;
  server { listen {listen}; root {dir}/www; index index.html; }
}
"#;

/// The "optimized" configuration of the multi-arch guide.
const TUNED: &str = r#"
worker_processes auto;
worker_cpu_affinity auto;
worker_rlimit_nofile 1000000;
events { worker_connections 6144; use epoll; multi_accept on; }
http {
  types { text/html html; }
  access_log off;
  error_log {dir}/error.log;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 100000;
  open_file_cache max=1000 inactive=20s;
  server { listen {listen} backlog=4096; root {dir}/www; index index.html; }
}
"#;

/// For measuring the client: one worker by default, no log, room for 20,000 connections.
const BENCH: &str = r#"
worker_processes 1;
worker_rlimit_nofile 65536;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_requests 1000000;
  types { text/html html; }
  server { listen {listen} backlog=16384; root {dir}/www; location / { index index.html; } }
}
"#;

/// The configurations archbench brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NginxProfile {
    /// Debian's stock nginx.conf (access log on, 768 connections per worker).
    Stock,
    /// The multi-arch guide's tuned nginx.conf.
    Tuned,
    /// A target for benchmarks of the client: access log off, 20,000 connections.
    Bench,
}

impl NginxProfile {
    pub fn name(self) -> &'static str {
        match self {
            NginxProfile::Stock => "stock",
            NginxProfile::Tuned => "tuned",
            NginxProfile::Bench => "bench",
        }
    }

    fn config(self) -> &'static str {
        match self {
            NginxProfile::Stock => STOCK,
            NginxProfile::Tuned => TUNED,
            NginxProfile::Bench => BENCH,
        }
    }

    /// Starts this configuration, with `workers` worker processes instead of its own number.
    pub fn start(self, workers: Option<u32>) -> Result<Nginx, NginxError> {
        let mut config = self.config().to_string();
        if let Some(n) = workers {
            let line = config
                .lines()
                .find(|l| l.trim_start().starts_with("worker_processes"))
                .map(str::to_string);
            if let Some(line) = line {
                config = config.replacen(&line, &format!("worker_processes {n};"), 1);
            }
        }
        Nginx::start(&NginxSpec::new(self.name(), &config))
    }
}

/// What to run. The configuration may use `{dir}` (nginx's own directory: logs, pid, the
/// welcome page under `{dir}/www`) and `{listen}` (address:port to listen on); archbench adds
/// `daemon off`, the pid file, the error log and temp paths.
#[derive(Debug, Clone)]
pub struct NginxSpec {
    /// A name for the directory (`archbench-nginx-<pid>-<name>-…`).
    pub name: String,
    pub config: String,
    /// Loopback address to listen on (the whole 127.0.0.0/8 answers on Linux).
    pub addr: Ipv4Addr,
    /// Extra files to write into its directory first (TLS keys, say): (relative path, bytes).
    pub files: Vec<(String, Vec<u8>)>,
}

impl NginxSpec {
    pub fn new(name: &str, config: &str) -> NginxSpec {
        NginxSpec {
            name: name.to_string(),
            config: config.to_string(),
            addr: Ipv4Addr::LOCALHOST,
            files: Vec::new(),
        }
    }
}

/// A running nginx; stopped (gracefully, then killed) and its directory removed on drop.
pub struct Nginx {
    child: Option<Child>,
    addr: SocketAddr,
    dir: PathBuf,
}

/// Where Debian and source builds put the binary.
pub fn nginx_binary() -> Option<PathBuf> {
    [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/bin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// Ports below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where no
/// outgoing connection will take one between our choice and nginx's bind.
fn candidate_port(attempt: u32) -> u16 {
    let low = crate::os::proc_sys("/proc/sys/net/ipv4/ip_local_port_range")
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p > 12_000)
        .unwrap_or(32_768);
    let span = u32::from(low - 10_000);
    // Spread by process and attempt, so parallel tests start apart.
    let seed = std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(attempt.wrapping_mul(40_503))
        .wrapping_add(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()),
        );
    10_000 + (seed % span) as u16
}

const TRIES: u32 = 10;
const READY_WITHIN: Duration = Duration::from_secs(10);

impl Nginx {
    /// Starts nginx from `spec` on a free port of `spec.addr`, and returns once it listens.
    pub fn start(spec: &NginxSpec) -> Result<Nginx, NginxError> {
        let bin = nginx_binary().ok_or(NginxError::NotInstalled)?;
        for attempt in 0..TRIES {
            match Nginx::start_on(&bin, spec, candidate_port(attempt), attempt) {
                Ok(n) => return Ok(n),
                Err(StartError::PortTaken) => {}
                Err(StartError::Other(e)) => return Err(e),
            }
        }
        Err(NginxError::PortsTaken {
            addr: spec.addr,
            tries: TRIES,
        })
    }

    fn start_on(
        bin: &Path,
        spec: &NginxSpec,
        port: u16,
        attempt: u32,
    ) -> Result<Nginx, StartError> {
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "archbench-nginx-{}-{}-{n}-{attempt}",
            std::process::id(),
            spec.name
        ));
        let files = |source| NginxError::Files {
            path: dir.display().to_string(),
            source,
        };
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www")).map_err(files)?;
        std::fs::write(dir.join("www/index.html"), crate::serve::WELCOME_PAGE).map_err(files)?;
        for (name, bytes) in &spec.files {
            std::fs::write(dir.join(name), bytes).map_err(files)?;
        }
        let addr = SocketAddr::from((spec.addr, port));
        let d = dir.display().to_string();
        let body = spec
            .config
            .replace("{dir}", &d)
            .replace("{listen}", &addr.to_string())
            .replacen(
                "http {",
                &format!(
                    "http {{\n  client_body_temp_path {d}/tmp_body; proxy_temp_path {d}/tmp_proxy; fastcgi_temp_path {d}/tmp_fastcgi; uwsgi_temp_path {d}/tmp_uwsgi; scgi_temp_path {d}/tmp_scgi;"
                ),
                1,
            );
        let conf =
            format!("daemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n{body}");
        std::fs::write(dir.join("nginx.conf"), conf).map_err(files)?;
        let mut cmd = Command::new(bin);
        cmd.arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl in the child before exec; it only asks the kernel to signal nginx when
        // archbench dies, so a hard exit never leaves it running. The signal follows the
        // *thread* that spawned it: start nginx on a thread that lives as long as it should.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| NginxError::Spawn {
            bin: bin.display().to_string(),
            source,
        })?;
        let mut nginx = Nginx {
            child: Some(child),
            addr,
            dir,
        };
        nginx.wait_listening()?;
        Ok(nginx)
    }

    /// Waits until our nginx holds a listening socket on its address: the socket's inode is
    /// among our process's descriptors (another process answering on the port does not count).
    fn wait_listening(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let Some(child) = self.child.as_mut() else {
                return Err(StartError::Other(NginxError::NotListening {
                    addr: self.addr,
                    seconds: READY_WITHIN.as_secs(),
                }));
            };
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                if log.contains("Address already in use") {
                    return Err(StartError::PortTaken);
                }
                let last = log.lines().last().unwrap_or("no error log").to_string();
                return Err(StartError::Other(NginxError::Exited {
                    status: status.to_string(),
                    log: last,
                }));
            }
            if crate::os::listens_on(child.id(), self.addr) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(StartError::Other(NginxError::NotListening {
                    addr: self.addr,
                    seconds: READY_WITHIN.as_secs(),
                }));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The master process (or the only one, with `master_process off`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Its directory: `access.log`, `error.log`, `nginx.conf`, `www/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops nginx gracefully (SIGQUIT: every log line written), waiting at most 5 s before
    /// killing it. The directory stays until drop.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child process by its pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

enum StartError {
    PortTaken,
    Other(NginxError),
}

impl From<NginxError> for StartError {
    fn from(e: NginxError) -> StartError {
        StartError::Other(e)
    }
}
