//! `archbench demo`: two servers on loopback compared side by side, under a minute, nothing to
//! set up. With nginx installed: a stock Debian-style configuration against the tuned one from
//! the multi-arch guide, both watched. Without: two embedded servers (one and two threads).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// nginx as Debian ships it (logging on, 768 connections per worker).
const STOCK: &str = r#"
worker_processes auto;
events { worker_connections 768; }
http {
  sendfile on;
  tcp_nopush on;
  types_hash_max_size 2048;
  include_types;
  access_log {dir}/access.log;
  error_log {dir}/error.log;
  gzip on;
  server { listen 127.0.0.1:{port}; root {dir}/www; index index.html; }
}
"#;

/// The "optimized" configuration of the multi-arch guide.
const TUNED: &str = r#"
worker_processes auto;
worker_cpu_affinity auto;
worker_rlimit_nofile 1000000;
events { worker_connections 6144; use epoll; multi_accept on; }
http {
  include_types;
  access_log off;
  error_log {dir}/error.log;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 100000;
  open_file_cache max=1000 inactive=20s;
  server { listen 127.0.0.1:{port} backlog=4096; root {dir}/www; index index.html; }
}
"#;

/// A temporary nginx; stopped (and its files removed) on drop.
pub struct NginxInstance {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

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

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl NginxInstance {
    pub fn start(bin: &Path, name: &str, template: &str) -> anyhow::Result<NginxInstance> {
        let dir =
            std::env::temp_dir().join(format!("archbench-demo-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("www"))?;
        std::fs::write(dir.join("www/index.html"), crate::serve::WELCOME_PAGE)?;
        let port = free_port()?;
        let d = dir.display().to_string();
        let conf = template
            .replace("{dir}", &d)
            .replace("{port}", &port.to_string())
            .replace("include_types;", "types { text/html html; }")
            .replace(
                "http {",
                &format!(
                    "http {{\n  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;"
                ),
            );
        let conf = format!("daemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n{conf}");
        std::fs::write(dir.join("nginx.conf"), conf)?;
        let mut cmd = Command::new(bin);
        cmd.arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl in the child before exec; it only asks the kernel to signal nginx when
        // archbench dies, so a hard exit never leaves it running.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let mut instance = NginxInstance { child, port, dir };
        instance.wait_listening()?;
        Ok(instance)
    }

    fn wait_listening(&mut self) -> anyhow::Result<()> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                anyhow::bail!(
                    "nginx exited ({status}): {}",
                    log.lines().last().unwrap_or("")
                );
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "nginx did not listen on {addr} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NginxInstance {
    fn drop(&mut self) {
        // SIGQUIT: graceful stop of master and workers.
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGQUIT) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The two servers of the demo.
pub enum DemoServers {
    Nginx(NginxInstance, NginxInstance),
    Embedded(crate::serve::Server, crate::serve::Server),
}

pub fn start_servers() -> anyhow::Result<DemoServers> {
    if let Some(bin) = nginx_binary() {
        let stock = NginxInstance::start(&bin, "stock", STOCK)?;
        let tuned = NginxInstance::start(&bin, "tuned", TUNED)?;
        return Ok(DemoServers::Nginx(stock, tuned));
    }
    let opts = |threads| crate::serve::ServeOptions {
        threads,
        ..crate::serve::ServeOptions::default()
    };
    Ok(DemoServers::Embedded(
        crate::serve::Server::start(opts(1))?,
        crate::serve::Server::start(opts(2))?,
    ))
}

impl DemoServers {
    /// (name, URL, watch spec) of each target, baseline first.
    pub fn targets(&self) -> Vec<(String, String, Option<String>)> {
        match self {
            DemoServers::Nginx(a, b) => vec![
                (
                    "stock".into(),
                    a.url(),
                    Some(format!("stock=pid:{}", a.pid())),
                ),
                (
                    "tuned".into(),
                    b.url(),
                    Some(format!("tuned=pid:{}", b.pid())),
                ),
            ],
            DemoServers::Embedded(a, b) => vec![
                ("embedded-1-thread".into(), a.url(), None),
                ("embedded-2-threads".into(), b.url(), None),
            ],
        }
    }

    pub fn description(&self) -> &'static str {
        match self {
            DemoServers::Nginx(..) => "two nginx instances on loopback: Debian's stock configuration vs the multi-arch guide's tuned one",
            DemoServers::Embedded(..) => "nginx is not installed, so: two embedded servers on loopback (1 vs 2 threads); install nginx for the real comparison",
        }
    }
}
