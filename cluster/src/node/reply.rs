//! The kubelet API's answers and queries: what every route of `server` and its handlers
//! (exec, attach, port-forward, logs, metrics) write and read, below all of them.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};

pub type Body = BoxBody<Bytes, Infallible>;

pub type Resp = Response<Body>;

pub fn text(code: StatusCode, content_type: &str, b: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(BodyExt::boxed(Full::new(b.into())));
    *r.status_mut() = code;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

/// An error as the kubelet answers it (plain text; the API server relays it).
pub fn error(code: StatusCode, message: impl Into<String>) -> Resp {
    text(code, "text/plain; charset=utf-8", message.into())
}

/// The query of a request: repeated keys kept in order (`command=sh&command=-c`).
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        Query(
            url::form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `1`, `true` (any case) are set; absent, `0`, `false` are not.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }

    /// An integer parameter; Err is the 400 message.
    pub fn int(&self, key: &str) -> std::result::Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("invalid {key}: {v:?}")),
        }
    }
}
