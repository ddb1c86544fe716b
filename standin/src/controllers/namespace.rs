//! Namespaces: the defaults, and termination. Deleting a namespace marks it Terminating, its
//! contents are deleted (pods gracefully), and only then does it go away: `kubectl delete -f`
//! deletes the namespace first and the rest after, which must find the objects still there.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::clock;

use crate::ops::{self, DeleteOpts};
use crate::resources;
use crate::state::Shared;
use crate::store;

pub fn create_defaults(sh: &Shared) -> std::io::Result<()> {
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        ops::create(
            sh,
            &resources::NAMESPACES,
            "",
            ns,
            ops::WriteOpts::by("kube-apiserver"),
        )
        .map_err(|e| std::io::Error::other(format!("namespace {name}: {e}")))?;
    }
    Ok(())
}

/// How long a terminating namespace's objects stay before the controller deletes them
/// (deletionTimestamp has second precision: 1–2 s).
const CONTENT_DELAY: Duration = Duration::from_secs(1);

pub fn sync(sh: &Shared) {
    let (namespaces, _) = sh.store.list(&resources::NAMESPACES, None);
    let terminating: Vec<_> = namespaces
        .iter()
        .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
        .collect();
    if terminating.is_empty() {
        return;
    }
    let all = sh.store.all();
    for ns in terminating {
        // The real namespace controller takes a moment (discovery, then a pass per resource);
        // `kubectl delete -f` relies on it, deleting the namespace first and its objects
        // right after, each of which must still be there.
        let since = ns
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(clock::parse)
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        if since.is_none_or(|d| d < CONTENT_DELAY) {
            continue;
        }
        let name = store::name_of(ns);
        let contents: Vec<_> = all
            .iter()
            .filter(|(r, o)| r.namespaced && store::namespace_of(o) == name)
            .collect();
        if contents.is_empty() {
            let _ = sh.store.update(&resources::NAMESPACES, "", name, |o| {
                o["spec"]["finalizers"] = json!([]);
                Ok(())
            });
            continue;
        }
        for (res, o) in contents {
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let _ = ops::delete(sh, res, name, store::name_of(o), &DeleteOpts::default());
        }
        let _ = sh.store.update(&resources::NAMESPACES, "", name, |o| {
            o["status"]["conditions"] = json!([{
                "type": "NamespaceContentRemaining", "status": "True",
                "reason": "SomeResourcesRemain",
                "message": "Some resources are remaining",
                "lastTransitionTime": o.pointer("/metadata/deletionTimestamp").cloned().unwrap_or(Value::Null),
            }]);
            Ok(())
        });
    }
}
