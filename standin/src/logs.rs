//! `pods/log`: a container's current (or `previous`) run, with tailLines, limitBytes,
//! sinceSeconds/sinceTime, timestamps, and `follow` (the body streams new lines until that run
//! ends or the client goes away).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::Value;

use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::kubelet::logfile::{self, Read};
use crate::reply::{self, Query, Resp};
use crate::resources;
use crate::state::Shared;

pub fn handle(sh: &Arc<Shared>, ns: &str, name: &str, q: &Query) -> ApiResult<Resp> {
    let pod = sh
        .store
        .get(&resources::PODS, ns, name)
        .ok_or_else(|| ApiError::not_found(&resources::PODS, name))?;
    let containers: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let container = match q.get("container") {
        Some(c) if !containers.iter().any(|x| x == c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        Some(c) => c.to_string(),
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )))
        }
    };
    let since = match (q.int("sinceSeconds")?, q.get("sinceTime")) {
        (Some(s), _) => Some(SystemTime::now() - Duration::from_secs(s.max(0) as u64)),
        (None, Some(t)) => Some(
            clock::parse(t)
                .ok_or_else(|| ApiError::bad_request(format!("invalid sinceTime {t:?}")))?,
        ),
        (None, None) => None,
    };
    let opts = Read {
        tail_lines: q.int("tailLines")?.map(|n| n.max(0) as usize),
        limit_bytes: q.int("limitBytes")?.map(|n| n.max(0) as usize),
        since,
        timestamps: q.flag("timestamps"),
    };
    let previous = q.flag("previous");
    let unscheduled = || {
        ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        ))
    };
    let rt = sh.kubelet.find(ns, name).ok_or_else(unscheduled)?;
    let (path, live) = rt.log_path(Some(&container), previous)?;
    let data = std::fs::read(&path).unwrap_or_default();
    if !q.flag("follow") || !live {
        return Ok(reply::bytes(
            200,
            "text/plain",
            logfile::render(&data, &opts),
        ));
    }
    let run: u32 = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (tx, resp) = reply::streaming(200, "text/plain");
    let first = logfile::render(&data, &opts);
    let mut offset = data.len();
    let mut limit_left = opts.limit_bytes;
    let sh = sh.clone();
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
        let mut stop = sh.shutdown.subscribe();
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
