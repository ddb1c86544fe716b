//! Server-side apply and `managedFields`.
//!
//! A field set is the set of paths a manager owns, in the `FieldsV1` shape real servers write
//! (`f:spec`, `k:{"name":"nginx"}` for keyed list items, `v:"x"` for set members, `.` for an
//! item itself). Apply by manager M with configuration C:
//! 1. a field C sets to a value other than the live one, owned by another manager, is a
//!    conflict (409) unless `force`, which moves ownership to M;
//! 2. fields M applied before and C no longer holds are removed, unless someone else owns them;
//! 3. C is merged into the live object (maps by key, keyed lists item by item, others replaced);
//! 4. M's Apply entry becomes exactly C's field set.
//!
//! Non-apply writes (create, update, merge/strategic patch) give their manager an `Update` entry
//! for the fields they changed and take those fields from other managers, as the real server
//! does. Re-applying identical content changes nothing, so the store keeps the
//! resourceVersion.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::patch::{item_key, list_kind, ListKind};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// `f:name`
    Field(String),
    /// `k:{"name":"nginx"}`: a keyed list item, by its key fields (canonical JSON).
    Key(String),
    /// `v:"x"`: a member of a set-like list.
    Member(String),
}

pub type Path = Vec<Step>;
pub type FieldSet = BTreeSet<Path>;

/// Top-level and metadata fields nobody owns (identity and server-set values).
fn untracked(path: &[Step]) -> bool {
    match path {
        [Step::Field(f)] => matches!(f.as_str(), "apiVersion" | "kind"),
        [Step::Field(m), Step::Field(f), ..] if m == "metadata" => matches!(
            f.as_str(),
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "managedFields"
                | "selfLink"
        ),
        _ => false,
    }
}

/// The fields an object (or an apply configuration) sets. `status` is left out unless
/// `status_only`, and then only status is taken.
pub fn fields_of(obj: &Value, status_only: bool) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            if (k == "status") != status_only {
                continue;
            }
            let mut path = vec![Step::Field(k.clone())];
            walk(v, k, &mut path, &mut out);
        }
    }
    out.retain(|p| !untracked(p));
    out
}

fn walk(v: &Value, field: &str, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                path.push(Step::Field(k.clone()));
                walk(c, k, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_kind(field, items) {
            ListKind::Keyed(keys) => {
                for item in items {
                    path.push(Step::Key(Value::Object(item_key(item, keys)).to_string()));
                    out.insert(path.clone());
                    if let Value::Object(m) = item {
                        for (k, c) in m {
                            path.push(Step::Field(k.clone()));
                            walk(c, k, path, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            ListKind::Set => {
                for item in items {
                    path.push(Step::Member(item.to_string()));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// Which list a step indexes into needs the field name that holds it.
fn keys_for(parent_field: &str, items: &[Value]) -> Option<&'static [&'static str]> {
    match list_kind(parent_field, items) {
        ListKind::Keyed(k) => Some(k),
        _ => None,
    }
}

fn find_item<'a>(
    items: &'a [Value],
    parent_field: &str,
    step: &Step,
) -> Option<(usize, &'a Value)> {
    match step {
        Step::Key(k) => {
            let keys = keys_for(parent_field, items)?;
            let want: Value = serde_json::from_str(k).ok()?;
            items
                .iter()
                .enumerate()
                .find(|(_, i)| want.as_object() == Some(&item_key(i, keys)))
        }
        Step::Member(m) => items.iter().enumerate().find(|(_, i)| i.to_string() == *m),
        Step::Field(_) => None,
    }
}

/// The value at a path, if present.
pub fn value_at<'a>(obj: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut cur = obj;
    let mut field = "";
    for step in path {
        cur = match (step, cur) {
            (Step::Field(f), Value::Object(m)) => {
                field = f;
                m.get(f)?
            }
            (_, Value::Array(items)) => find_item(items, field, step)?.1,
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes the field or list item at a path (nothing when absent).
fn remove_at(obj: &mut Value, path: &[Step]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    let mut field = String::new();
    for step in parent_path {
        let next = match (step, cur) {
            (Step::Field(f), Value::Object(m)) => {
                field = f.clone();
                m.get_mut(f)
            }
            (_, Value::Array(items)) => {
                let idx = find_item(items, &field, step).map(|(i, _)| i);
                match idx {
                    Some(i) => items.get_mut(i),
                    None => None,
                }
            }
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (Step::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (step, Value::Array(items)) => {
            if let Some((i, _)) = find_item(items, &field, step) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// Merges an apply configuration into the live object.
fn merge_into(live: &mut Value, cfg: &Value, field: &str) {
    match (live, cfg) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, cv) in c {
                match l.get_mut(k) {
                    Some(lv) => merge_into(lv, cv, k),
                    None => {
                        l.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(c)) => match list_kind(field, c) {
            ListKind::Keyed(keys) => {
                for ci in c {
                    let k = item_key(ci, keys);
                    match l.iter_mut().find(|li| item_key(li, keys) == k) {
                        Some(li) => merge_into(li, ci, ""),
                        None => l.push(ci.clone()),
                    }
                }
            }
            ListKind::Set => {
                for ci in c {
                    if !l.contains(ci) {
                        l.push(ci.clone());
                    }
                }
            }
            ListKind::Atomic => *l = c.clone(),
        },
        (l, c) => *l = c.clone(),
    }
}

fn step_name(s: &Step) -> String {
    match s {
        Step::Field(f) => format!("f:{f}"),
        Step::Key(k) => format!("k:{k}"),
        Step::Member(m) => format!("v:{m}"),
    }
}

/// `FieldsV1` JSON of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for step in path {
            node = node
                .entry(step_name(step))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("field set nodes are objects");
        }
        if matches!(path.last(), Some(Step::Key(_))) {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

/// A set from `FieldsV1` JSON (unknown step prefixes are skipped).
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn go(node: &Map<String, Value>, path: &mut Path, out: &mut FieldSet) {
        for (k, child) in node {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            let step = if let Some(f) = k.strip_prefix("f:") {
                Step::Field(f.to_string())
            } else if let Some(key) = k.strip_prefix("k:") {
                Step::Key(key.to_string())
            } else if let Some(m) = k.strip_prefix("v:") {
                Step::Member(m.to_string())
            } else {
                continue;
            };
            path.push(step);
            match child.as_object() {
                Some(c) if !c.is_empty() => go(c, path, out),
                _ => {
                    out.insert(path.clone());
                }
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Some(m) = v.as_object() {
        go(m, &mut Vec::new(), &mut out);
    }
    out
}

/// `.spec.template.metadata.annotations.kubectl.kubernetes.io/restartedAt`, as conflict
/// messages print paths.
fn dotted(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Field(f) => format!(".{f}"),
            Step::Key(k) => format!("[{}]", k.trim_start_matches('{').trim_end_matches('}')),
            Step::Member(m) => format!("[={m}]"),
        })
        .collect()
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: e["operation"].as_str().unwrap_or_default().to_string(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    subresource: e["subresource"].as_str().map(str::to_string),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn set_entries(obj: &mut Value, es: &[Entry]) {
    let v: Vec<Value> = es
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut j = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                j["subresource"] = json!(s);
            }
            j
        })
        .collect();
    if v.is_empty() {
        if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            md.remove("managedFields");
        }
    } else {
        obj["metadata"]["managedFields"] = Value::Array(v);
    }
}

/// Who is writing: the manager name, the API version of the request, the subresource.
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
}

/// Server-side apply of `config` onto `live` (a fresh skeleton when the object is new).
pub fn apply(live: &Value, config: &Value, w: &Writer<'_>, force: bool) -> ApiResult<Value> {
    let status_only = w.subresource == Some("status");
    let new_set = fields_of(config, status_only);
    let mut es = entries(live);
    let mine = |e: &Entry| {
        e.manager == w.manager
            && e.operation == "Apply"
            && e.subresource.as_deref() == w.subresource
    };
    let old_set: FieldSet = es
        .iter()
        .filter(|e| mine(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();

    // 1. conflicts: a field set to another value than another manager left there
    let mut conflicts: Vec<(String, String, Path)> = Vec::new();
    for p in &new_set {
        if matches!(p.last(), Some(Step::Key(_) | Step::Member(_))) {
            continue;
        }
        let (lv, cv) = (value_at(live, p), value_at(config, p));
        if lv.is_none() || lv == cv {
            continue;
        }
        for e in es.iter().filter(|e| !mine(e) && e.fields.contains(p)) {
            conflicts.push((e.manager.clone(), e.api_version.clone(), p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    if force {
        for (_, _, p) in &conflicts {
            for e in es.iter_mut().filter(|e| !mine(e)) {
                e.fields.remove(p);
            }
        }
    }

    // 2. fields this manager dropped from its configuration, unless owned elsewhere
    let mut out = live.clone();
    let dropped: Vec<&Path> = old_set.difference(&new_set).collect();
    for p in dropped.into_iter().rev() {
        // owned by someone else, or something under it is
        let shared = es
            .iter()
            .any(|e| !mine(e) && e.fields.iter().any(|q| q.starts_with(p)));
        if !shared {
            remove_at(&mut out, p);
        }
    }

    // 3. merge the configuration
    let cfg_part: Value = match config {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| (k.as_str() == "status") == status_only)
                .filter(|(k, _)| k.as_str() != "apiVersion" && k.as_str() != "kind")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => {
            return Err(ApiError::bad_request(
                "apply: the body must be a JSON object",
            ))
        }
    };
    merge_into(&mut out, &cfg_part, "");

    // 4. ownership
    let now = clock::now();
    match es.iter_mut().find(|e| mine(e)) {
        Some(e) if e.fields == new_set => {}
        Some(e) => {
            e.fields = new_set;
            e.time = now;
            e.api_version = w.api_version.to_string();
        }
        None => es.push(Entry {
            manager: w.manager.to_string(),
            operation: "Apply".into(),
            api_version: w.api_version.to_string(),
            time: now,
            subresource: w.subresource.map(str::to_string),
            fields: new_set,
        }),
    }
    set_entries(&mut out, &es);
    Ok(out)
}

fn conflict_error(conflicts: &[(String, String, Path)]) -> ApiError {
    let lines: Vec<String> = conflicts
        .iter()
        .map(|(m, av, p)| format!("conflict with \"{m}\" using {av}: {}", dotted(p)))
        .collect();
    let message = if lines.len() == 1 {
        format!("Apply failed with 1 conflict: {}", lines[0])
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            lines.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, av, p)| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with \"{m}\" using {av}"),
                   "field": dotted(p)})
        })
        .collect();
    let mut e = ApiError::new(409, "Conflict", message);
    e.details = Some(json!({"causes": causes}));
    e
}

/// Ownership for a non-apply write from `old` (None: create) to `new`: the writer's Update
/// entry gains the fields it changed, other managers lose them; removed fields are dropped
/// from everyone.
pub fn record_update(old: Option<&Value>, new: &mut Value, w: &Writer<'_>) {
    let status_only = w.subresource == Some("status");
    let new_fields = fields_of(new, status_only);
    let mut es = old.map(entries).unwrap_or_default();
    let changed: FieldSet = match old {
        None => new_fields.clone(),
        Some(o) => new_fields
            .iter()
            .filter(|p| value_at(o, p) != value_at(new, p))
            .cloned()
            .collect(),
    };
    let removed: FieldSet = match old {
        None => FieldSet::new(),
        Some(o) => fields_of(o, status_only)
            .difference(&new_fields)
            .cloned()
            .collect(),
    };
    if changed.is_empty() && removed.is_empty() {
        set_entries(new, &es);
        return;
    }
    for e in es.iter_mut() {
        e.fields.retain(|p| !removed.contains(p));
        if e.manager != w.manager || e.operation != "Update" {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    let now = clock::now();
    match es.iter_mut().find(|e| {
        e.manager == w.manager
            && e.operation == "Update"
            && e.subresource.as_deref() == w.subresource
    }) {
        Some(e) => {
            e.fields.extend(changed);
            e.time = now;
        }
        None => es.push(Entry {
            manager: w.manager.to_string(),
            operation: "Update".into(),
            api_version: w.api_version.to_string(),
            time: now,
            subresource: w.subresource.map(str::to_string),
            fields: changed,
        }),
    }
    set_entries(new, &es);
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Writer<'static> = Writer {
        manager: "archbench",
        api_version: "apps/v1",
        subresource: None,
    };

    fn config(image: &str, with_label: bool) -> Value {
        let mut labels = json!({"app.kubernetes.io/managed-by": "archbench"});
        if with_label {
            labels["extra"] = json!("yes");
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "namespace": "nginx", "labels": labels},
               "spec": {"replicas": 1, "template": {"spec": {"containers": [
                   {"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}}}})
    }

    fn skeleton() -> Value {
        json!({"metadata": {"name": "d", "namespace": "nginx"}})
    }

    #[test]
    fn fields_v1_round_trip() {
        let set = fields_of(&config("nginx", true), false);
        let v = to_fields_v1(&set);
        assert!(
            v["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
                .get(".")
                .is_some()
        );
        assert!(
            v["f:metadata"].get("f:name").is_none(),
            "identity is not owned"
        );
        assert_eq!(from_fields_v1(&v), set);
    }

    #[test]
    fn reapply_is_a_no_op_and_dropped_fields_go() {
        let once = apply(&skeleton(), &config("nginx", true), &W, false).unwrap();
        let twice = apply(&once, &config("nginx", true), &W, false).unwrap();
        assert_eq!(
            once, twice,
            "identical re-apply changes nothing, not even times"
        );
        let third = apply(&twice, &config("nginx", false), &W, false).unwrap();
        assert!(third["metadata"]["labels"].get("extra").is_none());
        assert_eq!(
            third["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "archbench"
        );
    }

    #[test]
    fn conflicts_with_other_managers_unless_forced() {
        let applied = apply(&skeleton(), &config("nginx", false), &W, false).unwrap();
        // kubectl rollout restart-like update by another manager, plus an image change
        let mut updated = applied.clone();
        updated["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        updated["spec"]["template"]["metadata"] =
            json!({"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}});
        let other = Writer {
            manager: "kubectl-edit",
            ..W
        };
        record_update(Some(&applied), &mut updated, &other);
        let err = apply(&updated, &config("nginx", false), &W, false).unwrap_err();
        assert_eq!(err.code, 409);
        assert!(
            err.message.contains("conflict with \"kubectl-edit\"")
                && err.message.contains(".image"),
            "{}",
            err.message
        );
        let forced = apply(&updated, &config("nginx", false), &W, true).unwrap();
        assert_eq!(
            forced["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        // the other manager's annotation survives: archbench never owned it
        assert_eq!(
            forced["spec"]["template"]["metadata"]["annotations"]
                ["kubectl.kubernetes.io/restartedAt"],
            "now"
        );
    }
}
