//! Request-level behaviour of the stand-in over raw HTTP: discovery, the Status errors clients
//! build their messages from, patches, Tables, watches, and that pod processes end with the
//! cluster.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use archbench_standin::{Cluster, Options};
use serde_json::{json, Value};

/// One HTTP/1.1 exchange (Connection: close): status, content type, body (chunks joined).
fn call(
    cluster: &Cluster,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let addr = cluster.url().trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).expect("the API server listens");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("request sent");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let (mut ctype, mut chunked) = (String::new(), false);
    loop {
        line.clear();
        r.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("a header");
        match k.to_ascii_lowercase().as_str() {
            "content-type" => ctype = v.trim().to_string(),
            "transfer-encoding" => chunked = v.contains("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).expect("chunk size");
            let n = usize::from_str_radix(line.trim(), 16).expect("hex chunk size");
            if n == 0 {
                break;
            }
            let mut chunk = vec![0u8; n + 2];
            r.read_exact(&mut chunk).expect("chunk");
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).expect("body");
    }
    (status, ctype, String::from_utf8(body).expect("utf-8 body"))
}

fn json_call(
    cluster: &Cluster,
    method: &str,
    path: &str,
    ctype: &str,
    body: Value,
) -> (u16, Value) {
    let (code, _, text) = call(
        cluster,
        method,
        path,
        &[("Content-Type", ctype)],
        &body.to_string(),
    );
    (
        code,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON from {method} {path}: {text}")),
    )
}

fn start() -> Cluster {
    Cluster::start(Options::default()).expect("the stand-in starts")
}

#[test]
fn discovery_legacy_and_aggregated() {
    let c = start();
    let (code, _, body) = call(&c, "GET", "/version?timeout=5s", &[], "");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        (code, v["minor"].as_str(), v["gitVersion"].as_str()),
        (200, Some("32"), Some("v1.32.4"))
    );

    let (_, ctype, body) = call(&c, "GET", "/api", &[], "");
    assert_eq!(ctype, "application/json");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("JSON")["kind"],
        "APIVersions"
    );
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let (_, ctype, body) = call(&c, "GET", "/apis", &[("Accept", accept)], "");
    assert_eq!(
        ctype,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let agg: Value = serde_json::from_str(&body).expect("JSON");
    let apps = agg["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .expect("apps");
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "deployments")
        .expect("deployments");
    assert!(deploy["subresources"]
        .as_array()
        .expect("subresources")
        .iter()
        .any(|s| s["subresource"] == "scale"));

    let (_, _, body) = call(&c, "GET", "/apis/apps/v1", &[], "");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    let names: Vec<&str> = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"deployments")
            && names.contains(&"deployments/status")
            && names.contains(&"deployments/scale"),
        "{names:?}"
    );
    let (_, _, body) = call(&c, "GET", "/apis/metrics.k8s.io/v1beta1", &[], "");
    assert!(
        body.contains("\"PodMetrics\"") && body.contains("\"NodeMetrics\""),
        "{body}"
    );

    let legacy = Cluster::start(Options {
        aggregated_discovery: false,
        ..Options::default()
    })
    .expect("starts");
    let (_, ctype, _) = call(&legacy, "GET", "/apis", &[("Accept", accept)], "");
    assert_eq!(ctype, "application/json", "legacy only");

    let (code, _, body) = call(&c, "GET", "/openapi/v3", &[], "");
    assert_eq!(code, 200);
    let root: Value = serde_json::from_str(&body).expect("JSON");
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 document");
    let (_, _, body) = call(&c, "GET", url, &[], "");
    assert!(
        body.contains("fieldValidation") && body.contains("x-kubernetes-group-version-kind"),
        "{body}"
    );
}

#[test]
fn errors_are_status_objects() {
    let c = start();
    let status = |v: &Value| {
        (
            v["kind"].as_str().map(str::to_string),
            v["reason"].as_str().map(str::to_string),
            v["message"].as_str().map(str::to_string),
        )
    };

    let (code, _, body) = call(&c, "GET", "/api/v1/namespaces/default/pods/nope", &[], "");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        (code, status(&v)),
        (
            404,
            (
                Some("Status".into()),
                Some("NotFound".into()),
                Some("pods \"nope\" not found".into())
            )
        )
    );
    assert_eq!(v["details"], json!({"name": "nope", "kind": "pods"}));

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let (code, created) = json_call(
        &c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        cm.clone(),
    );
    assert_eq!(code, 201);
    let (code, v) = json_call(
        &c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        cm,
    );
    assert_eq!(
        (code, status(&v).2.as_deref()),
        (409, Some("configmaps \"c\" already exists"))
    );
    assert_eq!(v["reason"], "AlreadyExists");

    let mut stale = created.clone();
    stale["data"]["a"] = json!("2");
    let (code, _) = json_call(
        &c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        stale.clone(),
    );
    assert_eq!(
        code, 200,
        "the first update with the current resourceVersion"
    );
    let (code, v) = json_call(
        &c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        stale,
    );
    assert_eq!((code, v["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let (code, _, body) = call(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        "k8s\0",
    );
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        (code, v["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{v}"
    );

    let (code, _, _) = call(
        &c,
        "GET",
        "/api/v1/namespaces",
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        "",
    );
    assert_eq!(code, 406);

    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "y"}},
                 "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let (code, v) = json_call(
        &c,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        "application/json",
        bad,
    );
    assert_eq!((code, v["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        v["message"],
        "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`"
    );

    let (code, v) = json_call(
        &c,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        "application/json",
        json!({"metadata": {"name": "x"}}),
    );
    assert_eq!(
        (code, v["message"].as_str()),
        (404, Some("namespaces \"nowhere\" not found"))
    );

    c.faults().forbid("create", "pods/exec");
    let (code, _, body) = call(
        &c,
        "GET",
        "/api/v1/namespaces/default/pods/p/exec?command=true",
        &[],
        "",
    );
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(code, 403);
    assert_eq!(
        v["message"],
        "pods \"p\" is forbidden: User \"stand-in\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"default\""
    );
    c.faults().forbid("list", "nodes");
    let (code, _, body) = call(&c, "GET", "/api/v1/nodes", &[], "");
    assert_eq!(code, 403);
    assert!(body.contains("nodes is forbidden: User \\\"stand-in\\\" cannot list resource \\\"nodes\\\" in API group \\\"\\\" at the cluster scope"), "{body}");
}

#[test]
fn patches_and_apply() {
    let c = start();
    let base = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [
                     {"name": "a", "image": "nginx:1.25", "env": [{"name": "E1", "value": "1"}]},
                     {"name": "b", "image": "no-such-image"}]}}}});
    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    let (code, d) = json_call(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=archbench"),
        "application/apply-patch+yaml",
        base.clone(),
    );
    assert_eq!(code, 201, "apply creates: {d}");
    let gen = d["metadata"]["generation"].clone();
    let (code, again) = json_call(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=archbench"),
        "application/apply-patch+yaml",
        base.clone(),
    );
    assert_eq!(code, 200);
    // controllers may have written status meanwhile; compare with what is stored now
    let (_, now) = json_call(&c, "GET", path, "application/json", json!({}));
    assert_eq!(
        again["metadata"]["resourceVersion"],
        now["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["generation"], gen,
        "no spec change, same generation"
    );

    let smp = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "a", "env": [{"name": "E2", "value": "2"}]}, {"name": "b", "$patch": "delete"}]}}}});
    let (code, d) = json_call(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=kubectl-edit"),
        "application/strategic-merge-patch+json",
        smp,
    );
    assert_eq!(code, 200, "{d}");
    let cs = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(cs.as_array().map(Vec::len), Some(1), "{cs}");
    assert_eq!(
        cs[0]["env"],
        json!([{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}])
    );
    assert_eq!(d["metadata"]["generation"], 2);

    let (code, d) = json_call(
        &c,
        "PATCH",
        path,
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"l": "v"}}}),
    );
    assert_eq!(
        (code, d["metadata"]["labels"]["l"].as_str()),
        (200, Some("v"))
    );
    let (code, d) = json_call(
        &c,
        "PATCH",
        path,
        "application/json-patch+json",
        json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
    );
    assert_eq!((code, d["spec"]["replicas"].as_i64()), (200, Some(3)));

    // archbench's apply now conflicts with the other managers' changes, unless forced
    let (code, v) = json_call(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=archbench"),
        "application/apply-patch+yaml",
        base.clone(),
    );
    assert_eq!((code, v["reason"].as_str()), (409, Some("Conflict")), "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Apply failed with")),
        "{v}"
    );
    let (code, d) = json_call(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=archbench&force=true"),
        "application/apply-patch+yaml",
        base,
    );
    assert_eq!(
        (code, d["spec"]["replicas"].as_i64()),
        (200, Some(1)),
        "{d}"
    );
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"archbench"), "{managers:?}");

    let (code, _, body) = call(
        &c,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments",
        &[(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
        "",
    );
    let t: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!((code, t["kind"].as_str()), (200, Some("Table")));
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        &cols[..5],
        ["Name", "Ready", "Up-to-date", "Available", "Age"]
    );
}

#[test]
fn watches_stream_and_time_out() {
    let c = start();
    let (_, list) = json_call(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({}),
    );
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list version")
        .to_string();
    let (code, _) = json_call(
        &c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"metadata": {"name": "w", "labels": {"x": "1"}}}),
    );
    assert_eq!(code, 201);
    // from the list's version, labels filtered, ends after timeoutSeconds
    let (code, _, body) = call(&c, "GET", &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&labelSelector=x%3D1&timeoutSeconds=1"), &[], "");
    assert_eq!(code, 200);
    let events: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    assert_eq!(events.len(), 1, "{body}");
    assert_eq!(
        (
            events[0]["type"].as_str(),
            events[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("w"))
    );
    // without a version: the current state first
    let (_, _, body) = call(&c, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dw", &[], "");
    assert_eq!(body.lines().count(), 1, "{body}");
}

#[test]
fn pod_processes_end_with_the_cluster() {
    if !common::require_nginx_pods() {
        return;
    }
    let c = Cluster::start(Options::default()).expect("starts");
    let dir = c.dir().to_path_buf();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}]}});
    let (code, _) = json_call(
        &c,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        pod,
    );
    assert_eq!(code, 201);
    // the stock nginx.conf runs from a rewritten copy in the cluster's dir: find its processes
    let ours = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|pid| {
                        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                            String::from_utf8_lossy(&c).contains(dir.to_str().unwrap_or("?"))
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, pod) = common::wait_for("the pod to be Ready", Duration::from_secs(30), || {
        let (_, p) = json_call(
            &c,
            "GET",
            "/api/v1/namespaces/default/pods/p",
            "application/json",
            json!({}),
        );
        let ready = p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        (ready && !ours().is_empty()).then_some(((), p))
    });
    let ip = pod["status"]["podIP"].as_str().expect("pod IP").to_string();
    assert!(
        common::http_get(&format!("{ip}:80"), "/").is_ok(),
        "the stock config serves on the pod IP"
    );
    let pids = processes_of(&dir);
    assert!(pids.len() >= 2, "master and workers: {pids:?}");
    drop(c);
    for pid in pids {
        let alive =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "process {pid} outlived its cluster");
    }
    assert!(!dir.exists(), "the cluster's temp dir is removed");
    assert!(
        TcpStream::connect((ip.as_str(), 80)).is_err(),
        "nothing listens on the pod IP any more"
    );
}

fn live_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .is_ok_and(|s| !s.contains(") Z "))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Processes of pods in the cluster whose temp dir is `dir`: nginx masters run from a copy
/// there, and their descendants (the workers) with them.
fn processes_of(dir: &std::path::Path) -> Vec<u32> {
    let pids = live_pids();
    let ppid = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let mut ours: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(dir.to_str().unwrap_or("?")))
        })
        .collect();
    loop {
        let more: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|p| !ours.contains(p) && ppid(*p).is_some_and(|pp| ours.contains(&pp)))
            .collect();
        if more.is_empty() {
            return ours;
        }
        ours.extend(more);
    }
}

#[test]
fn pod_processes_die_with_a_killed_test_process() {
    if !common::require_nginx_pods() {
        return;
    }
    /// The binary, killed (SIGKILL, as a crashing test process would be) however the test ends.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut bin = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_archbench-standin"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the stand-in binary starts"),
    );
    let mut out = BufReader::new(bin.0.stdout.take().expect("stdout"));
    let (mut url, mut kubeconfig) = (String::new(), String::new());
    let mut line = String::new();
    while kubeconfig.is_empty() {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("the binary's output") > 0,
            "the binary printed no kubeconfig"
        );
        if let Some(u) = line.trim().strip_prefix("stand-in cluster at ") {
            url = u.to_string();
        }
        if let Some(rest) = line.trim().strip_prefix("export KUBECONFIG=") {
            kubeconfig = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
    }
    let dir = std::path::Path::new(&kubeconfig)
        .parent()
        .expect("the cluster dir")
        .to_path_buf();
    let addr = url.trim_start_matches("http://").to_string();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}})
    .to_string();
    let mut s = TcpStream::connect(&addr).expect("the API answers");
    write!(s, "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{pod}", pod.len())
        .expect("sent");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    common::wait_for("the pod's nginx", Duration::from_secs(30), || {
        (processes_of(&dir).len() >= 2).then_some(())
    });
    drop(bin);
    common::wait_for(
        "the pod's processes to die with their parent",
        Duration::from_secs(10),
        || processes_of(&dir).is_empty().then_some(()),
    );
    // what the killed cluster left is swept by the next one
    assert!(dir.exists(), "nothing cleaned the dir yet");
    let _next = start();
    assert!(
        !dir.exists(),
        "the next cluster sweeps a dead cluster's temp dir"
    );
}
