use std::net::{SocketAddr, ToSocketAddrs};

use thiserror::Error;

/// `http` or `https`; nothing else is spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// Where the load goes: parsed and resolved once, before any worker starts.
#[derive(Debug, Clone)]
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
    /// Every address the host resolved to; connections use the first.
    pub addrs: Vec<SocketAddr>,
}

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
    /// Parses and resolves `url`. Resolution happens here so a bad name fails before the run.
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        Target::parse_unresolved(url)?.resolve()
    }

    /// Looks the host up (no lookup for IP literals).
    pub fn resolve(mut self) -> Result<Target, TargetError> {
        let addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|source| TargetError::Resolve {
                host: self.host.clone(),
                source,
            })?
            .collect();
        if addrs.is_empty() {
            return Err(TargetError::Resolve {
                host: self.host.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses"),
            });
        }
        self.addrs = addrs;
        Ok(self)
    }

    /// Parses `url` without looking the host up (`addrs` stays empty): for validation and
    /// fuzzing, where no lookup may leave the machine.
    pub fn parse_unresolved(url: &str) -> Result<Target, TargetError> {
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
            addrs: Vec::new(),
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
        assert!(t.addrs[0].is_ipv6());
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
