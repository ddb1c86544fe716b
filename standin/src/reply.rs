//! Response builders and request helpers shared by the routes.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::ApiError;

pub type Body = BoxBody<Bytes, Infallible>;
pub type Resp = Response<Body>;

/// Media type of Table answers.
pub const TABLE_CT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// Media type of aggregated discovery answers.
pub const DISCOVERY_CT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn bytes(code: u16, content_type: &str, b: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(BodyExt::boxed(Full::new(b.into())));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// JSON on one line (watch and list bodies are never pretty-printed).
pub fn json(code: u16, v: &Value) -> Resp {
    json_as(code, v, "application/json")
}

pub fn json_as(code: u16, v: &Value, content_type: &str) -> Resp {
    bytes(
        code,
        content_type,
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

pub fn error(e: &ApiError) -> Resp {
    json(e.code, &e.status())
}

/// A chunked body fed by a channel; the producer sees the send fail once the client is gone.
pub fn streaming(code: u16, content_type: &str) -> (mpsc::Sender<Bytes>, Resp) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        let b = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    (tx, r)
}

/// Query parameters, in order. kube sends `?&a=b`: empty pairs are skipped.
#[derive(Debug, Default, Clone)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        Query(
            url::form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, k: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(a, _)| a == k)
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }

    pub fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        match self.get(k) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid {k}: {v:?} is not an integer"))
            }),
        }
    }
}
