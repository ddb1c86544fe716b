//! `k8s curl`: single requests through a service, showing what came back and which pod
//! answered (the tuned configuration's JSON names its `$hostname`, the pod's name), and for
//! the multi-arch service how the answers split across architectures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::K8sError;

/// One request's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub status: u16,
    pub elapsed: Duration,
    pub body: Vec<u8>,
    /// The `server` field of a JSON body (the tuned configuration's `$hostname`).
    pub answered_by: Option<String>,
}

impl Fetched {
    /// The body for people: pretty-printed when it is JSON.
    pub fn body_text(&self) -> String {
        match serde_json::from_slice::<serde_json::Value>(&self.body) {
            Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
            Err(_) => String::from_utf8_lossy(&self.body).into_owned(),
        }
    }
}

/// GET `path` from `addr` (host:port) on a new connection, to the end of the response.
pub async fn fetch(addr: &str, path: &str, timeout: Duration) -> Result<Fetched, K8sError> {
    let fail = |message: String| K8sError::Failed {
        what: format!("GET http://{addr}{path}"),
        message,
    };
    let started = Instant::now();
    let io = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: archbench/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        conn.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(timeout, io)
        .await
        .map_err(|_| {
            fail(format!(
                "no complete response within {} s",
                timeout.as_secs()
            ))
        })?
        .map_err(|e| K8sError::Io {
            what: format!("GET http://{addr}{path}"),
            source: e,
        })?;
    let elapsed = started.elapsed();
    let (status, body) = split_response(&raw).map_err(fail)?;
    let answered_by = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["server"].as_str().map(str::to_string));
    Ok(Fetched {
        status,
        elapsed,
        body,
        answered_by,
    })
}

/// Status and de-chunked body of a whole response read to the end of the connection.
fn split_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the response ended inside its head".into()),
        Err(e) => return Err(format!("not an HTTP response: {e}")),
    };
    let status = resp.code.unwrap_or(0);
    let chunked = resp.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value)
                .to_ascii_lowercase()
                .trim_end()
                .ends_with("chunked")
    });
    let rest = &raw[head_len..];
    if !chunked {
        return Ok((status, rest.to_vec()));
    }
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = rest[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size without its line end")?;
        let size_text = String::from_utf8_lossy(&rest[at..at + line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        at += line_end + 2;
        if size == 0 {
            return Ok((status, body));
        }
        let chunk = rest.get(at..at + size).ok_or("a chunk cut short")?;
        body.extend_from_slice(chunk);
        at += size + 2;
    }
}

/// How many answers came from each pod, and from each architecture.
pub fn split(answers: &[Fetched], arch_of: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for a in answers {
        let key = match &a.answered_by {
            Some(pod) => arch_of
                .get(pod)
                .cloned()
                .unwrap_or_else(|| format!("unknown pod {pod}")),
            None => "unnamed (the body does not name its pod)".into(),
        };
        *by.entry(key).or_insert(0) += 1;
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_and_chunked_bodies() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(split_response(plain).unwrap(), (200, b"hello".to_vec()));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n";
        assert_eq!(split_response(chunked).unwrap(), (200, b"hello".to_vec()));
        assert!(split_response(b"HTTP/1.1 200").is_err());
    }

    #[test]
    fn splits_answers_by_architecture() {
        let answer = |pod: Option<&str>| Fetched {
            status: 200,
            elapsed: Duration::ZERO,
            body: Vec::new(),
            answered_by: pod.map(str::to_string),
        };
        let arch_of = BTreeMap::from([
            ("nginx-arm-1".to_string(), "arm".to_string()),
            ("nginx-intel-1".to_string(), "intel".to_string()),
        ]);
        let by = split(
            &[
                answer(Some("nginx-arm-1")),
                answer(Some("nginx-intel-1")),
                answer(Some("nginx-arm-1")),
                answer(None),
            ],
            &arch_of,
        );
        assert_eq!(by["arm"], 2);
        assert_eq!(by["intel"], 1);
        assert_eq!(by.len(), 3);
    }
}
