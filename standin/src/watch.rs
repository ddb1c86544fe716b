//! Watches: newline-delimited JSON events in a chunked body, from a resourceVersion on.
//!
//! No version (or "0") replays what exists as ADDED first. A version older than the event ring
//! holds gets one `ERROR` event with a 410 Expired Status and the stream ends (clients re-list).
//! The stream also ends after `timeoutSeconds`, when the client goes away, or when the cluster
//! stops. Selector-filtered watches turn "stopped matching" into DELETED and "started matching"
//! into ADDED, as the real watch cache does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::reply::{self, Resp};
use crate::resources::Res;
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::store::EventType;
use crate::table;

/// What to watch.
pub struct WatchParams {
    pub res: Res,
    pub ns: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// None: start with the current state as ADDED events.
    pub since: Option<u64>,
    pub timeout: Duration,
    pub bookmarks: bool,
    /// Send each object as a one-row Table (kubectl get -w asks for it).
    pub as_table: bool,
}

/// How often an idle watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// Starts a watch; the response streams until it ends.
pub fn start(sh: Arc<Shared>, p: WatchParams) -> Resp {
    let ct = if p.as_table {
        reply::TABLE_CT
    } else {
        "application/json"
    };
    let (tx, resp) = reply::streaming(200, ct);
    tokio::spawn(async move {
        run(sh, p, tx).await;
    });
    resp
}

fn line(kind: &str, obj: Value) -> Bytes {
    let mut b = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

fn render(p: &WatchParams, obj: &Value, rv: u64) -> Value {
    if p.as_table {
        let mut t = table::table(p.res, &[Arc::new(obj.clone())], rv);
        t["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"].clone();
        t
    } else {
        obj.clone()
    }
}

async fn run(sh: Arc<Shared>, p: WatchParams, tx: mpsc::Sender<Bytes>) {
    let mut changed = sh.store.subscribe();
    let mut stop = sh.shutdown.subscribe();
    let epoch = sh.faults.watch_epoch.load(Ordering::Relaxed);
    let deadline = Instant::now() + p.timeout;
    let matches = |o: &Value| p.labels.matches_object(o) && p.fields.matches(o);
    let mut pos = match p.since {
        Some(rv) => rv,
        None => {
            let (objs, rv) = sh.store.list(p.res, p.ns.as_deref());
            for o in objs.iter().filter(|o| matches(o)) {
                if tx.send(line("ADDED", render(&p, o, rv))).await.is_err() {
                    return;
                }
            }
            rv
        }
    };
    let mut last_sent = Instant::now();
    loop {
        if sh.faults.watch_epoch.load(Ordering::Relaxed) != epoch {
            let e = crate::error::ApiError::expired(pos, sh.store.rv());
            let _ = tx.send(line("ERROR", e.status())).await;
            return;
        }
        let events = match sh.store.events_after(pos) {
            Ok(ev) => ev,
            Err(e) => {
                let _ = tx.send(line("ERROR", e.status())).await;
                return;
            }
        };
        for e in events {
            pos = e.rv;
            if !e.res.is(p.res) || p.ns.as_deref().is_some_and(|ns| ns != e.ns) {
                continue;
            }
            let now = matches(&e.obj);
            let before = e.prev.as_deref().is_some_and(&matches);
            let kind = match e.kind {
                EventType::Added if now => EventType::Added,
                EventType::Modified if now && before => EventType::Modified,
                EventType::Modified if now => EventType::Added,
                EventType::Modified if before => EventType::Deleted,
                EventType::Deleted if now || before => EventType::Deleted,
                _ => continue,
            };
            if tx
                .send(line(kind.as_str(), render(&p, &e.obj, e.rv)))
                .await
                .is_err()
            {
                return;
            }
            last_sent = Instant::now();
        }
        let bookmark_at = last_sent + BOOKMARK_EVERY;
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            _ = stop.changed() => return,
            _ = tx.closed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tokio::time::sleep_until(bookmark_at), if p.bookmarks => {
                let b = json!({"kind": p.res.kind, "apiVersion": p.res.api_version(),
                               "metadata": {"resourceVersion": pos.to_string()}});
                if tx.send(line("BOOKMARK", b)).await.is_err() {
                    return;
                }
                last_sent = Instant::now();
            }
        }
    }
}
