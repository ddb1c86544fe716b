//! Garbage collection by ownerReferences: objects whose owners are all gone are deleted
//! (background propagation); an owner deleted in the foreground waits for its dependents.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::ops::{self, DeleteOpts};
use crate::state::Shared;
use crate::store;

pub fn sync(sh: &Shared) {
    let all = sh.store.all();
    let uids: HashSet<&str> = all.iter().map(|(_, o)| store::uid_of(o)).collect();
    for (res, o) in &all {
        let refs = o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        let Some(refs) = refs.filter(|r| !r.is_empty()) else {
            continue;
        };
        let orphaned = refs
            .iter()
            .all(|r| !uids.contains(r["uid"].as_str().unwrap_or_default()));
        if orphaned && o.pointer("/metadata/deletionTimestamp").is_none() {
            let _ = ops::delete(
                sh,
                res,
                store::namespace_of(o),
                store::name_of(o),
                &DeleteOpts::default(),
            );
        }
    }
    for (res, o) in &all {
        let foreground = o
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.contains(&json!("foregroundDeletion")));
        if !foreground || o.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let uid = store::uid_of(o);
        let dependents: Vec<_> = all
            .iter()
            .filter(|(_, d)| {
                d.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|r| r["uid"] == uid))
            })
            .collect();
        if dependents.is_empty() {
            let _ = sh
                .store
                .update(res, store::namespace_of(o), store::name_of(o), |o| {
                    if let Some(f) = o
                        .pointer_mut("/metadata/finalizers")
                        .and_then(Value::as_array_mut)
                    {
                        f.retain(|f| f != "foregroundDeletion");
                    }
                    Ok(())
                });
            continue;
        }
        for (dres, d) in dependents {
            if d.pointer("/metadata/deletionTimestamp").is_none() {
                let _ = ops::delete(
                    sh,
                    dres,
                    store::namespace_of(d),
                    store::name_of(d),
                    &DeleteOpts::default(),
                );
            }
        }
    }
}
