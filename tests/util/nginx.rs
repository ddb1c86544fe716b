//! Real nginx, started by a test on a free loopback port with a temp config and an access log
//! that records which connection served each request.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One line of the access log.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub connection: u64,
    pub connection_requests: u64,
    pub status: u16,
    pub request: String,
    pub msec: f64,
}

pub struct Nginx {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub port: u16,
}

#[derive(Default)]
pub struct NginxConfig<'a> {
    /// Extra directives inside `server { }`.
    pub server: &'a str,
    /// Extra directives inside `http { }`.
    pub http: &'a str,
    /// `ssl` on the listen socket, with these PEM files' contents.
    pub tls: Option<(&'a str, &'a str)>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Nginx {
    /// None (with a visible note) when nginx is not installed.
    pub fn start(cfg: NginxConfig<'_>) -> Option<Nginx> {
        let bin = super::require_tool("nginx")?;
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().display().to_string();
        let port = free_port();
        std::fs::create_dir_all(dir.path().join("www")).unwrap();
        std::fs::write(
            dir.path().join("www/index.html"),
            archbench::serve::WELCOME_PAGE,
        )
        .unwrap();
        let (listen, ssl) = match cfg.tls {
            Some((cert, key)) => {
                std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
                std::fs::write(dir.path().join("key.pem"), key).unwrap();
                (
                    format!("127.0.0.1:{port} ssl"),
                    format!("ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;"),
                )
            }
            None => (format!("127.0.0.1:{port}"), String::new()),
        };
        let conf = format!(
            r#"
daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  log_format counted '$connection $connection_requests $status $msec "$request"';
  access_log {d}/access.log counted;
  client_body_temp_path {d}/tmp_body;
  proxy_temp_path {d}/tmp_proxy;
  fastcgi_temp_path {d}/tmp_fastcgi;
  uwsgi_temp_path {d}/tmp_uwsgi;
  scgi_temp_path {d}/tmp_scgi;
  types {{ text/html html; }}
  {http}
  server {{
    listen {listen};
    {ssl}
    root {d}/www;
    location / {{ index index.html; }}
    {server}
  }}
}}
"#,
            http = cfg.http,
            server = cfg.server,
        );
        let conf_path: PathBuf = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nginx starts");
        let nginx = Nginx {
            child: Some(child),
            dir,
            port,
        };
        nginx.wait_listening();
        Some(nginx)
    }

    /// Readiness: the listen socket accepts a connection (bounded: 10 s).
    fn wait_listening(&self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {addr}; error log:\n{}",
                std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The nginx process (master_process off: the one process serving).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn https_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Stops nginx gracefully (SIGQUIT, then wait) so every log line is written, then reads
    /// the access log — minus the readiness probe's connection, which sent no request.
    pub fn stop_and_read_log(mut self) -> Vec<LogLine> {
        self.shutdown();
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let mut parts = l.splitn(5, ' ');
                let mut next = || parts.next().expect("log field").to_string();
                LogLine {
                    connection: next().parse().unwrap(),
                    connection_requests: next().parse().unwrap(),
                    status: next().parse().unwrap(),
                    msec: next().parse().unwrap(),
                    request: next().trim_matches('"').to_string(),
                }
            })
            .collect()
    }

    fn shutdown(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child process by its pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
            let _ = child.wait();
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
