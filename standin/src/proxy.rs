//! `pods/NAME[:PORT]/proxy/PATH` and `services/NAME[:PORT]/proxy/PATH`: the API server's
//! proxy to a pod (issue 10's controller reaches its workers this way, with no extra RBAC in
//! the pods). The request is forwarded over HTTP/1.1 to podIP:port (a Service: one Ready
//! endpoint), without the client's Authorization header; the answer comes back as it is.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::reply::Resp;
use crate::resources;
use crate::route::Target;
use crate::state::Shared;

/// Largest proxied answer kept (worker results are far smaller).
const RESPONSE_LIMIT: usize = 256 << 20;

fn unavailable(msg: String) -> ApiError {
    ApiError::new(503, "ServiceUnavailable", msg)
}

/// `name`, `name:port` or `scheme:name:port`.
fn split(spec: &str) -> (String, Option<String>) {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        [n] => (n.to_string(), None),
        [s, n, p] if *s == "http" || *s == "https" => (n.to_string(), Some(p.to_string())),
        [n, p] => (n.to_string(), Some(p.to_string())),
        _ => (spec.to_string(), None),
    }
}

fn pod_port(pod: &Value, port: Option<&str>) -> Option<u16> {
    let ports: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    match port {
        Some(p) => p.parse().ok().or_else(|| {
            ports
                .iter()
                .find(|x| x["name"] == p)?
                .get("containerPort")?
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
        }),
        None => ports
            .first()
            .and_then(|p| p.get("containerPort")?.as_u64())
            .and_then(|n| u16::try_from(n).ok())
            .or(Some(80)),
    }
}

/// The backend address of a pod or service proxy request.
fn backend(sh: &Shared, t: &Target, spec: &str) -> ApiResult<(String, u16)> {
    let ns = t.ns.as_deref().unwrap_or_default();
    let (name, port) = split(spec);
    if t.res.is(&resources::PODS) {
        let pod = sh
            .store
            .get(&resources::PODS, ns, &name)
            .ok_or_else(|| ApiError::not_found(&resources::PODS, &name))?;
        let ip = pod
            .pointer("/status/podIP")
            .and_then(Value::as_str)
            .ok_or_else(|| unavailable(format!("pod {name} has no IP address yet")))?;
        let p = pod_port(&pod, port.as_deref())
            .ok_or_else(|| ApiError::bad_request(format!("no port {port:?} on pod {name}")))?;
        return Ok((ip.to_string(), p));
    }
    let svc = sh
        .store
        .get(&resources::SERVICES, ns, &name)
        .ok_or_else(|| ApiError::not_found(&resources::SERVICES, &name))?;
    let sp = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| {
                    port.as_deref().is_none_or(|want| {
                        p["name"] == want || want.parse::<u64>().ok() == p["port"].as_u64()
                    })
                })
                .cloned()
        })
        .ok_or_else(|| unavailable(format!("no service port {port:?} on service {name}")))?;
    let ep = sh
        .store
        .get(&resources::ENDPOINTS, ns, &name)
        .and_then(|e| {
            let ip = e
                .pointer("/subsets/0/addresses/0/ip")?
                .as_str()?
                .to_string();
            let port = e
                .pointer("/subsets/0/ports")?
                .as_array()?
                .iter()
                .find(|p| p.get("name") == sp.get("name"))?
                .get("port")?
                .as_u64()?;
            Some((ip, u16::try_from(port).ok()?))
        })
        .ok_or_else(|| unavailable(format!("no endpoints available for service \"{name}\"")))?;
    Ok(ep)
}

pub async fn handle(
    sh: Arc<Shared>,
    req: Request<Incoming>,
    t: &Target,
    spec: &str,
) -> ApiResult<Resp> {
    let (ip, port) = backend(&sh, t, spec)?;
    let path = format!(
        "/{}{}",
        t.rest,
        req.uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default()
    );
    let stream = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect((ip.as_str(), port)),
    )
    .await
    .map_err(|_| {
        unavailable(format!(
            "error trying to reach service: dial tcp {ip}:{port}: i/o timeout"
        ))
    })?
    .map_err(|e| {
        unavailable(format!(
            "error trying to reach service: dial tcp {ip}:{port}: {e}"
        ))
    })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unavailable(format!("error trying to reach service: {e}")))?;
    tokio::spawn(conn);
    let (mut parts, body) = req.into_parts();
    parts.uri = path
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid proxy path {path:?}")))?;
    for h in [
        header::AUTHORIZATION,
        header::CONNECTION,
        header::UPGRADE,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
    ] {
        parts.headers.remove(h);
    }
    parts.headers.insert(
        header::HOST,
        header::HeaderValue::from_str(&format!("{ip}:{port}"))
            .unwrap_or(header::HeaderValue::from_static("localhost")),
    );
    let resp = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|e| unavailable(format!("error trying to reach service: {e}")))?;
    let (mut parts, body) = resp.into_parts();
    let bytes: Bytes = Limited::new(body, RESPONSE_LIMIT)
        .collect()
        .await
        .map_err(|e| unavailable(format!("error reading from service: {e}")))?
        .to_bytes();
    for h in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
    ] {
        parts.headers.remove(h);
    }
    let mut r = Response::from_parts(parts, BodyExt::boxed(Full::new(bytes)));
    if r.status() == StatusCode::SWITCHING_PROTOCOLS {
        *r.status_mut() = StatusCode::BAD_GATEWAY;
    }
    Ok(r)
}
