use base64::Engine as _;

use super::Target;

/// The protocol version written on the request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HttpVersion {
    #[serde(rename = "HTTP/1.0")]
    Http10,
    #[serde(rename = "HTTP/1.1")]
    Http11,
}

impl HttpVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Http10 => "HTTP/1.0",
            HttpVersion::Http11 => "HTTP/1.1",
        }
    }
}

/// The headers a request carries unasked, after Host: each front end sends what the tool it
/// stands in for sends, so the server does the same work for both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultHeaders {
    /// `User-Agent: <agent>` and `Accept: */*`, as archbench, curl and ab send.
    AgentAndAccept(String),
    /// `User-Agent: <agent>` alone, as h2load sends.
    AgentOnly(String),
    /// Nothing beyond Host, as wrk sends.
    HostOnly,
}

impl DefaultHeaders {
    /// The User-Agent sent unless the user gives one.
    pub fn agent(&self) -> Option<&str> {
        match self {
            DefaultHeaders::AgentAndAccept(a) | DefaultHeaders::AgentOnly(a) => Some(a),
            DefaultHeaders::HostOnly => None,
        }
    }

    /// Whether `Accept: */*` is sent unless the user gives an Accept.
    pub fn accept(&self) -> bool {
        matches!(self, DefaultHeaders::AgentAndAccept(_))
    }
}

/// Whether `name` may be sent as a header field name: an RFC 9110 token (section 5.1), one or
/// more of ALPHA / DIGIT / `!#$%&'*+-.^_`|~`. Anything else (a space, a parenthesis, a
/// non-ASCII byte) a server refuses or, worse, reads as something else than was meant.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `value` may be sent as a header field value (RFC 9110 section 5.5): visible
/// characters, spaces and tabs, no other control character. CR, LF or NUL would end the
/// header, or the request, where the user did not mean it to; the other controls (an escape
/// pasted from a terminal, a DEL) are no field value, and a server refuses the request or
/// reads it as something else than was meant.
pub fn is_header_value(value: &str) -> bool {
    !value.bytes().any(|b| b.is_ascii_control() && b != b'\t')
}

/// What to send, before encoding. A run encodes it once and repeats the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: String,
    /// Extra headers in the order given; they replace our defaults of the same name.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub version: HttpVersion,
    pub keepalive: bool,
    pub defaults: DefaultHeaders,
}

impl RequestSpec {
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// The exact bytes every request of the run carries.
    pub fn encode(&self, target: &Target, basic_auth: Option<(String, String)>) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.body.len());
        let mut line = |s: &str| {
            out.extend_from_slice(s.as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        line(&format!(
            "{} {} {}",
            self.method,
            target.path,
            self.version.as_str()
        ));
        if !self.has_header("host") {
            line(&format!("Host: {}", target.host_header));
        }
        if let Some(agent) = self.defaults.agent() {
            if !self.has_header("user-agent") {
                line(&format!("User-Agent: {agent}"));
            }
        }
        if self.defaults.accept() && !self.has_header("accept") {
            line("Accept: */*");
        }
        if let Some((user, pass)) = basic_auth {
            if !self.has_header("authorization") {
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
                line(&format!("Authorization: Basic {token}"));
            }
        }
        if !self.has_header("connection") {
            match (self.version, self.keepalive) {
                (HttpVersion::Http11, false) => line("Connection: close"),
                (HttpVersion::Http10, true) => line("Connection: Keep-Alive"),
                _ => {}
            }
        }
        let sends_body = !self.body.is_empty()
            || ["POST", "PUT", "PATCH"]
                .iter()
                .any(|m| self.method.eq_ignore_ascii_case(m));
        if sends_body && !self.has_header("content-length") {
            line(&format!("Content-Length: {}", self.body.len()));
        }
        for (name, value) in &self.headers {
            line(&format!("{name}: {value}"));
        }
        line("");
        out.extend_from_slice(&self.body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RequestSpec {
        RequestSpec {
            method: "GET".into(),
            headers: vec![],
            body: vec![],
            version: HttpVersion::Http11,
            keepalive: true,
            defaults: DefaultHeaders::AgentAndAccept("archbench/test".into()),
        }
    }

    #[test]
    fn encodes_get_with_defaults() {
        let t = Target::parse("http://127.0.0.1:8080/x").unwrap();
        let bytes = spec().encode(&t, None);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: archbench/test\r\nAccept: */*\r\n\r\n"
        );
    }

    #[test]
    fn user_headers_replace_defaults_and_body_gets_length() {
        let t = Target::parse("http://127.0.0.1/").unwrap();
        let mut s = spec();
        s.method = "POST".into();
        s.body = b"hello".to_vec();
        s.keepalive = false;
        s.headers = vec![("Host".into(), "example".into())];
        let text = String::from_utf8(s.encode(&t, None)).unwrap();
        assert!(text.contains("Host: example\r\n"));
        assert!(!text.contains("Host: 127.0.0.1"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("Content-Length: 5\r\nHost: example\r\n\r\nhello"));
    }
}
