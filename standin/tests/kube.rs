//! The stand-in against the real `kube::Client` (kube 5, the version archbench uses):
//! server-side apply, watchers and await_condition, exec with an exit code, logs, the pod
//! proxy, watch expiry, and the failures archbench's users meet.

mod common;

use std::future::Future;
use std::time::Duration;

use archbench_standin::{Cluster, Options};
use futures::{SinkExt, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{
    Api, AttachParams, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

async fn client(cluster: &Cluster) -> Client {
    let kc = Kubeconfig::read_from(cluster.kubeconfig()).expect("the kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("a config from the kubeconfig");
    Client::try_from(config).expect("a client")
}

/// Awaits `f`, failing the test after `secs` with what was awaited.
async fn within<T>(what: &str, secs: u64, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {secs} s waiting for {what}"),
    }
}

/// Polls `f` every 100 ms until it gives a value, failing after `secs`.
async fn poll<T, F: Future<Output = Option<T>>>(
    what: &str,
    secs: u64,
    mut f: impl FnMut() -> F,
) -> T {
    within(what, secs, async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

fn v<T: k8s_openapi::serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).expect("serialisable")
}

fn ready(p: &Pod) -> bool {
    v(p).pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn deployment(name: &str, arch: &str, image: &str, extra_spec: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "nginx", "labels": {"app.kubernetes.io/managed-by": "archbench"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"arch": arch}},
            "template": {"metadata": {"labels": {"app": "nginx-multiarch", "arch": arch}},
                "spec": {"nodeSelector": {"kubernetes.io/arch": arch},
                    "containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80, "name": "http"}],
                        "volumeMounts": [{"name": "nginx-config", "mountPath": "/etc/nginx/nginx.conf", "subPath": "nginx.conf"}]}],
                    "volumes": [{"name": "nginx-config", "configMap": {"name": "nginx-config"}}]}}}});
    if let (Some(spec), Some(extra)) = (d["spec"].as_object_mut(), extra_spec.as_object()) {
        for (k, x) in extra {
            spec.insert(k.clone(), x.clone());
        }
    }
    d
}

async fn namespace_and_config(client: &Client) {
    let pp = PatchParams::apply("archbench").force();
    Api::<Namespace>::all(client.clone())
        .patch(
            "nginx",
            &pp,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nginx"}}),
            ),
        )
        .await
        .expect("namespace applied");
    Api::<ConfigMap>::namespaced(client.clone(), "nginx")
        .patch(
            "nginx-config",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "nginx-config", "namespace": "nginx"},
                "data": {"nginx.conf": common::NGINX_CONF}})),
        )
        .await
        .expect("configmap applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_applies_waits_execs_and_reads_logs() {
    if !common::require_nginx_pods() {
        return;
    }
    let cluster = Cluster::start(Options::default()).expect("the stand-in starts");
    let client = client(&cluster).await;
    namespace_and_config(&client).await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "nginx");
    let pp = PatchParams::apply("archbench").force();
    let d = deployment("nginx-intel-deployment", "amd64", "nginx:latest", json!({}));
    deps.patch("nginx-intel-deployment", &pp, &Patch::Apply(&d))
        .await
        .expect("deployment applied");
    let done = within(
        "the rollout (await_condition)",
        60,
        await_condition(
            deps.clone(),
            "nginx-intel-deployment",
            conditions::is_deployment_completed(),
        ),
    )
    .await
    .expect("the watch works");
    let status = v(&done.expect("the deployment exists"))["status"].clone();
    assert_eq!(
        (
            status["availableReplicas"].as_i64(),
            status["updatedReplicas"].as_i64()
        ),
        (Some(1), Some(1)),
        "{status}"
    );

    // once rolled out nothing writes the Deployment: an identical re-apply changes nothing
    let before = deps.get("nginx-intel-deployment").await.expect("get");
    let again = deps
        .patch("nginx-intel-deployment", &pp, &Patch::Apply(&d))
        .await
        .expect("re-applied");
    assert_eq!(before.resource_version(), again.resource_version());
    assert_eq!(before.metadata.generation, again.metadata.generation);

    let pods: Api<Pod> = Api::namespaced(client.clone(), "nginx");
    let pod = within("a Ready pod through a watcher", 30, async {
        let mut s = watcher(
            pods.clone(),
            watcher::Config::default().labels("arch=amd64"),
        )
        .applied_objects()
        .boxed();
        while let Some(p) = s.try_next().await.expect("the watch stream") {
            if ready(&p) {
                return p;
            }
        }
        panic!("the watch stream ended")
    })
    .await;
    let name = pod.name_any();
    let ip = v(&pod)["status"]["podIP"]
        .as_str()
        .expect("a pod IP")
        .to_string();

    let mut proc = pods
        .exec(
            &name,
            vec![
                "sh",
                "-c",
                "echo hello from $HOSTNAME; echo oops >&2; exit 3",
            ],
            &AttachParams::default().container("nginx"),
        )
        .await
        .expect("exec starts");
    let mut out = String::new();
    let mut stdout = proc.stdout().expect("stdout");
    let status = proc.take_status().expect("a status future");
    within("exec output", 30, stdout.read_to_string(&mut out))
        .await
        .expect("stdout read");
    let status = v(&within("exec status", 30, status).await.expect("a status"));
    assert_eq!(out, format!("hello from {name}\n"));
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "ExitCode", "message": "3"}),
        "{status}"
    );

    let (code, body) =
        common::http_get(&format!("{ip}:80"), "/from-kube").expect("nginx answers on the pod IP");
    assert_eq!(code, 200, "{body}");
    let log = poll("the request in the pod log", 10, || {
        let pods = pods.clone();
        let name = name.clone();
        async move {
            let lp = LogParams {
                container: Some("nginx".into()),
                tail_lines: Some(1),
                ..LogParams::default()
            };
            let log = pods.logs(&name, &lp).await.expect("logs");
            log.contains("GET /from-kube").then_some(log)
        }
    })
    .await;
    assert_eq!(log.lines().count(), 1, "tailLines=1: {log}");

    let proxied = client
        .request_text(
            http::Request::get(format!(
                "/api/v1/namespaces/nginx/pods/{name}:80/proxy/via-proxy?x=1"
            ))
            .body(Vec::new())
            .expect("a request"),
        )
        .await
        .expect("the pod proxy answers");
    let proxied: Value = serde_json::from_str(&proxied).expect("nginx's JSON through the proxy");
    assert_eq!(proxied["request_uri"], "/via-proxy?x=1");
    assert_eq!(proxied["server"], name.as_str());

    let requests = cluster.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.authorization.as_deref()
                == Some(&format!("Bearer {}", archbench_standin::TOKEN))),
        "kube sends the kubeconfig's token"
    );
    assert!(requests.iter().any(|r| r.method == "PATCH"
        && r.path.contains("fieldManager=archbench")
        && r.content_type.as_deref() == Some("application/apply-patch+yaml")));

    deps.delete("nginx-intel-deployment", &DeleteParams::default())
        .await
        .expect("deleted");
    poll("the pods to be collected", 60, || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_expire_and_clients_relist() {
    let cluster = Cluster::start(Options {
        event_ring: 8,
        ..Options::default()
    })
    .expect("the stand-in starts");
    let client = client(&cluster).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = |name: &str| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
            .expect("a configmap")
    };

    // a watch from a version older than the ring holds: one ERROR event, 410 Expired
    let old = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list version");
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .expect("created");
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &old)
        .await
        .expect("the watch starts")
        .boxed();
    match within("the first watch event", 10, stream.try_next())
        .await
        .expect("an event")
    {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"), "{e:?}")
        }
        other => panic!("expected 410 Expired, got {other:?}"),
    }

    // a watcher re-lists after an expiry and goes on
    let mut w = watcher(cms.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    within("the watcher's initial list", 10, async {
        while let Some(c) = w.try_next().await.expect("watch") {
            if c.name_any() == "c9" {
                return;
            }
        }
    })
    .await;
    let lists_before = cluster
        .requests()
        .iter()
        .filter(|r| r.path.contains("/configmaps?") && !r.path.contains("watch="))
        .count();
    cluster.faults().expire_watches();
    cms.create(&PostParams::default(), &cm("after-expiry"))
        .await
        .expect("created");
    within("the object created after the expiry", 30, async {
        while let Some(c) = w.try_next().await.expect("watch") {
            if c.name_any() == "after-expiry" {
                return;
            }
        }
    })
    .await;
    let lists_after = cluster
        .requests()
        .iter()
        .filter(|r| r.path.contains("/configmaps?") && !r.path.contains("watch="))
        .count();
    assert!(
        lists_after > lists_before,
        "the watcher re-listed after 410"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_users_meet() {
    let cluster = Cluster::start(Options {
        restart_backoff: Duration::from_millis(100),
        ..Options::default()
    })
    .expect("the stand-in starts");
    let client = client(&cluster).await;
    namespace_and_config(&client).await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "nginx");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "nginx");
    let pp = PatchParams::apply("archbench").force();

    // RBAC
    cluster.faults().forbid("patch", "deployments");
    let err = deps
        .patch(
            "nginx-arm-deployment",
            &pp,
            &Patch::Apply(deployment(
                "nginx-arm-deployment",
                "arm64",
                "nginx",
                json!({}),
            )),
        )
        .await
        .expect_err("forbidden");
    let kube::Error::Api(status) = err else {
        panic!("an API error: {err:?}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "deployments.apps \"nginx-arm-deployment\" is forbidden: User \"stand-in\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"nginx\""
    );
    cluster.faults().allow_all();

    // no node of the architecture: Pending, Unschedulable, the scheduler's words
    let d = deployment("nginx-s390x-deployment", "s390x", "nginx", json!({}));
    deps.patch("nginx-s390x-deployment", &pp, &Patch::Apply(&d))
        .await
        .expect("applied");
    let cond = poll("an Unschedulable pod", 30, || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("arch=s390x"))
                .await
                .expect("list");
            list.items.iter().find_map(|p| {
                let c = v(p).pointer("/status/conditions/0").cloned()?;
                (c["reason"] == "Unschedulable").then_some(c)
            })
        }
    })
    .await;
    assert_eq!(cond["type"], "PodScheduled");
    assert_eq!(
        cond["message"],
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );

    // an image nobody can pull; the rollout then misses its progress deadline
    let d = deployment(
        "nginx-bad-deployment",
        "amd64",
        "no-such-image:1",
        json!({"progressDeadlineSeconds": 1}),
    );
    deps.patch("nginx-bad-deployment", &pp, &Patch::Apply(&d))
        .await
        .expect("applied");
    let waiting = poll("an image pull failure", 30, || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("arch=amd64"))
                .await
                .expect("list");
            list.items
                .iter()
                .find_map(|p| {
                    v(p).pointer("/status/containerStatuses/0/state/waiting")
                        .cloned()
                })
                .filter(|w| w["reason"] == "ErrImagePull" || w["reason"] == "ImagePullBackOff")
        }
    })
    .await;
    assert!(
        waiting["message"]
            .as_str()
            .is_some_and(|m| m.contains("no-such-image:1")),
        "{waiting}"
    );
    let progressing = poll("ProgressDeadlineExceeded", 30, || {
        let deps = deps.clone();
        async move {
            let d = v(&deps.get("nginx-bad-deployment").await.expect("get"));
            let c = d
                .pointer("/status/conditions")?
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Progressing")?
                .clone();
            (c["reason"] == "ProgressDeadlineExceeded").then_some(c)
        }
    })
    .await;
    assert_eq!(progressing["status"], "False");
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("has timed out progressing.")),
        "{progressing}"
    );

    // a LoadBalancer address withheld, then given
    let svcs: Api<Service> = Api::namespaced(client.clone(), "nginx");
    let eps: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(client.clone(), "nginx");
    cluster.faults().withhold_loadbalancer_addresses(true);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx-arm-svc", "namespace": "nginx"},
        "spec": {"type": "LoadBalancer", "selector": {"arch": "arm64"}, "ports": [{"port": 80, "targetPort": 80, "name": "http"}]}});
    svcs.patch("nginx-arm-svc", &pp, &Patch::Apply(&svc))
        .await
        .expect("applied");
    // once the service controller has made the Endpoints, it has seen the Service
    poll("the service's endpoints", 30, || {
        let eps = eps.clone();
        async move { eps.get_opt("nginx-arm-svc").await.expect("get").map(|_| ()) }
    })
    .await;
    let s = v(&svcs.get("nginx-arm-svc").await.expect("get"));
    assert!(
        s.pointer("/status/loadBalancer/ingress").is_none(),
        "withheld: {s}"
    );
    cluster.faults().withhold_loadbalancer_addresses(false);
    let ip = poll("the load balancer's address", 30, || {
        let svcs = svcs.clone();
        async move {
            let s = v(&svcs.get("nginx-arm-svc").await.expect("get"));
            s.pointer("/status/loadBalancer/ingress/0/ip")
                .and_then(Value::as_str)
                .map(str::to_string)
        }
    })
    .await;
    assert!(ip.starts_with("127.3."), "{ip}");

    if !common::require_nginx_pods() {
        return;
    }
    // a container that exits: restarts, back-off, CrashLoopBackOff, logs --previous
    let crash = deployment(
        "crasher",
        "arm64",
        "nginx",
        json!({"template": {"metadata": {"labels": {"arch": "arm64", "app": "crasher"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx", "command": ["sh", "-c", "echo crashing on $(uname -m); grep -m1 Features /proc/cpuinfo; exit 1"]}]}}}),
    );
    deps.patch("crasher", &pp, &Patch::Apply(&crash))
        .await
        .expect("applied");
    let (name, cs) = poll("a crash loop", 30, || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("app=crasher"))
                .await
                .expect("list");
            list.items.iter().find_map(|p| {
                let cs = v(p).pointer("/status/containerStatuses/0").cloned()?;
                (cs["restartCount"].as_i64()? >= 2
                    && cs
                        .pointer("/state/waiting/reason")
                        .is_some_and(|r| r == "CrashLoopBackOff"))
                .then(|| (p.name_any(), cs))
            })
        }
    })
    .await;
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 1, "{cs}");
    let lp = LogParams {
        previous: true,
        ..LogParams::default()
    };
    let previous = pods.logs(&name, &lp).await.expect("logs --previous");
    assert!(previous.starts_with("crashing on "), "{previous}");
    assert!(
        previous.contains("atomics"),
        "the arm64 node's /proc/cpuinfo: {previous}"
    );

    // a killed process is restarted; the kill shows in lastState
    let d = deployment("nginx-intel-deployment", "amd64", "nginx", json!({}));
    deps.patch("nginx-intel-deployment", &pp, &Patch::Apply(&d))
        .await
        .expect("applied");
    within(
        "the rollout",
        60,
        await_condition(
            deps.clone(),
            "nginx-intel-deployment",
            conditions::is_deployment_completed(),
        ),
    )
    .await
    .expect("watch");
    let running = pods
        .list(&ListParams::default().labels("app=nginx-multiarch,arch=amd64"))
        .await
        .expect("list")
        .items
        .into_iter()
        .find(ready)
        .expect("a ready nginx pod");
    cluster
        .faults()
        .kill_pod_process("nginx", &running.name_any())
        .expect("killed");
    let cs = poll("the restart after the kill", 30, || {
        let pods = pods.clone();
        let name = running.name_any();
        async move {
            let p = pods.get(&name).await.expect("get");
            let cs = v(&p).pointer("/status/containerStatuses/0").cloned()?;
            (cs["restartCount"] == 1 && ready(&p)).then_some(cs)
        }
    })
    .await;
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 137, "{cs}");
}

/// A stand-in for the archbench binary: prints what a worker sees, fails where told to.
const WORKER: &str = r#"#!/bin/sh
echo "worker $JOB_COMPLETION_INDEX on $(hostname) at $POD_IP args $*"
if [ "$JOB_COMPLETION_INDEX" = "$FAIL_INDEX" ]; then exit 1; fi
"#;

fn job(name: &str, completions: u32, fail_index: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"completionMode": "Indexed", "completions": completions, "parallelism": completions, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "worker", "image": "ghcr.io/example/archbench:latest", "args": ["load", "--part"],
                    "env": [{"name": "FAIL_INDEX", "value": fail_index},
                            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_jobs_run_workers() {
    if !common::require_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let worker = dir.path().join("archbench");
    std::fs::write(&worker, WORKER).expect("worker written");
    std::fs::set_permissions(&worker, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let cluster = Cluster::start(Options {
        archbench_binary: Some(worker),
        restart_backoff: Duration::from_millis(100),
        ..Options::default()
    })
    .expect("the stand-in starts");
    let client = client(&cluster).await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PatchParams::apply("archbench");

    jobs.patch("load", &pp, &Patch::Apply(job("load", 3, "none")))
        .await
        .expect("job applied");
    let status = poll("the job to complete", 60, || {
        let jobs = jobs.clone();
        async move {
            let j = v(&jobs.get("load").await.expect("get"));
            let done = j
                .pointer("/status/conditions")?
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Complete" && c["status"] == "True");
            done.then(|| j["status"].clone())
        }
    })
    .await;
    assert_eq!(
        (
            status["succeeded"].as_i64(),
            status["completedIndexes"].as_str()
        ),
        (Some(3), Some("0-2")),
        "{status}"
    );
    let list = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=load"))
        .await
        .expect("list");
    assert_eq!(list.items.len(), 3);
    for p in &list.items {
        let pv = v(p);
        let index = pv
            .pointer("/metadata/annotations/batch.kubernetes.io~1job-completion-index")
            .and_then(Value::as_str)
            .expect("index annotation");
        assert_eq!(pv["status"]["phase"], "Succeeded", "{pv}");
        let log = pods
            .logs(&p.name_any(), &LogParams::default())
            .await
            .expect("logs");
        let ip = pv["status"]["podIP"].as_str().expect("pod IP");
        assert_eq!(
            log,
            format!("worker {index} on load-{index} at {ip} args load --part\n")
        );
    }

    jobs.patch("lossy", &pp, &Patch::Apply(job("lossy", 3, "1")))
        .await
        .expect("job applied");
    let cond = poll("the job to fail", 60, || {
        let jobs = jobs.clone();
        async move {
            let j = v(&jobs.get("lossy").await.expect("get"));
            j.pointer("/status/conditions")?
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Failed" && c["status"] == "True")
                .cloned()
        }
    })
    .await;
    assert_eq!(cond["reason"], "BackoffLimitExceeded", "{cond}");
    let failed = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=lossy"))
        .await
        .expect("list")
        .items
        .into_iter()
        .find(|p| v(p)["status"]["phase"] == "Failed")
        .expect("the failed worker's pod");
    assert_eq!(
        v(&failed)["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
        "1"
    );
    assert_eq!(
        v(&failed)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_terminals_cgroups_and_followed_logs() {
    if !common::require_nginx_pods() {
        return;
    }
    let cluster = Cluster::start(Options::default()).expect("the stand-in starts");
    let client = client(&cluster).await;
    namespace_and_config(&client).await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "nginx");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "nginx");
    let svcs: Api<Service> = Api::namespaced(client.clone(), "nginx");
    let pp = PatchParams::apply("archbench").force();
    for (name, arch) in [
        ("nginx-intel-deployment", "amd64"),
        ("nginx-arm-deployment", "arm64"),
    ] {
        deps.patch(
            name,
            &pp,
            &Patch::Apply(deployment(name, arch, "nginx:latest", json!({}))),
        )
        .await
        .expect("applied");
    }
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx-multiarch-svc", "namespace": "nginx"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "nginx-multiarch"}, "ports": [{"port": 80, "targetPort": "http", "name": "http"}]}});
    svcs.patch("nginx-multiarch-svc", &pp, &Patch::Apply(&svc))
        .await
        .expect("applied");
    for name in ["nginx-intel-deployment", "nginx-arm-deployment"] {
        within(
            "the rollouts",
            60,
            await_condition(deps.clone(), name, conditions::is_deployment_completed()),
        )
        .await
        .expect("watch");
    }
    let s = poll("two endpoints and an address", 30, || {
        let svcs = svcs.clone();
        let client = client.clone();
        async move {
            let eps: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(client, "nginx");
            let e = v(&eps.get_opt("nginx-multiarch-svc").await.expect("get")?);
            let ready = e.pointer("/subsets/0/addresses")?.as_array()?.len();
            let s = v(&svcs.get("nginx-multiarch-svc").await.expect("get"));
            (ready == 2 && s.pointer("/status/loadBalancer/ingress/0/ip").is_some()).then_some(s)
        }
    })
    .await;
    // round-robin over both architectures' pods, through the LB address and a node port
    let lb = s
        .pointer("/status/loadBalancer/ingress/0/ip")
        .and_then(Value::as_str)
        .expect("LB IP")
        .to_string();
    let node_port = s
        .pointer("/spec/ports/0/nodePort")
        .and_then(Value::as_u64)
        .expect("a node port");
    let node: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node_ip = v(&node.get("aks-arm-0").await.expect("node"))
        .pointer("/status/addresses/0/address")
        .and_then(Value::as_str)
        .expect("node address")
        .to_string();
    let mut servers = std::collections::BTreeSet::new();
    for i in 0..8 {
        let addr = if i % 2 == 0 {
            format!("{lb}:80")
        } else {
            format!("{node_ip}:{node_port}")
        };
        let (code, body) = common::http_get(&addr, "/").expect("the service answers");
        assert_eq!(code, 200);
        let j: Value = serde_json::from_str(&body).expect("JSON");
        servers.insert(j["server"].as_str().expect("server").to_string());
    }
    assert_eq!(servers.len(), 2, "both pods answered: {servers:?}");

    let arm = pods
        .list(&ListParams::default().labels("arch=arm64"))
        .await
        .expect("list")
        .items
        .into_iter()
        .next()
        .expect("the arm pod")
        .name_any();
    // Services' names resolve in pods (/etc/hosts, kept up to date)
    let cluster_ip = s
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .expect("a ClusterIP")
        .to_string();
    let resolved = poll("the service's name in the pod", 10, || {
        let pods = pods.clone();
        let arm = arm.clone();
        async move {
            let cmd = vec![
                "getent",
                "hosts",
                "nginx-multiarch-svc.nginx.svc.cluster.local",
            ];
            let mut p = pods
                .exec(&arm, cmd, &AttachParams::default())
                .await
                .expect("exec");
            let mut out = String::new();
            let mut stdout = p.stdout().expect("stdout");
            stdout.read_to_string(&mut out).await.expect("read");
            (!out.is_empty()).then_some(out)
        }
    })
    .await;
    assert!(resolved.starts_with(&cluster_ip), "{resolved}");

    // the pod's own cgroup, in cgroup v2 names
    let mut p = pods
        .exec(
            &arm,
            vec![
                "cat",
                "/sys/fs/cgroup/cpu.stat",
                "/sys/fs/cgroup/memory.current",
            ],
            &AttachParams::default(),
        )
        .await
        .expect("exec");
    let mut out = String::new();
    let mut stdout = p.stdout().expect("stdout");
    within("cat", 10, stdout.read_to_string(&mut out))
        .await
        .expect("read");
    let usage: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|n| n.parse().ok())
        .expect("usage_usec");
    let memory: u64 = out
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .expect("memory.current");
    assert!(usage > 0 && memory > 0, "{out}");

    // a terminal: resize first, then the command reads a line and reports its window. The
    // client sends resize and stdin frames from separate queues, so stdin may arrive first:
    // the command waits (up to 5 s, in 10 ms steps) until the size has been applied.
    let mut p = pods
        .exec(
            &arm,
            vec![
                "sh",
                "-c",
                "read x; i=0; while [ \"$(stty size)\" = '0 0' ] && [ $i -lt 500 ]; \
                 do sleep 0.01; i=$((i+1)); done; stty size; tty",
            ],
            &AttachParams::interactive_tty(),
        )
        .await
        .expect("exec -it");
    let mut size = p.terminal_size().expect("a resize channel");
    size.send(kube::api::TerminalSize {
        width: 100,
        height: 30,
    })
    .await
    .expect("resize sent");
    let mut stdin = p.stdin().expect("stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"go\n")
        .await
        .expect("stdin");
    let mut out = String::new();
    let mut stdout = p.stdout().expect("stdout");
    within("the terminal's output", 10, stdout.read_to_string(&mut out))
        .await
        .expect("read");
    assert!(out.contains("30 100"), "window size: {out:?}");
    assert!(out.contains("/dev/pts/"), "a pseudo-terminal: {out:?}");

    // follow the log while a request arrives
    let lp = LogParams {
        follow: true,
        tail_lines: Some(0),
        ..LogParams::default()
    };
    let mut lines =
        futures::AsyncBufReadExt::lines(pods.log_stream(&arm, &lp).await.expect("follow"));
    let pod_ip = v(&pods.get(&arm).await.expect("get"))["status"]["podIP"]
        .as_str()
        .expect("IP")
        .to_string();
    common::http_get(&format!("{pod_ip}:80"), "/followed").expect("request");
    let line = within("the followed line", 10, lines.next())
        .await
        .expect("a line")
        .expect("text");
    assert!(line.contains("GET /followed"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_over_v4_websocket_frames() {
    if !common::require_nginx_pods() {
        return;
    }
    let cluster = Cluster::start(Options::default()).expect("the stand-in starts");
    let client = client(&cluster).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}]}}))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    poll("the pod to run", 30, || {
        let pods = pods.clone();
        async move { ready(&pods.get("p").await.expect("get")).then_some(()) }
    })
    .await;
    // a client that offers only v4 (no close-stdin channel): frames as the kubelet sends them
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};
    let addr = cluster.url().trim_start_matches("http://").to_string();
    let url = format!("ws://{addr}/api/v1/namespaces/default/pods/p/exec?command=sh&command=-c&command=echo+v4%3B+exit+2&stdout=true&stderr=true");
    let mut req = url.into_client_request().expect("a request");
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "v4.channel.k8s.io".parse().expect("header"),
    );
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (mut ws, resp) = tokio_tungstenite::client_async(req, stream)
        .await
        .expect("upgrade");
    assert_eq!(
        resp.headers()["sec-websocket-protocol"],
        "v4.channel.k8s.io"
    );
    let mut frames = Vec::new();
    let close = within("the session", 10, async {
        while let Some(m) = ws.next().await {
            match m.expect("a frame") {
                Message::Binary(b) => frames.push(b.to_vec()),
                Message::Close(c) => return c,
                _ => {}
            }
        }
        None
    })
    .await;
    assert_eq!(frames[0], vec![1u8], "stdout announced");
    assert_eq!(frames[1], vec![2u8], "stderr announced");
    assert!(frames.contains(&b"\x01v4\n".to_vec()), "{frames:?}");
    let status: Value =
        serde_json::from_slice(&frames.last().expect("a status")[1..]).expect("status JSON");
    assert_eq!(
        frames.last().expect("status")[0],
        3,
        "the status comes last, on channel 3"
    );
    assert_eq!(status["details"]["causes"][0]["message"], "2", "{status}");
    assert_eq!(
        u16::from(close.expect("a close frame").code),
        1000,
        "a normal close with a code"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_nginx_rejects_crash_loops_with_its_error() {
    if !common::require_nginx_pods() {
        return;
    }
    let cluster = Cluster::start(Options {
        restart_backoff: Duration::from_millis(100),
        ..Options::default()
    })
    .expect("the stand-in starts");
    let client = client(&cluster).await;
    namespace_and_config(&client).await;
    let pp = PatchParams::apply("archbench").force();
    Api::<ConfigMap>::namespaced(client.clone(), "nginx")
        .patch(
            "nginx-config",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "nginx-config", "namespace": "nginx"},
                "data": {"nginx.conf": "events {}\nhttp { server { listen 80; no_such_directive on; } }\n"}})),
        )
        .await
        .expect("bad config applied");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "nginx");
    deps.patch(
        "nginx-intel-deployment",
        &pp,
        &Patch::Apply(deployment(
            "nginx-intel-deployment",
            "amd64",
            "nginx",
            json!({}),
        )),
    )
    .await
    .expect("applied");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "nginx");
    let name = poll("CrashLoopBackOff", 30, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.expect("list");
            list.items.iter().find_map(|p| {
                let w = v(p)
                    .pointer("/status/containerStatuses/0/state/waiting/reason")
                    .cloned()?;
                (w == "CrashLoopBackOff").then(|| p.name_any())
            })
        }
    })
    .await;
    let lp = LogParams {
        previous: true,
        ..LogParams::default()
    };
    let log = pods.logs(&name, &lp).await.expect("logs --previous");
    assert!(
        log.contains("[emerg]") && log.contains("unknown directive \"no_such_directive\""),
        "{log}"
    );
}
