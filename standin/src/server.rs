//! The HTTP/1.1 accept loop (with upgrades, for exec) and the request log tests read.

use std::convert::Infallible;
use std::sync::Arc;

use http::{header, Request};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::route;
use crate::state::{RecordedRequest, Shared};

/// Serves until the cluster stops.
pub async fn serve(sh: Arc<Shared>, listener: TcpListener) {
    let mut stop = sh.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let sh = sh.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let sh = sh.clone();
                async move { Ok::<_, Infallible>(answer(sh, req).await) }
            });
            // errors here are clients going away mid-request; nothing to report
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}

async fn answer(sh: Arc<Shared>, req: Request<Incoming>) -> crate::reply::Resp {
    let h = |n: header::HeaderName| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut rec = RecordedRequest {
        method: req.method().to_string(),
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.to_string()),
        accept: h(header::ACCEPT),
        content_type: h(header::CONTENT_TYPE),
        authorization: h(header::AUTHORIZATION),
        user_agent: h(header::USER_AGENT),
        status: 0,
    };
    let resp = route::handle(sh.clone(), req).await;
    rec.status = resp.status().as_u16();
    sh.record(rec);
    resp
}
