//! What the real API server does to an object between decoding and storing it: defaults,
//! validation (the checks archbench's users can hit), and allocation of Service addresses.
//! Runs under the store lock, so it must not read the store.

use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::resources::{self, Res};
use crate::selector::LabelSelector;
use crate::state::Shared;

/// Prepares `new` for storing (old: the stored object on update).
pub fn admit(sh: &Shared, res: Res, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    validate_name(res, &name)?;
    if res.is(&resources::NAMESPACES) {
        namespace(&name, old, new);
    } else if res.is(&resources::PODS) {
        pod(res, &name, old, new)?;
    } else if res.is(&resources::DEPLOYMENTS) {
        deployment(res, &name, old, new)?;
    } else if res.is(&resources::SERVICES) {
        service(sh, res, &name, old, new)?;
    } else if res.is(&resources::JOBS) {
        job(res, &name, old, new)?;
    } else if res.is(&resources::SECRETS) && new.get("type").is_none() {
        new["type"] = json!("Opaque");
    }
    Ok(())
}

fn invalid(res: Res, name: &str, field: &str, msg: impl Into<String>) -> ApiError {
    ApiError::invalid(res, name, &[(field.to_string(), msg.into())])
}

/// RFC 1123 subdomain (label for namespaces and services).
fn validate_name(res: Res, name: &str) -> ApiResult<()> {
    let label_only = res.is(&resources::NAMESPACES) || res.is(&resources::SERVICES);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let ok = if label_only {
        label_ok(name)
    } else {
        name.len() <= 253 && name.split('.').all(label_ok)
    };
    if ok {
        return Ok(());
    }
    let msg = if label_only {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case \
             alphanumeric characters or '-', and must start and end with an alphanumeric \
             character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    } else {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower \
             case alphanumeric characters, '-' or '.', and must start and end with an \
             alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    };
    Err(invalid(res, name, "metadata.name", msg))
}

fn namespace(name: &str, old: Option<&Value>, new: &mut Value) {
    new["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    if old.is_none() {
        new["spec"] = json!({"finalizers": ["kubernetes"]});
        new["status"] = json!({"phase": "Active"});
    }
}

fn set_default(v: &mut Value, key: &str, default: Value) {
    if v.get(key).is_none_or(Value::is_null) {
        v[key] = default;
    }
}

/// The container defaults a real server adds (so re-applies see no spec change).
fn container_defaults(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let tagged = image
        .rsplit('/')
        .next()
        .is_some_and(|last| last.contains(':') || last.contains('@'));
    let policy = if !tagged || image.ends_with(":latest") {
        "Always"
    } else {
        "IfNotPresent"
    };
    set_default(c, "imagePullPolicy", json!(policy));
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

fn pod_spec_defaults(spec: &mut Value, restart_policy: &str) {
    set_default(spec, "restartPolicy", json!(restart_policy));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                container_defaults(c);
            }
        }
    }
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vols {
            if let Some(cm) = v.get_mut("configMap") {
                set_default(cm, "defaultMode", json!(420));
            }
        }
    }
}

fn validate_pod_spec(res: Res, name: &str, spec: &Value, prefix: &str) -> ApiResult<()> {
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    let Some(containers) = containers else {
        return Err(invalid(
            res,
            name,
            &format!("{prefix}.containers"),
            "Required value",
        ));
    };
    let mut causes = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        for field in ["name", "image"] {
            if c.get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push((
                    format!("{prefix}.containers[{i}].{field}"),
                    "Required value".to_string(),
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(res, name, &causes))
    }
}

fn pod(res: Res, name: &str, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
    if !new.get("spec").is_some_and(Value::is_object) {
        return Err(invalid(res, name, "spec.containers", "Required value"));
    }
    validate_pod_spec(res, name, &new["spec"], "spec")?;
    pod_spec_defaults(&mut new["spec"], "Always");
    set_default(&mut new["spec"], "serviceAccountName", json!("default"));
    set_default(&mut new["spec"], "enableServiceLinks", json!(true));
    set_default(&mut new["spec"], "priority", json!(0));
    if old.is_none() {
        new["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    Ok(())
}

fn template_checks(res: Res, name: &str, new: &mut Value, restart: &str) -> ApiResult<()> {
    if !new
        .pointer("/spec/template/spec")
        .is_some_and(Value::is_object)
    {
        return Err(invalid(
            res,
            name,
            "spec.template.spec.containers",
            "Required value",
        ));
    }
    validate_pod_spec(
        res,
        name,
        &new["spec"]["template"]["spec"],
        "spec.template.spec",
    )?;
    pod_spec_defaults(&mut new["spec"]["template"]["spec"], restart);
    Ok(())
}

fn go_map(labels: Option<&Value>) -> String {
    let pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k:?}:{v}")).collect())
        .unwrap_or_default();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

fn deployment(res: Res, name: &str, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
    let Some(selector) = new.pointer("/spec/selector").cloned() else {
        return Err(invalid(res, name, "spec.selector", "Required value"));
    };
    template_checks(res, name, new, "Always")?;
    let labels = new.pointer("/spec/template/metadata/labels");
    let sel = LabelSelector::from_object(&selector);
    if sel.is_empty() {
        return Err(invalid(
            res,
            name,
            "spec.selector",
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
        ));
    }
    if !sel.matches(labels) {
        return Err(invalid(
            res,
            name,
            "spec.template.metadata.labels",
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_map(labels)
            ),
        ));
    }
    if let Some(old) = old {
        if old.pointer("/spec/selector") != Some(&selector) {
            return Err(invalid(
                res,
                name,
                "spec.selector",
                "Invalid value: field is immutable",
            ));
        }
    }
    let spec = &mut new["spec"];
    set_default(spec, "replicas", json!(1));
    if spec["replicas"].as_i64().is_some_and(|r| r < 0) {
        return Err(invalid(
            res,
            name,
            "spec.replicas",
            format!(
                "Invalid value: {}: must be greater than or equal to 0",
                spec["replicas"]
            ),
        ));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    );
    if spec["strategy"]["type"] == "RollingUpdate" {
        set_default(
            &mut spec["strategy"],
            "rollingUpdate",
            json!({"maxSurge": "25%", "maxUnavailable": "25%"}),
        );
    }
    if old.is_none() {
        new["status"] = json!({});
    }
    Ok(())
}

fn job(res: Res, name: &str, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
    template_checks(res, name, new, "")?;
    let rp = new
        .pointer("/spec/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if rp != "Never" && rp != "OnFailure" {
        let shown = if rp.is_empty() { "Always" } else { &rp };
        return Err(invalid(
            res,
            name,
            "spec.template.spec.restartPolicy",
            format!("Unsupported value: \"{shown}\": supported values: \"OnFailure\", \"Never\""),
        ));
    }
    let indexed = new.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
    if indexed && new.pointer("/spec/completions").is_none_or(Value::is_null) {
        return Err(invalid(
            res,
            name,
            "spec.completions",
            "Required value: when completion mode is Indexed",
        ));
    }
    let spec = &mut new["spec"];
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    if old.is_none() {
        // the controller-uid selector the real server generates
        let uid = crate::ids::uid();
        new["metadata"]["uid"] = json!(uid);
        let labels = json!({
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        });
        if new.pointer("/spec/selector").is_none() {
            new["spec"]["selector"] =
                json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
            for (k, v) in labels.as_object().into_iter().flatten() {
                new["spec"]["template"]["metadata"]["labels"][k] = v.clone();
            }
        }
        new["status"] = json!({});
    }
    Ok(())
}

fn service(
    sh: &Shared,
    res: Res,
    name: &str,
    old: Option<&Value>,
    new: &mut Value,
) -> ApiResult<()> {
    if !new.get("spec").is_some_and(Value::is_object) {
        new["spec"] = json!({});
    }
    let spec = &mut new["spec"];
    set_default(spec, "type", json!("ClusterIP"));
    let ty = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&ty.as_str()) {
        return Err(invalid(
            res,
            name,
            "spec.type",
            format!("Unsupported value: \"{ty}\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""),
        ));
    }
    set_default(spec, "sessionAffinity", json!("None"));
    if ty == "ExternalName" {
        return Ok(());
    }
    let has_ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty());
    if !has_ports && spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        return Err(invalid(res, name, "spec.ports", "Required value"));
    }
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    // allocated values survive updates that leave them out, as on a real server
    let old_spec = old.and_then(|o| o.get("spec"));
    if spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let ip = old_spec
            .and_then(|s| s.get("clusterIP"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| sh.alloc.cluster_ip().to_string());
        spec["clusterIP"] = json!(ip);
    } else if let Some(old_ip) = old_spec.and_then(|s| s.get("clusterIP")) {
        if spec.get("clusterIP") != Some(old_ip) {
            return Err(invalid(
                res,
                name,
                "spec.clusterIPs[0]",
                "Invalid value: field is immutable",
            ));
        }
    }
    let ip = spec["clusterIP"].clone();
    spec["clusterIPs"] = json!([ip]);
    let node_ports = ty == "NodePort" || ty == "LoadBalancer";
    if node_ports {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    let old_ports: Vec<Value> = old_spec
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut causes = Vec::new();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for (i, p) in ports.iter_mut().enumerate() {
            set_default(p, "protocol", json!("TCP"));
            if p.get("targetPort").is_none() {
                p["targetPort"] = p.get("port").cloned().unwrap_or(json!(0));
            }
            if !node_ports {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
                continue;
            }
            let kept = old_ports
                .iter()
                .find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"))
                .and_then(|o| o.get("nodePort"))
                .and_then(Value::as_u64);
            let wanted = p.get("nodePort").and_then(Value::as_u64);
            let port = match (wanted, kept) {
                (Some(w), Some(k)) if w == k => Some(k as u16),
                (None, Some(k)) => Some(k as u16),
                (w, _) => {
                    let got = sh.alloc.node_port(w.map(|w| w as u16));
                    if got.is_none() {
                        causes.push((
                            format!("spec.ports[{i}].nodePort"),
                            format!(
                                "Invalid value: {}: provided port is already allocated",
                                w.unwrap_or(0)
                            ),
                        ));
                    }
                    got
                }
            };
            if let Some(port) = port {
                p["nodePort"] = json!(port);
            }
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(res, name, &causes));
    }
    if old.is_none() {
        new["status"] = json!({"loadBalancer": {}});
    }
    Ok(())
}
