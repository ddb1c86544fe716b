//! Real nginx for tests, started the library's one way (`archbench::nginx`), with a temp
//! config whose access log records which connection served each request.

/// One line of the access log.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub connection: u64,
    pub connection_requests: u64,
    pub status: u16,
    pub request: String,
    pub msec: f64,
    /// Over TLS: nginx's `$ssl_session_reused` said `r` (a resumed session).
    pub session_reused: bool,
    /// `$server_protocol`: HTTP/1.1, HTTP/2.0, ...
    pub protocol: String,
}

pub struct Nginx {
    inner: archbench::nginx::Nginx,
    pub port: u16,
}

#[derive(Default)]
pub struct NginxConfig<'a> {
    /// Extra directives inside `server { }`.
    pub server: &'a str,
    /// Extra directives inside `http { }`.
    pub http: &'a str,
    /// `ssl` on the listen socket, with a self-signed certificate for 127.0.0.1 (ECDSA P-256,
    /// made here), as a test server of a user's would have.
    pub tls: bool,
    /// `http2` on the listen socket: h2c with prior knowledge (nginx 1.22 speaks no HTTP/1.1
    /// on it then), or h2 through ALPN with `tls`.
    pub http2: bool,
    /// With `tls`: the certificate made as a CA's (CA:TRUE), as `openssl req -x509` makes
    /// them by default.
    pub ca_certificate: bool,
}

/// A loopback port that refuses connections while the returned socket lives: bound, never
/// listening, so no one else can take it meanwhile.
pub fn refusing_port() -> (socket2::Socket, u16) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let port = s.local_addr().unwrap().as_socket().unwrap().port();
    (s, port)
}

impl Nginx {
    /// None (with a visible note) when nginx is not installed.
    pub fn start(cfg: NginxConfig<'_>) -> Option<Nginx> {
        super::require_tool("nginx")?;
        let (listen, ssl, files) = if cfg.tls {
            let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
                .expect("certificate parameters");
            if cfg.ca_certificate {
                params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            }
            let key_pair = rcgen::KeyPair::generate().expect("a key pair");
            let cert = params
                .self_signed(&key_pair)
                .expect("a self-signed certificate");
            let ck = rcgen::CertifiedKey { cert, key_pair };
            (
                "{listen} ssl",
                "ssl_certificate {dir}/cert.pem; ssl_certificate_key {dir}/key.pem;",
                vec![
                    ("cert.pem".to_string(), ck.cert.pem().into_bytes()),
                    (
                        "key.pem".to_string(),
                        ck.key_pair.serialize_pem().into_bytes(),
                    ),
                ],
            )
        } else {
            ("{listen}", "", Vec::new())
        };
        let listen = if cfg.http2 {
            format!("{listen} http2")
        } else {
            listen.to_string()
        };
        let config = format!(
            r#"
master_process off;
worker_processes 1;
events {{ worker_connections 4096; }}
http {{
  log_format counted '$connection $connection_requests $status $msec $ssl_session_reused $server_protocol "$request"';
  access_log {{dir}}/access.log counted;
  types {{ text/html html; }}
  {http}
  server {{
    listen {listen};
    {ssl}
    root {{dir}}/www;
    location / {{ index index.html; }}
    {server}
  }}
}}
"#,
            http = cfg.http,
            server = cfg.server,
        );
        let mut spec = archbench::nginx::NginxSpec::new("test", &config);
        spec.files = files;
        let inner = archbench::nginx::Nginx::start(&spec).expect("nginx starts");
        let port = inner.addr().port();
        Some(Nginx { inner, port })
    }

    /// A file of nginx's directory (`cert.pem`, the certificate of a `tls` server).
    pub fn file(&self, name: &str) -> std::path::PathBuf {
        self.inner.dir().join(name)
    }

    /// The directory nginx serves files from.
    pub fn root(&self) -> String {
        self.inner.dir().join("www").display().to_string()
    }

    /// The nginx process (master_process off: the one process serving).
    pub fn pid(&self) -> u32 {
        self.inner.pid()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn https_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Stops nginx gracefully so every log line is written, then reads a file of its
    /// directory (a log of the test's own format).
    pub fn stop_and_read(mut self, file: &str) -> String {
        self.inner.stop();
        std::fs::read_to_string(self.inner.dir().join(file)).unwrap_or_default()
    }

    /// Stops nginx gracefully so every log line is written, then reads the access log.
    pub fn stop_and_read_log(mut self) -> Vec<LogLine> {
        self.inner.stop();
        read_log(&self.inner.dir().join("access.log"))
    }
}

/// Parses an access log written with the `counted` format.
pub fn read_log(path: &std::path::Path) -> Vec<LogLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| {
            // `$ssl_session_reused` is empty (or "-") over plain HTTP: fields before the quoted
            // request, split on whitespace.
            let (fields, request) = l.split_once('"').expect("a quoted request");
            let f: Vec<&str> = fields.split_whitespace().collect();
            LogLine {
                connection: f[0].parse().unwrap(),
                connection_requests: f[1].parse().unwrap(),
                status: f[2].parse().unwrap(),
                msec: f[3].parse().unwrap(),
                session_reused: f.get(4) == Some(&"r"),
                protocol: f.last().map_or(String::new(), |p| p.to_string()),
                request: request.trim_end_matches('"').to_string(),
            }
        })
        .collect()
}
