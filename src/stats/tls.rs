//! What the TLS of a run did: handshakes full and resumed, what was negotiated, and why
//! handshakes failed — the figures a user measuring TLS cost needs to read the rest.

use serde::{Deserialize, Serialize};

use super::LatencySummary;

/// The cipher suites the client speaks: rustls's name, OpenSSL's (ab prints it; users type
/// it), and the key bits.
pub const CIPHER_SUITES: [(&str, &str, u32); 9] = [
    ("TLS13_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", 256),
    ("TLS13_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", 128),
    (
        "TLS13_CHACHA20_POLY1305_SHA256",
        "TLS_CHACHA20_POLY1305_SHA256",
        256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        128,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        128,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305",
        256,
    ),
];

/// The key-exchange groups the client speaks: rustls's name, the names users type for it,
/// and how ab prints the server's temporary key of that group.
pub const KX_GROUPS: [(&str, &[&str], &str); 3] = [
    ("X25519", &["x25519"], "X25519 253 bits"),
    (
        "secp256r1",
        &["p-256", "p256", "prime256v1", "secp256r1"],
        "ECDH P-256 256 bits",
    ),
    (
        "secp384r1",
        &["p-384", "p384", "secp384r1"],
        "ECDH P-384 384 bits",
    ),
];

/// Why a TLS handshake failed, by what the user can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsFailure {
    /// The certificate chains to no trusted root (self-signed, a private CA).
    UntrustedCertificate,
    /// The certificate is not issued for the host name asked for.
    NameMismatch,
    /// Expired or not yet valid.
    CertificateDates,
    /// A CA certificate served as the server's own (`openssl req -x509` makes them so by
    /// default): refused whether trusted or not.
    CaAsServerCertificate,
    /// Any other problem with the certificate (revoked, bad encoding, bad signature).
    BadCertificate,
    /// Not the certificate `--pinned-cert` names.
    NotPinned,
    /// The server ended the handshake with an alert.
    ServerAlert,
    /// No protocol version, cipher suite or key-exchange group in common.
    NothingInCommon,
    /// The server accepts none of the application protocols offered by ALPN (or, offered
    /// h2 alone, chose another).
    AlpnRefused,
    /// Anything else TLS refused.
    Other,
}

impl TlsFailure {
    /// What to do about it, said once after the first such failure.
    pub fn advice(self) -> &'static str {
        match self {
            TlsFailure::UntrustedCertificate => {
                "the server's certificate is not signed by a trusted root (self-signed?); --pinned-cert FILE trusts that one certificate, -k/--insecure skips verification"
            }
            TlsFailure::CaAsServerCertificate => {
                "the server's certificate is a CA certificate (CA:TRUE, as `openssl req -x509` makes by default), which no verifier takes as a server's own, trusted or not: --pinned-cert FILE accepts it, or make it with `-addext basicConstraints=critical,CA:FALSE`; -k/--insecure skips verification"
            }
            TlsFailure::NameMismatch => {
                "the server's certificate is not issued for this host name; use the name it names, or -k/--insecure"
            }
            TlsFailure::CertificateDates => {
                "the server's certificate has expired or is not valid yet (is the clock right?); -k/--insecure skips verification"
            }
            TlsFailure::BadCertificate => {
                "the server's certificate was refused; -k/--insecure skips verification"
            }
            TlsFailure::NotPinned => {
                "the server presented another certificate than the one --pinned-cert names (a new one, or another server?)"
            }
            TlsFailure::ServerAlert => {
                "the server refused the handshake with an alert (see its error log)"
            }
            TlsFailure::NothingInCommon => {
                "the server accepts no TLS version, cipher suite or group this client offered (see --tls-version)"
            }
            TlsFailure::AlpnRefused => {
                "the server accepts none of the protocols offered by ALPN (h2 with --http2, else http/1.1): turn HTTP/2 on for its listener, drop --http2, or let it choose with --alpn h2,http/1.1"
            }
            TlsFailure::Other => "the TLS handshake or a record failed",
        }
    }
}

/// Failed handshakes of one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFailureCount {
    pub reason: TlsFailure,
    pub count: u64,
}

/// A run's TLS, counted as it goes (in the recorder) and as stored (in the result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsFigures {
    /// Handshakes that exchanged keys in full.
    pub full_handshakes: u64,
    /// Handshakes that resumed an earlier session (tickets or ids): far cheaper for both sides.
    pub resumed_handshakes: u64,
    /// What the first handshake negotiated (later ones of a run negotiate the same).
    pub version: Option<String>,
    pub cipher: Option<String>,
    /// The key-exchange group (X25519, secp256r1, …), when the version names one.
    pub group: Option<String>,
    /// The application protocol the server chose by ALPN (`h2`, `http/1.1`), if it chose one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// Each handshake's time from TCP connected to TLS established (µs); absent in a
    /// recording, filled in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<LatencySummary>,
    /// Handshakes per second of the run (full and resumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes_per_s: Option<f64>,
    /// Failed handshakes (and records) by reason.
    #[serde(default)]
    pub failures: Vec<TlsFailureCount>,
    /// The first failure as the TLS library put it.
    #[serde(default)]
    pub first_failure: Option<String>,
}

impl TlsFigures {
    /// One completed handshake.
    pub fn handshake(&mut self, resumed: bool) {
        if resumed {
            self.resumed_handshakes += 1;
        } else {
            self.full_handshakes += 1;
        }
    }

    /// Handshakes done, full and resumed.
    pub fn handshakes(&self) -> u64 {
        self.full_handshakes + self.resumed_handshakes
    }

    /// Whether a handshake's negotiation (`full`: not resumed) should be named: the first
    /// one's, and a full one's while none has named a group (a resumed TLS 1.2 handshake
    /// exchanges no key, so names none).
    pub fn wants_negotiated(&self, full: bool) -> bool {
        self.version.is_none() || (self.group.is_none() && full)
    }

    /// One failure, and its message when it is the first.
    pub fn failed(&mut self, reason: TlsFailure, message: impl FnOnce() -> String) {
        match self.failures.iter_mut().find(|f| f.reason == reason) {
            Some(f) => f.count += 1,
            None => self.failures.push(TlsFailureCount { reason, count: 1 }),
        }
        if self.first_failure.is_none() {
            self.first_failure = Some(message());
        }
    }

    /// Another recording's TLS added to this one.
    pub fn add(&mut self, other: &TlsFigures) {
        self.full_handshakes += other.full_handshakes;
        self.resumed_handshakes += other.resumed_handshakes;
        if self.wants_negotiated(other.group.is_some()) {
            self.version.clone_from(&other.version);
            self.cipher.clone_from(&other.cipher);
            self.group.clone_from(&other.group);
        }
        if self.alpn.is_none() {
            self.alpn.clone_from(&other.alpn);
        }
        for f in &other.failures {
            match self.failures.iter_mut().find(|m| m.reason == f.reason) {
                Some(m) => m.count += f.count,
                None => self.failures.push(f.clone()),
            }
        }
        if self.first_failure.is_none() {
            self.first_failure.clone_from(&other.first_failure);
        }
    }

    /// The most frequent reason of failure, if any failed.
    pub fn main_failure(&self) -> Option<&TlsFailureCount> {
        self.failures.iter().max_by_key(|f| f.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_add_up_and_keep_the_first_of_each() {
        let mut a = TlsFigures::default();
        a.handshake(false);
        a.handshake(true);
        a.failed(TlsFailure::UntrustedCertificate, || "first".into());
        a.failed(TlsFailure::UntrustedCertificate, || "second".into());
        let mut b = TlsFigures {
            version: Some("TLSv1_3".into()),
            ..TlsFigures::default()
        };
        b.handshake(true);
        b.failed(TlsFailure::ServerAlert, || "alert".into());
        a.add(&b);
        assert_eq!((a.full_handshakes, a.resumed_handshakes), (1, 2));
        assert_eq!(a.version.as_deref(), Some("TLSv1_3"));
        assert_eq!(a.first_failure.as_deref(), Some("first"));
        assert_eq!(
            a.main_failure().map(|f| (f.reason, f.count)),
            Some((TlsFailure::UntrustedCertificate, 2))
        );
        assert_eq!(a.failures.len(), 2);
    }
}
