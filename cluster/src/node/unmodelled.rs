//! What of a pod's spec this node agent does not model. A kubelet would act on each of these;
//! ignoring one would report a pod running as asked when it is not, so the pod is refused
//! instead: its containers stay waiting (CreateContainerConfigError) with the field named, and
//! an Event says the same.

use serde_json::Value;

use super::probes::ContainerProbes;

/// Fields of a container (regular or init) that change how it runs, none of them modelled.
const CONTAINER_FIELDS: [(&str, &str); 3] = [
    ("lifecycle", "postStart and preStop hooks are not run"),
    (
        "securityContext",
        "every container runs as root with the agent's capabilities",
    ),
    ("volumeDevices", "block devices are not attached"),
];

/// Pod-level fields, refused when set to anything but their default.
const POD_FLAGS: [(&str, &str); 3] = [
    (
        "hostNetwork",
        "pods always get a network namespace of their own",
    ),
    (
        "hostPID",
        "containers always get a PID namespace of their own",
    ),
    (
        "hostIPC",
        "containers share the node's IPC namespace either way",
    ),
];

/// Why the pod cannot run here as its spec says, naming the first field; None when it can.
pub fn refusal(pod: &Value) -> Option<String> {
    let spec = pod.get("spec")?;
    for (field, why) in POD_FLAGS {
        if spec.get(field).and_then(Value::as_bool) == Some(true) {
            return Some(format!(
                "spec.{field} is not modelled by this node agent ({why})"
            ));
        }
    }
    if spec
        .get("securityContext")
        .and_then(Value::as_object)
        .is_some_and(|o| !o.is_empty())
    {
        return Some(
            "spec.securityContext is not modelled by this node agent (every container runs as root with the agent's capabilities)".into(),
        );
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("spec.{list}[{i}]");
            if let Some(why) = container_refusal(c, list == "initContainers") {
                return Some(format!("{at}.{why}"));
            }
        }
    }
    None
}

fn container_refusal(c: &Value, init: bool) -> Option<String> {
    for (field, why) in CONTAINER_FIELDS {
        let set = match c.get(field) {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            return Some(format!(
                "{field} is not modelled by this node agent ({why})"
            ));
        }
    }
    if init && c.get("restartPolicy").is_some_and(|v| !v.is_null()) {
        return Some(
            "restartPolicy is not modelled by this node agent (sidecar init containers are not run)"
                .into(),
        );
    }
    if init {
        for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
            if c.get(probe).is_some_and(|v| !v.is_null()) {
                return Some(format!("{probe}: an init container may not have one"));
            }
        }
        return None;
    }
    ContainerProbes::of(c).err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_is_not_modelled_is_named_and_the_rest_runs() {
        let plain = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}}}],
            "initContainers": [{"name": "setup", "image": "nginx"}]}});
        assert_eq!(refusal(&plain), None);
        let hooks = json!({"spec": {"containers": [{"name": "a"},
            {"name": "b", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}]}});
        assert_eq!(
            refusal(&hooks).unwrap(),
            "spec.containers[1].lifecycle is not modelled by this node agent (postStart and preStop hooks are not run)"
        );
        let grpc = json!({"spec": {"containers": [{"name": "a", "livenessProbe": {"grpc": {"port": 1}}}]}});
        assert_eq!(
            refusal(&grpc).unwrap(),
            "spec.containers[0].livenessProbe.grpc is not modelled by this node agent"
        );
        let sidecar = json!({"spec": {"containers": [{"name": "a"}],
            "initContainers": [{"name": "s", "restartPolicy": "Always"}]}});
        assert!(refusal(&sidecar)
            .unwrap()
            .starts_with("spec.initContainers[0].restartPolicy"));
        let host = json!({"spec": {"hostNetwork": true, "containers": [{"name": "a"}]}});
        assert!(refusal(&host).unwrap().starts_with("spec.hostNetwork"));
        let empty_context = json!({"spec": {"securityContext": {}, "containers": [{"name": "a"}]}});
        assert_eq!(refusal(&empty_context), None);
    }
}
