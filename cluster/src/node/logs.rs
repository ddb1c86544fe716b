//! The kubelet's `/containerLogs/NS/POD/CONTAINER` (what `pods/log` proxies to): a
//! container's current (or `previous`) run, with tailLines, limitBytes,
//! sinceSeconds/sinceTime, timestamps, and `follow` (the body streams new lines until that run
//! ends or the client goes away).

use std::convert::Infallible;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;

use super::clock;
use super::logfile::{self, Read};
use super::reply::{error, text, Query, Resp};
use super::Agent;

pub fn handle(agent: &Agent, ns: &str, name: &str, container: &str, q: &Query) -> Resp {
    match answer(agent, ns, name, container, q) {
        Ok(r) => r,
        Err((code, message)) => error(code, message),
    }
}

/// A chunked body fed by a channel; the producer sees the send fail once the client is gone.
fn streaming() -> (mpsc::Sender<Bytes>, Resp) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        let b = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = http::Response::new(BodyExt::boxed(StreamBody::new(stream)));
    if let Ok(v) = http::HeaderValue::from_str("text/plain") {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    (tx, r)
}

/// What the query asks of the log (`sinceSeconds`/`sinceTime`, `tailLines`, `limitBytes`,
/// `timestamps`); Err is the 400 message.
fn read_options(q: &Query) -> Result<Read, String> {
    let since = match (q.int("sinceSeconds")?, q.get("sinceTime")) {
        (Some(s), _) => Some(
            SystemTime::now()
                .checked_sub(Duration::from_secs(s.max(0) as u64))
                .unwrap_or(std::time::UNIX_EPOCH),
        ),
        (None, Some(t)) => Some(clock::parse(t).ok_or_else(|| format!("invalid sinceTime {t:?}"))?),
        (None, None) => None,
    };
    Ok(Read {
        tail_lines: q.int("tailLines")?.map(|n| n.max(0) as usize),
        limit_bytes: q.int("limitBytes")?.map(|n| n.max(0) as usize),
        since,
        timestamps: q.flag("timestamps"),
    })
}

fn answer(
    agent: &Agent,
    ns: &str,
    name: &str,
    container: &str,
    q: &Query,
) -> Result<Resp, (StatusCode, String)> {
    let bad = |m: String| (StatusCode::BAD_REQUEST, m);
    let opts = read_options(q).map_err(bad)?;
    let previous = q.flag("previous");
    let rt = agent.find(ns, name).ok_or_else(|| {
        bad(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        ))
    })?;
    let (path, live) = rt.log_path(container, previous).map_err(bad)?;
    let data = std::fs::read(&path).unwrap_or_default();
    if !q.flag("follow") || !live {
        return Ok(text(
            StatusCode::OK,
            "text/plain",
            logfile::render(&data, &opts),
        ));
    }
    let run: u32 = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (tx, resp) = streaming();
    let first = logfile::render(&data, &opts);
    let mut offset = data.len();
    let mut limit_left = opts.limit_bytes;
    let mut stop = agent.shutdown.subscribe();
    let container = container.to_string();
    tokio::spawn(async move {
        if let Some(b) = cap(first, &mut limit_left) {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let line_opts = Read {
            tail_lines: None,
            limit_bytes: None,
            ..opts
        };
        loop {
            if limit_left == Some(0) {
                return;
            }
            let still = rt.run_is_live(&container, run);
            let data = std::fs::read(&path).unwrap_or_default();
            if data.len() > offset {
                // only complete records; a partial write waits for the next round
                let end = data[offset..]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map(|i| offset + i + 1);
                if let Some(end) = end {
                    let chunk = logfile::render(&data[offset..end], &line_opts);
                    offset = end;
                    if let Some(b) = cap(chunk, &mut limit_left) {
                        if tx.send(b).await.is_err() {
                            return;
                        }
                    }
                }
            }
            if !still {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = tx.closed() => return,
                _ = stop.changed() => return,
            }
        }
    });
    Ok(resp)
}
/// What may still be sent under `limitBytes` (None: no limit); None when nothing is left.
fn cap(b: Vec<u8>, left: &mut Option<usize>) -> Option<Bytes> {
    let b = match left.as_mut() {
        Some(left) => {
            let n = b.len().min(*left);
            *left -= n;
            b[..n].to_vec()
        }
        None => b,
    };
    (!b.is_empty()).then(|| Bytes::from(b))
}
