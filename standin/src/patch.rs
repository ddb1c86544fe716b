//! JSON merge patch (RFC 7386) and strategic merge patch.
//!
//! Strategic merge needs each list's patch strategy, which the real server takes from the Go
//! types. The stand-in has no types, so [`list_kind`] decides by field name, which is exact for
//! the fields archbench and kubectl patch (containers, env, ports, volumes, volumeMounts,
//! conditions, finalizers …) and falls back to replacing the list, as for atomic lists.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// How a list field merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Items are maps identified by these keys (`x-kubernetes-list-map-keys`).
    Keyed(&'static [&'static str]),
    /// A set of scalars (finalizers).
    Set,
    /// Replaced as a whole.
    Atomic,
}

/// The list strategy of a field, from its name (and, for `ports`, from what its items hold:
/// container ports are keyed by `containerPort`, Service ports by `port`).
pub fn list_kind(field: &str, items: &[Value]) -> ListKind {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => ListKind::Keyed(&["name"]),
        "volumeMounts" => ListKind::Keyed(&["mountPath"]),
        "volumeDevices" => ListKind::Keyed(&["devicePath"]),
        "hostAliases" => ListKind::Keyed(&["ip"]),
        "conditions" => ListKind::Keyed(&["type"]),
        "ownerReferences" => ListKind::Keyed(&["uid"]),
        "topologySpreadConstraints" => ListKind::Keyed(&["topologyKey", "whenUnsatisfiable"]),
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                ListKind::Keyed(&["containerPort", "protocol"])
            } else {
                ListKind::Keyed(&["port", "protocol"])
            }
        }
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// The identity of a keyed list item: its key fields (a missing `protocol` defaults to TCP, as
/// the server's defaulting would make it).
pub fn item_key(item: &Value, keys: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    for k in keys {
        match item.get(*k) {
            Some(v) => {
                m.insert((*k).to_string(), v.clone());
            }
            None if *k == "protocol" => {
                m.insert("protocol".into(), Value::String("TCP".into()));
            }
            None => {}
        }
    }
    m
}

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Strategic merge patch: as [`merge`], but keyed lists merge item by item, `$patch: delete`
/// removes an item, `$patch: replace` replaces, `$deleteFromPrimitiveList/F` removes scalars;
/// `$setElementOrder` and `$retainKeys` are read and ignored (order is kept as stored).
pub fn strategic(target: &mut Value, patch: &Value) -> ApiResult<()> {
    let Value::Object(p) = patch else {
        return Err(ApiError::bad_request(
            "strategic merge patch: the patch must be a JSON object",
        ));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        strategic_map(t, p)?;
    }
    Ok(())
}

fn strategic_map(t: &mut Map<String, Value>, p: &Map<String, Value>) -> ApiResult<()> {
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *t = strip(&Value::Object(p.clone()))
                .as_object()
                .cloned()
                .unwrap_or_default();
            return Ok(());
        }
        Some("delete") => {
            t.clear();
            return Ok(());
        }
        Some(other) if other != "merge" => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other} in map"
            )));
        }
        _ => {}
    }
    for (k, v) in p {
        if k == "$patch" || k.starts_with("$setElementOrder/") || k == "$retainKeys" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (t.get_mut(field), v.as_array()) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(pm) => match t.get_mut(k) {
                Some(Value::Object(tm)) => strategic_map(tm, pm)?,
                _ => {
                    if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                        t.remove(k);
                    } else {
                        t.insert(k.clone(), strip(v));
                    }
                }
            },
            Value::Array(items) => {
                let kind = list_kind(k, items);
                match (kind, t.get_mut(k)) {
                    (ListKind::Keyed(keys), Some(Value::Array(tl))) => {
                        strategic_list(tl, items, keys)?
                    }
                    (ListKind::Set, Some(Value::Array(tl))) => {
                        for i in items {
                            if !tl.contains(i) {
                                tl.push(i.clone());
                            }
                        }
                    }
                    _ => {
                        let kept: Vec<Value> = items
                            .iter()
                            .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                            .map(strip)
                            .collect();
                        t.insert(k.clone(), Value::Array(kept));
                    }
                }
            }
            scalar => {
                t.insert(k.clone(), scalar.clone());
            }
        }
    }
    Ok(())
}

fn strategic_list(t: &mut Vec<Value>, p: &[Value], keys: &[&str]) -> ApiResult<()> {
    if p.iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *t = p
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip)
            .collect();
        return Ok(());
    }
    for item in p {
        let Value::Object(pm) = item else {
            if !t.contains(item) {
                t.push(item.clone());
            }
            continue;
        };
        let k = item_key(item, keys);
        let pos = t.iter().position(|x| item_key(x, keys) == k);
        let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                t.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Value::Object(tm) = &mut t[i] {
                    strategic_map(tm, pm)?;
                }
            }
            (None, false) => t.push(strip(item)),
        }
    }
    Ok(())
}

/// A patch fragment without strategic-merge directives, for inserting as a value.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge(
            &mut t,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            t,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
    }

    fn deployment() -> Value {
        json!({"spec": {"template": {"metadata": {"labels": {"arch": "amd64"}}, "spec": {
            "containers": [{"name": "nginx", "image": "nginx:1.25",
                            "ports": [{"containerPort": 80, "name": "http"}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                           {"name": "sidecar", "image": "busybox"}],
            "volumes": [{"name": "cfg", "configMap": {"name": "nginx-config"}}]}}},
            "metadata": {"finalizers": ["a"]}})
    }

    #[test]
    fn strategic_merges_lists_by_key() {
        let mut t = deployment();
        strategic(
            &mut t,
            &json!({"spec": {"template": {
                "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T12:33:22Z"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                         "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                                        {"name": "sidecar", "$patch": "delete"}],
                         "$setElementOrder/containers": [{"name": "nginx"}]}}},
                "metadata": {"finalizers": ["b"]}}),
        )
        .unwrap();
        let c = &t["spec"]["template"]["spec"]["containers"];
        assert_eq!(c.as_array().unwrap().len(), 1, "sidecar deleted");
        assert_eq!(c[0]["image"], "nginx:1.27");
        assert_eq!(
            c[0]["ports"][0]["containerPort"], 80,
            "untouched fields kept"
        );
        assert_eq!(
            c[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
        );
        assert_eq!(t["spec"]["template"]["metadata"]["labels"]["arch"], "amd64");
        assert_eq!(
            t["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
            "2026-12-01T12:33:22Z"
        );
        assert_eq!(t["metadata"]["finalizers"], json!(["a", "b"]));
        assert!(t["spec"]["template"]["spec"]
            .get("$setElementOrder/containers")
            .is_none());
    }

    #[test]
    fn strategic_replace_and_atomic_lists() {
        let mut t = deployment();
        strategic(
            &mut t,
            &json!({"spec": {"template": {"spec": {
                "volumes": [{"name": "new", "emptyDir": {}}, {"$patch": "replace"}],
                "containers": [{"name": "nginx", "args": ["-g", "daemon off;"]}]}}},
                "$deleteFromPrimitiveList/x": [1]}),
        )
        .unwrap();
        let s = &t["spec"]["template"]["spec"];
        assert_eq!(s["volumes"], json!([{"name": "new", "emptyDir": {}}]));
        assert_eq!(s["containers"][0]["args"], json!(["-g", "daemon off;"]));
        let mut t = json!({"spec": {"ports": [{"port": 80, "targetPort": 80}]}});
        strategic(
            &mut t,
            &json!({"spec": {"ports": [{"port": 80, "nodePort": 30080}]}}),
        )
        .unwrap();
        assert_eq!(
            t["spec"]["ports"],
            json!([{"port": 80, "targetPort": 80, "nodePort": 30080}])
        );
        assert!(strategic(&mut t, &json!([1])).is_err());
    }
}
