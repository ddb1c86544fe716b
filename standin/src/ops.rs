//! The verbs' semantics (create, update, patch, apply, delete), shared by the HTTP routes and
//! the controllers, so both go through the same admission and ownership rules.

use serde_json::{json, Value};

use crate::admission;
use crate::apply::{self, Writer};
use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::ids;
use crate::patch;
use crate::resources::{self, Res};
use crate::state::Shared;
use crate::store::{self, Obj, Written};

/// Who writes and how.
#[derive(Debug, Clone, Copy)]
pub struct WriteOpts<'a> {
    pub manager: &'a str,
    pub subresource: Option<&'a str>,
    pub dry_run: bool,
}

impl<'a> WriteOpts<'a> {
    pub fn by(manager: &'a str) -> WriteOpts<'a> {
        WriteOpts {
            manager,
            subresource: None,
            dry_run: false,
        }
    }
}

/// Patch flavours, by request Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply { force: bool },
}

fn writer<'a>(res: Res, o: &WriteOpts<'a>, api_version: &'a str) -> Writer<'a> {
    let _ = res;
    Writer {
        manager: o.manager,
        api_version,
        subresource: o.subresource,
    }
}

/// Checks a body's apiVersion/kind (when given) against the resource.
fn check_type(res: Res, body: &Value) -> ApiResult<()> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    if let Some(av) = body.get("apiVersion").and_then(Value::as_str) {
        if av != res.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                res.api_version()
            )));
        }
    }
    if let Some(k) = body.get("kind").and_then(Value::as_str) {
        if k != res.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
    }
    Ok(())
}

fn check_namespace(res: Res, ns: &str, body: &mut Value) -> ApiResult<()> {
    if !body.get("metadata").is_some_and(Value::is_object) {
        body["metadata"] = json!({});
    }
    if res.namespaced {
        match body.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(b) if !b.is_empty() && b != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => body["metadata"]["namespace"] = json!(ns),
        }
    } else if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    Ok(())
}

/// New content in a namespace needs the namespace, alive.
fn namespace_open(sh: &Shared, res: Res, ns: &str) -> ApiResult<()> {
    if !res.namespaced {
        return Ok(());
    }
    match sh.store.get(&resources::NAMESPACES, "", ns) {
        None => Err(ApiError::not_found(&resources::NAMESPACES, ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                res.group_resource()
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Fields a client may not choose on create.
fn clear_server_fields(body: &mut Value) {
    if let Some(md) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            md.remove(f);
        }
    }
}

/// POST: create.
pub fn create(
    sh: &Shared,
    res: Res,
    ns: &str,
    mut body: Value,
    o: WriteOpts<'_>,
) -> ApiResult<Obj> {
    check_type(res, &body)?;
    check_namespace(res, ns, &mut body)?;
    clear_server_fields(&mut body);
    let name = match body.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match body
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
        {
            Some(g) if !g.is_empty() => format!("{g}{}", ids::suffix()),
            _ => {
                return Err(ApiError::invalid(
                    res,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ))
            }
        },
    };
    body["metadata"]["name"] = json!(name);
    namespace_open(sh, res, ns)?;
    let av = res.api_version();
    let w = writer(res, &o, &av);
    let build = |body: Value| -> ApiResult<Value> {
        let mut body = body;
        admission::admit(sh, res, None, &mut body)?;
        apply::record_update(None, &mut body, &w);
        Ok(body)
    };
    if o.dry_run {
        if sh.store.get(res, ns, &name).is_some() {
            return Err(ApiError::already_exists(res, &name));
        }
        return Ok(build(body)?.into());
    }
    let out = sh.store.write(res, ns, &name, |old| match old {
        Some(_) => Err(ApiError::already_exists(res, &name)),
        None => build(body).map(Some),
    })?;
    Ok(out.into_object())
}

/// Keeps what a write through the main resource (or the status subresource) may not change.
fn restrict(res: Res, old: &Value, mut new: Value, sub: Option<&str>) -> Value {
    if sub == Some("status") {
        let mut out = old.clone();
        out["status"] = new.get("status").cloned().unwrap_or(json!({}));
        return out;
    }
    if res.has_status() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    for f in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        match old.pointer(&format!("/metadata/{f}")) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(md) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    md.remove(f);
                }
            }
        }
    }
    new
}

fn precondition(res: Res, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    let want = new
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    let have = old
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    match want {
        Some(w) if !w.is_empty() && Some(w) != have => Err(ApiError::conflict(res, name)),
        _ => Ok(()),
    }
}

/// PUT: replace (the whole object, or its status).
pub fn replace(
    sh: &Shared,
    res: Res,
    ns: &str,
    name: &str,
    mut body: Value,
    o: WriteOpts<'_>,
) -> ApiResult<Obj> {
    check_type(res, &body)?;
    check_namespace(res, ns, &mut body)?;
    match body.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )))
        }
        _ => body["metadata"]["name"] = json!(name),
    }
    let av = res.api_version();
    let w = writer(res, &o, &av);
    let compute = |old: &Value| -> ApiResult<Value> {
        precondition(res, name, old, &body)?;
        let mut new = restrict(res, old, body.clone(), o.subresource);
        if let Some(mf) = old.pointer("/metadata/managedFields") {
            new["metadata"]["managedFields"] = mf.clone();
        }
        admission::admit(sh, res, Some(old), &mut new)?;
        apply::record_update(Some(old), &mut new, &w);
        Ok(new)
    };
    if o.dry_run {
        let old = sh
            .store
            .get(res, ns, name)
            .ok_or_else(|| ApiError::not_found(res, name))?;
        return Ok(compute(&old)?.into());
    }
    let out = sh.store.write(res, ns, name, |old| {
        let old = old.ok_or_else(|| ApiError::not_found(res, name))?;
        compute(old).map(Some)
    })?;
    Ok(out.into_object())
}

/// PATCH (merge, strategic, JSON patch, or server-side apply). Returns the object and whether
/// it was created (apply of a new object: 201).
pub fn patch(
    sh: &Shared,
    res: Res,
    ns: &str,
    name: &str,
    kind: PatchKind,
    body: Value,
    o: WriteOpts<'_>,
) -> ApiResult<(Obj, bool)> {
    let av = res.api_version();
    let w = writer(res, &o, &av);
    if let PatchKind::Apply { .. } = kind {
        check_type(res, &body)?;
        if o.manager.is_empty() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        if let Some(n) = body.pointer("/metadata/name").and_then(Value::as_str) {
            if n != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        if sh.store.get(res, ns, name).is_none() && o.subresource.is_none() {
            namespace_open(sh, res, ns)?;
        }
    }
    let compute = |old: Option<&Value>| -> ApiResult<Value> {
        let mut new = match (kind, old) {
            (PatchKind::Apply { force }, old) => {
                let skeleton;
                let live = match old {
                    Some(o) => o,
                    None => {
                        let mut s =
                            json!({"apiVersion": av, "kind": res.kind, "metadata": {"name": name}});
                        if res.namespaced {
                            s["metadata"]["namespace"] = json!(ns);
                        }
                        skeleton = s;
                        &skeleton
                    }
                };
                let mut cfg = body.clone();
                clear_server_fields(&mut cfg);
                if let Some(rv) = body.pointer("/metadata/resourceVersion") {
                    cfg["metadata"]["resourceVersion"] = rv.clone();
                }
                if let Some(o) = old {
                    precondition(res, name, o, &cfg)?;
                }
                if let Some(md) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
                    md.remove("resourceVersion");
                }
                let applied = apply::apply(live, &cfg, &w, force)?;
                match old {
                    Some(o) => restrict(res, o, applied, o_sub(&w)),
                    None => {
                        let mut a = applied;
                        if o.subresource.is_some() {
                            return Err(ApiError::not_found(res, name));
                        }
                        if let Some(m) = a.as_object_mut() {
                            m.remove("status");
                        }
                        a
                    }
                }
            }
            (_, None) => return Err(ApiError::not_found(res, name)),
            (k, Some(old)) => {
                let mut new = old.clone();
                match k {
                    PatchKind::Merge => patch::merge(&mut new, &body),
                    PatchKind::Strategic => patch::strategic(&mut new, &body)?,
                    PatchKind::Json => json_patch(&mut new, &body)?,
                    PatchKind::Apply { .. } => unreachable!("handled above"),
                }
                precondition(res, name, old, &new)?;
                let mut new = restrict(res, old, new, o.subresource);
                if let Some(mf) = old.pointer("/metadata/managedFields") {
                    new["metadata"]["managedFields"] = mf.clone();
                }
                apply::record_update(Some(old), &mut new, &w);
                new
            }
        };
        new["metadata"]["name"] = json!(name);
        if res.namespaced {
            new["metadata"]["namespace"] = json!(ns);
        }
        admission::admit(sh, res, old, &mut new)?;
        Ok(new)
    };
    if o.dry_run {
        let old = sh.store.get(res, ns, name);
        let created = old.is_none();
        return Ok((compute(old.as_deref())?.into(), created));
    }
    let out = sh
        .store
        .write(res, ns, name, |old| compute(old).map(Some))?;
    let created = matches!(out, Written::Created(_));
    Ok((out.into_object(), created))
}

fn o_sub<'a>(w: &Writer<'a>) -> Option<&'a str> {
    w.subresource
}

/// RFC 6902 (add, remove, replace, test, copy, move), for `kubectl patch --type json`.
fn json_patch(target: &mut Value, ops: &Value) -> ApiResult<()> {
    let bad = |m: String| ApiError::new(422, "Invalid", m);
    let Some(ops) = ops.as_array() else {
        return Err(ApiError::bad_request(
            "json patch: expected an array of operations",
        ));
    };
    for op in ops {
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        match op.get("op").and_then(Value::as_str).unwrap_or_default() {
            "add" => pointer_set(target, path, value, true).map_err(bad)?,
            "replace" => {
                if target.pointer(path).is_none() {
                    return Err(bad(format!(
                        "replace operation does not apply: doc is missing key: {path}"
                    )));
                }
                pointer_set(target, path, value, false).map_err(bad)?
            }
            "remove" => {
                pointer_remove(target, path).ok_or_else(|| {
                    bad(format!(
                        "remove operation does not apply: doc is missing path: {path}"
                    ))
                })?;
            }
            "test" => {
                if target.pointer(path) != Some(&value) {
                    return Err(bad(format!("testing value {path} failed")));
                }
            }
            "copy" | "move" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
                let v = target
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| bad(format!("missing path {from}")))?;
                if op["op"] == "move" {
                    pointer_remove(target, from);
                }
                pointer_set(target, path, v, true).map_err(bad)?;
            }
            other => return Err(bad(format!("unexpected kind: {other}"))),
        }
    }
    Ok(())
}

fn unescape(s: &str) -> String {
    s.replace("~1", "/").replace("~0", "~")
}

fn pointer_set(target: &mut Value, path: &str, v: Value, insert: bool) -> Result<(), String> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid path {path}"))?;
    let last = unescape(last);
    let p = target
        .pointer_mut(parent)
        .ok_or_else(|| format!("add operation does not apply: doc is missing path: {parent}"))?;
    match p {
        Value::Object(m) => {
            m.insert(last, v);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(v);
            } else {
                let i: usize = last.parse().map_err(|_| format!("invalid index {last}"))?;
                if insert && i <= a.len() {
                    a.insert(i, v);
                } else if !insert && i < a.len() {
                    a[i] = v;
                } else {
                    return Err(format!("index {i} out of bounds"));
                }
            }
        }
        _ => return Err(format!("cannot set {path}")),
    }
    Ok(())
}

fn pointer_remove(target: &mut Value, path: &str) -> Option<Value> {
    let (parent, last) = path.rsplit_once('/')?;
    let last = unescape(last);
    match target.pointer_mut(parent)? {
        Value::Object(m) => m.remove(&last),
        Value::Array(a) => {
            let i: usize = last.parse().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

#[derive(Debug, Clone)]
pub struct DeleteOpts {
    /// `gracePeriodSeconds` (pods): 0 deletes at once.
    pub grace: Option<i64>,
    pub propagation: Propagation,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

impl Default for DeleteOpts {
    fn default() -> DeleteOpts {
        DeleteOpts {
            grace: None,
            propagation: Propagation::Background,
            uid: None,
            resource_version: None,
            dry_run: false,
        }
    }
}

/// DELETE of one object. Namespaces terminate asynchronously, bound pods wait for their
/// kubelet (graceful termination), objects with finalizers wait for them; the answer is the
/// object as it is then (with `deletionTimestamp` when it is not gone yet).
pub fn delete(sh: &Shared, res: Res, ns: &str, name: &str, d: &DeleteOpts) -> ApiResult<Obj> {
    let old = sh
        .store
        .get(res, ns, name)
        .ok_or_else(|| ApiError::not_found(res, name))?;
    if d.uid.as_deref().is_some_and(|u| u != store::uid_of(&old)) {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                d.uid.as_deref().unwrap_or_default(),
                store::uid_of(&old)
            ),
        ));
    }
    if let Some(rv) = &d.resource_version {
        if Some(rv.as_str())
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
        {
            return Err(ApiError::conflict(res, name));
        }
    }
    if d.dry_run {
        return Ok(old);
    }
    if d.propagation == Propagation::Orphan {
        orphan_dependents(sh, store::uid_of(&old));
    }
    let now = clock::now();
    let pod_grace = if res.is(&resources::PODS) && old.pointer("/spec/nodeName").is_some() {
        let g = d.grace.unwrap_or_else(|| {
            old.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        });
        (g > 0).then_some(g)
    } else {
        None
    };
    let has_finalizers = old
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let graceful = res.is(&resources::NAMESPACES)
        || pod_grace.is_some()
        || has_finalizers
        || d.propagation == Propagation::Foreground;
    if !graceful {
        return sh
            .store
            .remove(res, ns, name)
            .ok_or_else(|| ApiError::not_found(res, name));
    }
    let out = sh.store.update(res, ns, name, |o| {
        if o.pointer("/metadata/deletionTimestamp").is_none() {
            o["metadata"]["deletionTimestamp"] = json!(now);
            o["metadata"]["deletionGracePeriodSeconds"] = json!(pod_grace.unwrap_or(0));
        }
        if res.is(&resources::NAMESPACES) {
            o["status"]["phase"] = json!("Terminating");
        }
        if d.propagation == Propagation::Foreground {
            let f = o["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !f.contains(&json!("foregroundDeletion")) {
                let mut f = f;
                f.push(json!("foregroundDeletion"));
                o["metadata"]["finalizers"] = json!(f);
            }
        }
        Ok(())
    })?;
    Ok(out.into_object())
}

/// Removes ownerReferences to `uid` from every object (orphan propagation).
fn orphan_dependents(sh: &Shared, uid: &str) {
    for (res, obj) in sh.store.all() {
        let refs = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        if !refs.is_some_and(|r| r.iter().any(|r| r["uid"] == uid)) {
            continue;
        }
        let _ = sh
            .store
            .update(res, store::namespace_of(&obj), store::name_of(&obj), |o| {
                if let Some(r) = o
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    r.retain(|r| r["uid"] != uid);
                }
                Ok(())
            });
    }
}

/// The objects a controller owns (by ownerReferences uid), in one namespace.
pub fn owned_by(sh: &Shared, res: Res, ns: &str, owner_uid: &str) -> Vec<Obj> {
    sh.store
        .list(res, Some(ns))
        .0
        .into_iter()
        .filter(|o| {
            o.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|r| r["uid"] == owner_uid))
        })
        .collect()
}

/// A write by a controller to an object's status (no managedFields entry, like the stand-in's
/// other internal writes); no-op when unchanged.
pub fn update_status(
    sh: &Shared,
    res: Res,
    ns: &str,
    name: &str,
    status: Value,
) -> ApiResult<Written> {
    sh.store.update(res, ns, name, |o| {
        o["status"] = status;
        Ok(())
    })
}
