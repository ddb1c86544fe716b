//! Fidelity of the stand-in, proven with the real kubectl (1.32, picked by the dispatcher from
//! the server's /version): the guide's workflow from apply to delete, each step checked.

mod common;

use std::time::Duration;

use archbench_standin::{Cluster, Options};
use common::{http_get, manifest, wait_for, Kubectl, NGINX_CONF};
use serde_json::Value;

fn pods(k: &Kubectl) -> Vec<Value> {
    let out = k.ok(&["-n", "nginx", "get", "pods", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).expect("get pods -o json is JSON");
    assert_eq!(list["kind"], "List", "kubectl wraps items in a List: {out}");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn fidelity(aggregated_discovery: bool) {
    if !common::require_kubectl() || !common::require_nginx_pods() {
        return;
    }
    let cluster = Cluster::start(Options {
        aggregated_discovery,
        ..Options::default()
    })
    .expect("the stand-in starts");
    let k = Kubectl::new(cluster.kubeconfig());
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest_path = dir.path().join("nginx.yaml");
    std::fs::write(&manifest_path, manifest()).expect("manifest written");
    let manifest_arg = manifest_path.to_str().expect("utf-8 path");

    // the dispatcher ran the kubectl of the server's minor version
    let v = k.ok(&["version"]);
    assert!(v.contains("Server Version: v1.32.4"), "{v}");
    assert!(v.contains("Client Version: v1.32"), "{v}");

    let applied = k.ok(&["apply", "--server-side", "-f", manifest_arg]);
    for what in [
        "namespace/nginx",
        "configmap/nginx-config",
        "deployment.apps/nginx-intel-deployment",
        "service/nginx-intel-svc",
    ] {
        assert!(
            applied.contains(&format!("{what} serverside-applied")),
            "{applied}"
        );
    }

    let rolled = k.ok(&[
        "-n",
        "nginx",
        "rollout",
        "status",
        "deploy/nginx-intel-deployment",
        "--timeout=60s",
    ]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");

    let items = pods(&k);
    assert_eq!(items.len(), 1, "one replica: {items:?}");
    let pod = &items[0];
    let pod_name = pod["metadata"]["name"]
        .as_str()
        .expect("pod name")
        .to_string();
    assert!(
        pod_name.starts_with("nginx-intel-deployment-"),
        "{pod_name}"
    );
    assert!(
        pod["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36),
        "{pod}"
    );
    assert!(
        pod["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok()),
        "{pod}"
    );
    let ip = pod["status"]["podIP"].as_str().expect("podIP");
    assert!(ip.starts_with("127.1."), "pod IP {ip}");
    assert_eq!(
        pod["spec"]["nodeName"], "aks-intel-0",
        "scheduled by nodeSelector"
    );
    assert!(is_ready(pod), "Ready: {pod}");

    let table = k.ok(&["-n", "nginx", "get", "pods"]);
    let header = table.lines().next().unwrap_or_default();
    for col in ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] {
        assert!(header.contains(col), "column {col} in {table}");
    }
    let row = table
        .lines()
        .find(|l| l.starts_with(&pod_name))
        .unwrap_or_default();
    assert!(row.contains("1/1") && row.contains("Running"), "{table}");

    // the Service's load-balancer address reaches nginx, which names the pod
    let lb = wait_for(
        "the load balancer's address",
        Duration::from_secs(30),
        || {
            let ip = k.ok(&[
                "-n",
                "nginx",
                "get",
                "svc",
                "nginx-intel-svc",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ]);
            (!ip.is_empty()).then_some(ip)
        },
    );
    assert!(lb.starts_with("127.3."), "{lb}");
    let (status, body) =
        http_get(&format!("{lb}:80"), "/through-the-lb").expect("HTTP through the load balancer");
    assert_eq!(status, 200, "{body}");
    let json: Value = serde_json::from_str(&body).expect("the tuned config answers JSON");
    assert_eq!(
        json["server"],
        pod_name.as_str(),
        "hostname is the pod name"
    );
    assert_eq!(json["request_uri"], "/through-the-lb");

    let out = k.run(&[
        "-n",
        "nginx",
        "exec",
        &pod_name,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert_eq!(out.stdout, "out\n");
    assert!(out.stderr.starts_with("err\n"), "{out:?}");
    assert!(
        out.stderr.contains("command terminated with exit code 3"),
        "{out:?}"
    );

    let conf = k.ok(&[
        "-n",
        "nginx",
        "exec",
        &pod_name,
        "--",
        "cat",
        "/etc/nginx/nginx.conf",
    ]);
    assert_eq!(conf, NGINX_CONF, "the pod sees the ConfigMap's bytes");
    let host = k.ok(&["-n", "nginx", "exec", &pod_name, "--", "hostname"]);
    assert_eq!(host.trim(), pod_name);

    let echoed = k.run_with_input(
        &["-n", "nginx", "exec", "-i", &pod_name, "--", "cat"],
        Some(b"hi\n"),
    );
    assert_eq!(
        (echoed.code, echoed.stdout.as_str()),
        (Some(0), "hi\n"),
        "{echoed:?}"
    );

    let logs = k.ok(&["-n", "nginx", "logs", &pod_name]);
    assert!(
        logs.contains("\"GET /through-the-lb HTTP/1.0\" 200"),
        "access log in the pod log: {logs}"
    );
    assert_eq!(cluster.pod_log("nginx", &pod_name), logs);

    let top = wait_for("pod metrics", Duration::from_secs(30), || {
        let out = k.run(&["-n", "nginx", "top", "pod"]);
        (out.code == Some(0)).then_some(out.stdout)
    });
    let top_row = top
        .lines()
        .find(|l| l.starts_with(&pod_name))
        .unwrap_or_default();
    assert!(top_row.contains('m') && top_row.contains("Mi"), "{top}");

    k.ok(&[
        "-n",
        "nginx",
        "rollout",
        "restart",
        "deploy/nginx-intel-deployment",
    ]);
    let rolled = k.ok(&[
        "-n",
        "nginx",
        "rollout",
        "status",
        "deploy/nginx-intel-deployment",
        "--timeout=60s",
    ]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    let replaced = wait_for("the old pod to go", Duration::from_secs(60), || {
        let items = pods(&k);
        (items.len() == 1 && items[0]["metadata"]["name"] != pod_name.as_str())
            .then(|| items[0].clone())
    });
    assert!(is_ready(&replaced), "{replaced}");
    assert!(
        replaced
            .pointer("/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
            .is_some(),
        "the restart annotation reached the pod template: {replaced}"
    );

    let deleted = k.ok(&["delete", "-f", manifest_arg]);
    assert!(deleted.contains("namespace \"nginx\" deleted"), "{deleted}");
    wait_for("namespace nginx to go", Duration::from_secs(60), || {
        let out = k.run(&["get", "ns", "nginx"]);
        (out.code != Some(0) && out.stderr.contains("NotFound")).then_some(())
    });
    let namespaces = k.ok(&["get", "ns"]);
    assert!(!namespaces.contains("nginx"), "{namespaces}");
    let requests = cluster.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.method == "PATCH" && r.path.contains("fieldManager=kubectl")),
        "apply went through server-side apply"
    );
    // legacy discovery walks every group-version; aggregated discovery needs none of that
    let walked = requests
        .iter()
        .any(|r| r.path.starts_with("/apis/apps/v1?") || r.path == "/apis/apps/v1");
    assert_eq!(
        walked, !aggregated_discovery,
        "discovery mode seen in the requests"
    );
}

#[test]
fn kubectl_workflow_with_aggregated_discovery() {
    fidelity(true);
}

#[test]
fn kubectl_workflow_with_legacy_discovery() {
    fidelity(false);
}
