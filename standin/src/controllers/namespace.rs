//! Namespaces: the defaults, and termination. Deleting a namespace marks it Terminating, its
//! contents are deleted (pods gracefully), and only then does it go away: `kubectl delete -f`
//! deletes the namespace first and the rest after, which must find the objects still there.

use serde_json::{json, Value};

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
