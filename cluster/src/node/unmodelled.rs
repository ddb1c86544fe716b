//! What of a pod's spec this node agent does not model. A kubelet would act on each of these;
//! ignoring one would report a pod running as asked when it is not, so the pod is refused
//! instead: its containers stay waiting (CreateContainerConfigError) with the field named, and
//! an Event says the same.

use k8s_openapi::api::core::v1::{
    Container, Lifecycle, Pod, PodSecurityContext, PodSpec, SecurityContext,
};

use super::probes::ContainerProbes;

/// Whether a container sets a field (to anything but empty).
type IsSet = fn(&Container) -> bool;

/// Fields of a container (regular or init) that change how it runs, none of them modelled.
const CONTAINER_FIELDS: [(&str, IsSet, &str); 3] = [
    (
        "lifecycle",
        |c| {
            c.lifecycle
                .as_ref()
                .is_some_and(|l| *l != Lifecycle::default())
        },
        "postStart and preStop hooks are not run",
    ),
    (
        "securityContext",
        |c| {
            c.security_context
                .as_ref()
                .is_some_and(|s| *s != SecurityContext::default())
        },
        "every container runs as root with the agent's capabilities",
    ),
    (
        "volumeDevices",
        |c| c.volume_devices.as_ref().is_some_and(|v| !v.is_empty()),
        "block devices are not attached",
    ),
];

/// A pod-level flag's value.
type Flag = fn(&PodSpec) -> Option<bool>;

/// Pod-level fields, refused when set to anything but their default.
const POD_FLAGS: [(&str, Flag, &str); 3] = [
    (
        "hostNetwork",
        |s| s.host_network,
        "pods always get a network namespace of their own",
    ),
    (
        "hostPID",
        |s| s.host_pid,
        "containers always get a PID namespace of their own",
    ),
    (
        "hostIPC",
        |s| s.host_ipc,
        "containers share the node's IPC namespace either way",
    ),
];

/// Why the pod cannot run here as its spec says, naming the first field; None when it can.
pub fn refusal(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    for (field, value, why) in POD_FLAGS {
        if value(spec) == Some(true) {
            return Some(format!(
                "spec.{field} is not modelled by this node agent ({why})"
            ));
        }
    }
    if spec
        .security_context
        .as_ref()
        .is_some_and(|s| *s != PodSecurityContext::default())
    {
        return Some(
            "spec.securityContext is not modelled by this node agent (every container runs as root with the agent's capabilities)".into(),
        );
    }
    let lists = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let at = format!("spec.{list}[{i}]");
            if let Some(why) = container_refusal(c, list == "initContainers") {
                return Some(format!("{at}.{why}"));
            }
        }
    }
    None
}

fn container_refusal(c: &Container, init: bool) -> Option<String> {
    for (field, set, why) in CONTAINER_FIELDS {
        if set(c) {
            return Some(format!(
                "{field} is not modelled by this node agent ({why})"
            ));
        }
    }
    if init && c.restart_policy.is_some() {
        return Some(
            "restartPolicy is not modelled by this node agent (sidecar init containers are not run)"
                .into(),
        );
    }
    if init {
        let probes = [
            ("readinessProbe", c.readiness_probe.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (probe, set) in probes {
            if set {
                return Some(format!("{probe}: an init container may not have one"));
            }
        }
        return None;
    }
    ContainerProbes::of(c).err()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    fn refusal(pod: Value) -> Option<String> {
        super::refusal(&serde_json::from_value(pod).unwrap())
    }

    #[test]
    fn what_is_not_modelled_is_named_and_the_rest_runs() {
        let plain = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}}}],
            "initContainers": [{"name": "setup", "image": "nginx"}]}});
        assert_eq!(refusal(plain), None);
        let hooks = json!({"spec": {"containers": [{"name": "a"},
            {"name": "b", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}]}});
        assert_eq!(
            refusal(hooks).unwrap(),
            "spec.containers[1].lifecycle is not modelled by this node agent (postStart and preStop hooks are not run)"
        );
        let grpc = json!({"spec": {"containers": [{"name": "a", "livenessProbe": {"grpc": {"port": 1}}}]}});
        assert_eq!(
            refusal(grpc).unwrap(),
            "spec.containers[0].livenessProbe.grpc is not modelled by this node agent"
        );
        let sidecar = json!({"spec": {"containers": [{"name": "a"}],
            "initContainers": [{"name": "s", "restartPolicy": "Always"}]}});
        assert!(refusal(sidecar)
            .unwrap()
            .starts_with("spec.initContainers[0].restartPolicy"));
        let host = json!({"spec": {"hostNetwork": true, "containers": [{"name": "a"}]}});
        assert!(refusal(host).unwrap().starts_with("spec.hostNetwork"));
        let empty_context = json!({"spec": {"securityContext": {}, "containers": [{"name": "a"}]}});
        assert_eq!(refusal(empty_context), None);
        let defaults = json!({"spec": {"hostNetwork": false, "hostPID": false,
            "containers": [{"name": "a", "lifecycle": {}, "securityContext": {}, "volumeDevices": []}]}});
        assert_eq!(refusal(defaults), None);
        let root = json!({"spec": {"containers": [{"name": "a",
            "securityContext": {"runAsUser": 1000}}]}});
        assert!(refusal(root)
            .unwrap()
            .starts_with("spec.containers[0].securityContext is not modelled"));
        let pod_root = json!({"spec": {"securityContext": {"runAsUser": 1000},
            "containers": [{"name": "a"}]}});
        assert!(refusal(pod_root)
            .unwrap()
            .starts_with("spec.securityContext"));
        let device = json!({"spec": {"containers": [{"name": "a",
            "volumeDevices": [{"name": "d", "devicePath": "/dev/xvda"}]}]}});
        assert!(refusal(device)
            .unwrap()
            .starts_with("spec.containers[0].volumeDevices"));
        let probed_init = json!({"spec": {"containers": [{"name": "a"}],
            "initContainers": [{"name": "s", "startupProbe": {"tcpSocket": {"port": 80}}}]}});
        assert_eq!(
            refusal(probed_init).unwrap(),
            "spec.initContainers[0].startupProbe: an init container may not have one"
        );
        assert_eq!(refusal(json!({"metadata": {"name": "no-spec"}})), None);
    }
}
