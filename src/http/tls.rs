//! TLS client settings and a non-blocking rustls stream over a mio socket.

use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use thiserror::Error;

use super::handshake_witness::Witness;

#[derive(Debug, Error)]
pub enum TlsSetupError {
    #[error("no trusted root certificates found on this system; install ca-certificates or pass --insecure")]
    NoRoots,
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
    #[error("these TLS settings leave nothing to offer: {0} (see --tls-version, --tls-ciphers)")]
    Settings(String),
    #[error("--pinned-cert {0}")]
    Pinned(String),
}

/// A TLS protocol version a run may be held to (`--tls-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

impl TlsVersion {
    pub const ALL: [TlsVersion; 2] = [TlsVersion::V1_2, TlsVersion::V1_3];

    /// As users type it and results store it: "1.2", "1.3".
    pub fn number(self) -> &'static str {
        match self {
            TlsVersion::V1_2 => "1.2",
            TlsVersion::V1_3 => "1.3",
        }
    }
}

/// How a run speaks TLS beyond verifying certificates (`--tls-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// Keep sessions and resume them on new connections; off: every handshake is full.
    pub resume: bool,
    /// Only this version; None: 1.2 or 1.3, as the server prefers.
    pub version: Option<TlsVersion>,
    /// Only these cipher suites (rustls's names), in this order; empty: all.
    pub ciphers: Vec<String>,
    /// Only these key-exchange groups (rustls's names), in this order; empty: all.
    pub groups: Vec<String>,
    /// Accept exactly this certificate and no other (`--pinned-cert`), whatever its names
    /// and issuer: a self-signed one (`k8s up --tls`) verified without trusting anything else.
    pub pinned: Option<PinnedCert>,
}

/// The one certificate a run accepts, and the file it came from (for reports and the
/// reproduce line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedCert {
    pub path: String,
    pub der: Arc<[u8]>,
}

impl PinnedCert {
    /// The first certificate of a PEM text; Err says what is wrong with it.
    pub fn from_pem(path: &str, pem: &[u8]) -> Result<PinnedCert, TlsSetupError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |why: String| TlsSetupError::Pinned(format!("{path}: {why}"));
        let first = CertificateDer::pem_slice_iter(pem)
            .next()
            .ok_or_else(|| bad("no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into()))?
            .map_err(|e| bad(format!("not a PEM certificate: {e:?}")))?;
        Ok(PinnedCert {
            path: path.to_string(),
            der: Arc::from(first.as_ref()),
        })
    }
}

impl Default for TlsOptions {
    /// What a browser does: sessions resumed, every version, suite and group offered.
    fn default() -> TlsOptions {
        TlsOptions {
            resume: true,
            version: None,
            ciphers: Vec::new(),
            groups: Vec::new(),
            pinned: None,
        }
    }
}

impl TlsOptions {
    /// What ab and wrk do, and so their front ends: no session kept, a full handshake per
    /// connection.
    pub fn full_handshakes() -> TlsOptions {
        TlsOptions {
            resume: false,
            ..TlsOptions::default()
        }
    }
}

/// The provider's items named in `names`, in that order; all of them when none is named.
fn chosen<T: Copy>(all: &[T], names: &[String], name: impl Fn(&T) -> String) -> Vec<T> {
    if names.is_empty() {
        return all.to_vec();
    }
    names
        .iter()
        .filter_map(|n| all.iter().find(|x| name(x) == *n).copied())
        .collect()
}

/// Builds the client configuration once per run. `insecure` accepts any certificate (handshake
/// signatures are still checked).
/// `alpn`: the application protocols offered, in order of preference.
pub fn client_config(
    insecure: bool,
    options: &TlsOptions,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = chosen(&provider.cipher_suites, &options.ciphers, |c| {
        format!("{:?}", c.suite())
    });
    provider.kx_groups = chosen(&provider.kx_groups, &options.groups, |g| {
        format!("{:?}", g.name())
    });
    let provider = Arc::new(provider);
    let versions: &[&'static rustls::SupportedProtocolVersion] = match options.version {
        None => rustls::DEFAULT_VERSIONS,
        Some(TlsVersion::V1_2) => &[&rustls::version::TLS12],
        Some(TlsVersion::V1_3) => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| TlsSetupError::Settings(e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> = if insecure || options.pinned.is_some() {
        Arc::new(AcceptCertificate {
            provider: provider.clone(),
            pinned: options.pinned.as_ref().map(|p| p.der.clone()),
        })
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        for cert in found.certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(TlsSetupError::NoRoots);
        }
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| TlsSetupError::Settings(e.to_string()))?
    };
    // Witnessed, so that a QUIC connection's handshake can be told full or resumed.
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Witness { inner: verifier }))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    if !options.resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(config))
}

pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsSetupError> {
    ServerName::try_from(host.to_string()).map_err(|_| TlsSetupError::ServerName(host.to_string()))
}

/// Which of the offered application protocols the server chooses: one handshake on a
/// blocking connection before the run (a server chooses the same for every connection, and
/// the run's workers each speak one protocol). None when the handshake fails (the run's own
/// handshakes then fail and are counted) or the server chose none.
pub fn probe_alpn(
    addr: std::net::SocketAddr,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    timeout: std::time::Duration,
) -> Option<Vec<u8>> {
    let mut sock = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
    sock.set_read_timeout(Some(timeout)).ok()?;
    sock.set_write_timeout(Some(timeout)).ok()?;
    let mut conn = ClientConnection::new(config, name).ok()?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).ok()?;
    }
    conn.alpn_protocol().map(<[u8]>::to_vec)
}

/// The TLS error an I/O error carries, if it came from TLS (handshake, certificate, alert)
/// rather than from the socket.
pub fn tls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// A rustls client session driven over a non-blocking socket.
pub struct TlsStream {
    pub sock: TcpStream,
    conn: ClientConnection,
    /// When the handshake was seen complete (after the records that completed it), until
    /// [`TlsStream::handshake_done`] hands it over.
    established: Option<std::time::Instant>,
}

/// What a handshake negotiated, as rustls names it.
pub struct Negotiated {
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub group: Option<String>,
    /// The application protocol the server chose by ALPN.
    pub alpn: Option<String>,
}

impl TlsStream {
    pub fn new(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<TlsStream> {
        let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            conn,
            established: None,
        })
    }

    /// Once per connection, when its handshake has completed: whether it resumed a session,
    /// and when it was established.
    pub fn handshake_done(&mut self) -> Option<(bool, std::time::Instant)> {
        let at = self.established.take()?;
        Some((
            self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            at,
        ))
    }

    pub fn negotiated(&self) -> Negotiated {
        Negotiated {
            // rustls spells TLSv1_3; users read TLSv1.3.
            version: self
                .conn
                .protocol_version()
                .map(|v| format!("{v:?}").replace('_', ".")),
            cipher: self
                .conn
                .negotiated_cipher_suite()
                .map(|c| format!("{:?}", c.suite())),
            group: self
                .conn
                .negotiated_key_exchange_group()
                .map(|g| format!("{:?}", g.name())),
            alpn: self.alpn().map(|p| String::from_utf8_lossy(p).into_owned()),
        }
    }

    /// The application protocol the server chose by ALPN (once the handshake is done).
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Sends whatever TLS records are pending; stops quietly at WouldBlock (the socket's next
    /// writable event calls this again).
    pub fn flush_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether the handshake is still going on (plaintext written so far is held).
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.flush_pending()?;
        Ok(n)
    }

    /// Reads plaintext. Returns WouldBlock only when the socket itself has nothing more.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Peer closed without close_notify: treat as end of stream, the framing
                // decides whether the response was complete.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    let handshaking = self.conn.is_handshaking();
                    self.conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    if handshaking && !self.conn.is_handshaking() {
                        self.established = Some(std::time::Instant::now());
                    }
                    self.flush_pending()?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// `--insecure`: accept every certificate; `--pinned-cert`: exactly that one (its names,
/// issuer and dates do not matter: it is the one the user holds). Handshake signatures are
/// checked either way, so the server holds the certificate's key.
#[derive(Debug)]
struct AcceptCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
    pinned: Option<Arc<[u8]>>,
}

impl ServerCertVerifier for AcceptCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pinned {
            Some(der) if der.as_ref() != end_entity.as_ref() => {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
