//! Helpers shared by the stand-in's integration tests: skips that say so, kubectl with its own
//! cache dir, deadlines on every wait, and the guide's manifests.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether a program is on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// False (with a visible note) when kubectl is missing; panics instead when
/// ARCHBENCH_REQUIRE_KUBECTL=1 (CI).
pub fn require_kubectl() -> bool {
    if on_path("kubectl") {
        return true;
    }
    assert!(
        std::env::var("ARCHBENCH_REQUIRE_KUBECTL").as_deref() != Ok("1"),
        "kubectl is not installed but ARCHBENCH_REQUIRE_KUBECTL=1"
    );
    eprintln!("SKIPPED: kubectl is not installed");
    false
}

/// Pods backed by real nginx need root (namespaces, port 80 on 127.1.x.y) and nginx; false
/// (with a visible note) otherwise, or a panic when ARCHBENCH_REQUIRE_NGINX=1 (CI).
pub fn require_nginx_pods() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let nginx = Path::new("/usr/sbin/nginx").is_file();
    if root && nginx {
        return true;
    }
    let why = if !nginx {
        "nginx is not installed"
    } else {
        "pods need root (namespaces, port 80)"
    };
    assert!(
        std::env::var("ARCHBENCH_REQUIRE_NGINX").as_deref() != Ok("1"),
        "{why} but ARCHBENCH_REQUIRE_NGINX=1"
    );
    eprintln!("SKIPPED: {why}");
    false
}

/// Pods in namespaces of their own need root; false (with a visible note) otherwise, or a
/// panic when ARCHBENCH_REQUIRE_NGINX=1 (CI runs as root).
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("ARCHBENCH_REQUIRE_NGINX").as_deref() != Ok("1"),
        "pods need root but ARCHBENCH_REQUIRE_NGINX=1"
    );
    eprintln!("SKIPPED: pods need root (namespaces)");
    false
}

/// Polls `f` every 100 ms until it gives a value; panics naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// kubectl against one cluster, with a private cache (the dispatcher caches /version, and a
/// stale cache picks another kubectl).
pub struct Kubectl {
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

/// Longest a single kubectl command may take.
const KUBECTL_DEADLINE: Duration = Duration::from_secs(90);

impl Kubectl {
    pub fn new(kubeconfig: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.to_path_buf(),
            cache: tempfile::tempdir().expect("a temp dir for KUBECACHEDIR"),
        }
    }

    pub fn run_with_input(&self, args: &[&str], input: Option<&[u8]>) -> Out {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.cache.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("stdin piped");
            stdin.write_all(input).expect("kubectl reads its stdin");
        }
        let mut stdout = child.stdout.take().expect("stdout piped");
        let mut stderr = child.stderr.take().expect("stderr piped");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let deadline = Instant::now() + KUBECTL_DEADLINE;
        let status = loop {
            if let Some(st) = child.try_wait().expect("waiting for kubectl") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("kubectl {args:?} did not finish within {KUBECTL_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Out {
            code: status.code(),
            stdout: out_reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
        }
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.run_with_input(args, None)
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(out.code, Some(0), "kubectl {args:?} failed: {out:?}");
        out.stdout
    }
}

/// One HTTP/1.0 GET: (status, body).
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// The guide's tuned nginx.conf, with the access log on (so `logs` shows requests).
pub const NGINX_CONF: &str = r#"worker_processes auto;
worker_cpu_affinity auto;
worker_rlimit_nofile 1000000;
events {
    worker_connections 6144;
    use epoll;
    multi_accept on;
}
http {
    access_log /var/log/nginx/access.log;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    server {
        listen 80;
        location / {
            return 200 '{"message":"nginx response","timestamp":"$time_iso8601","server":"$hostname","request_uri":"$request_uri"}';
            add_header Content-Type application/json;
        }
    }
}
"#;

/// Namespace nginx, ConfigMap nginx-config, the amd64 Deployment and its LoadBalancer
/// Service, as issue 9's script sets them up.
pub fn manifest() -> String {
    let conf: String = NGINX_CONF.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: nginx
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: nginx-config
  namespace: nginx
data:
  nginx.conf: |
{conf}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-intel-deployment
  namespace: nginx
  labels:
    app: nginx-multiarch
spec:
  replicas: 1
  selector:
    matchLabels:
      arch: amd64
  template:
    metadata:
      labels:
        app: nginx-multiarch
        arch: amd64
    spec:
      nodeSelector:
        kubernetes.io/arch: amd64
      containers:
      - name: nginx
        image: nginx:latest
        ports:
        - containerPort: 80
          name: http
        volumeMounts:
        - name: nginx-config
          mountPath: /etc/nginx/nginx.conf
          subPath: nginx.conf
      volumes:
      - name: nginx-config
        configMap:
          name: nginx-config
---
apiVersion: v1
kind: Service
metadata:
  name: nginx-intel-svc
  namespace: nginx
spec:
  type: LoadBalancer
  selector:
    arch: amd64
  ports:
  - port: 80
    targetPort: 80
    name: http
"#
    )
}
