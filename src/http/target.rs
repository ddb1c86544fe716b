use std::net::{SocketAddr, ToSocketAddrs};

use thiserror::Error;

/// `http` or `https`; nothing else is spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// Where the load goes, as parsed from the URL. Resolving it gives [`Addresses`]; only a plan
/// holding those can reach the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// Host as written in the URL (brackets stripped for IPv6 literals).
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
    /// Value for the `Host` header (host, plus the port when it is not the scheme's default).
    pub host_header: String,
    /// The URL with any user-info removed, for reports and stored plans.
    pub redacted_url: String,
}

/// Every address a target's host resolved to: never empty, so the engine always has one to
/// connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    first: SocketAddr,
    rest: Vec<SocketAddr>,
}

impl Addresses {
    /// One address, known without a lookup.
    pub fn one(first: SocketAddr) -> Addresses {
        Addresses {
            first,
            rest: Vec::new(),
        }
    }

    /// The address connections use.
    pub fn first(&self) -> SocketAddr {
        self.first
    }

    /// All of them, the first first.
    pub fn all(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().copied())
    }
}

/// A target whose host has not been looked up (validation and fuzzing look nothing up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unresolved;

#[derive(Debug, Error)]
pub enum TargetError {
    #[error("invalid URL {url:?}: {reason}; expected e.g. http://127.0.0.1:8080/")]
    Invalid { url: String, reason: String },
    #[error("unsupported scheme {0:?} in URL; use http:// or https://")]
    Scheme(String),
    #[error("cannot resolve host {host:?}: {source}; check the name or use an IP address")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
}

impl Target {
    /// Looks the host up (no lookup for IP literals).
    pub fn resolve(&self) -> Result<Addresses, TargetError> {
        let failed = |source| TargetError::Resolve {
            host: self.host.clone(),
            source,
        };
        let mut addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(failed)?;
        let first = addrs.next().ok_or_else(|| {
            failed(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no addresses",
            ))
        })?;
        Ok(Addresses {
            first,
            rest: addrs.collect(),
        })
    }

    /// Parses `url`; nothing is looked up until [`Target::resolve`].
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let invalid = |reason: &str| TargetError::Invalid {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let parsed = url::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
        let scheme = match parsed.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(TargetError::Scheme(other.to_string())),
        };
        let host = match parsed.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err(invalid("no host")),
        };
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| invalid("no port"))?;
        if port == 0 {
            // Port 0 means "any free port" to bind(); no server listens there.
            return Err(invalid("port 0 is no server's port"));
        }
        let mut path = parsed.path().to_string();
        if path.is_empty() {
            path.push('/');
        }
        if let Some(q) = parsed.query() {
            path.push('?');
            path.push_str(q);
        }
        let host_str = parsed.host_str().unwrap_or(&host).to_string();
        let host_header = match parsed.port() {
            Some(p) => format!("{host_str}:{p}"),
            None => host_str,
        };
        let mut redacted = parsed.clone();
        if !redacted.username().is_empty() || redacted.password().is_some() {
            // Credentials never reach a report or a stored plan.
            let _ = redacted.set_username("REDACTED");
            let _ = redacted.set_password(None);
        }
        Ok(Target {
            scheme,
            host,
            port,
            path,
            host_header,
            redacted_url: redacted.to_string(),
        })
    }

    /// User-info from the URL, to send as Basic authorization.
    pub fn basic_auth(url: &str) -> Option<(String, String)> {
        let parsed = url::Url::parse(url).ok()?;
        if parsed.username().is_empty() {
            return None;
        }
        Some((
            parsed.username().to_string(),
            parsed.password().unwrap_or("").to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ipv4_with_port_and_query() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(t.scheme, Scheme::Http);
        assert_eq!(t.port, 8080);
        assert_eq!(t.path, "/a/b?x=1");
        assert_eq!(t.host_header, "127.0.0.1:8080");
    }

    #[test]
    fn parses_ipv6_and_default_ports() {
        let t = Target::parse("https://[::1]/").unwrap();
        assert_eq!(t.host, "::1");
        assert_eq!(t.port, 443);
        assert_eq!(t.host_header, "[::1]");
        assert!(t.resolve().unwrap().first().is_ipv6());
    }

    #[test]
    fn rejects_other_schemes_and_redacts_userinfo() {
        assert!(matches!(
            Target::parse("ftp://127.0.0.1/"),
            Err(TargetError::Scheme(_))
        ));
        assert!(Target::parse("not a url").is_err());
        let t = Target::parse("http://bob:secret@127.0.0.1/").unwrap();
        assert!(!t.redacted_url.contains("secret"));
        assert!(!t.redacted_url.contains("bob"));
    }
}
