//! `archbench k8s` end to end against Kubernetes' own control plane (archbench-cluster: the
//! real kube-apiserver, controller-manager, scheduler, kube-proxy and metrics-server in a
//! network namespace of the tests' own, two nodes amd64 and arm64 whose pods are real nginx
//! processes). Every archbench command that reaches the cluster runs inside that namespace.
//! What only the node agent stands in for is listed in the README.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use archbench_cluster::topology::NodeSpec;
use archbench_cluster::TestCluster;

use crate::util::kube::{can_run, k8s, k8s_command, ok, options, the_run_dir};
use crate::util::{finish_within, read_json, stderr, stdout, PROMPTLY};

/// The guide's cluster (amd64 node `aks-intel-0`, arm64 node `aks-arm-0`), shared by the
/// tests of this process; each test works in a namespace of its own.
fn cluster() -> Option<&'static TestCluster> {
    if !can_run() {
        return None;
    }
    Some(TestCluster::shared("guide", &options(None)).unwrap_or_else(|e| panic!("{e}")))
}

/// The guide's two nodes plus `aks-load-0` (amd64, pool `load`, 8 cores) for load workers.
fn cluster_with_load_node() -> Option<&'static TestCluster> {
    if !can_run() {
        return None;
    }
    let mut nodes = archbench_cluster::topology::default_nodes();
    nodes.push(NodeSpec::new(2, "aks-load-0", "amd64", "load", "Standard_D8s_v6").sized(8, 32));
    Some(
        TestCluster::shared("with-load-node", &options(Some(nodes)))
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// The same with another kubeconfig (a user of the test's own).
fn k8s_as(c: &TestCluster, kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    let mut cmd = c.laptop_command(env!("CARGO_BIN_EXE_archbench"));
    cmd.arg("k8s")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish_within(cmd.spawn().expect("archbench runs"), PROMPTLY * 2)
}

/// The tuned configuration with an access log counted per request on the pod's stdout; the
/// kubelet's readiness probes (User-Agent kube-probe/…) are left out of it, as a deployment
/// that counts its requests does.
fn counted_conf() -> String {
    archbench::k8s::TUNED_NGINX_CONF.replace(
        "access_log off;",
        "log_format counted '$connection $status \"$request\"';\n    map $http_user_agent $counted { ~^kube-probe/ 0; default 1; }\n    access_log /var/log/nginx/access.log counted if=$counted;",
    )
}

/// A configuration nginx -t passes that serves 8080, not the container's port 80: its pods
/// never become ready, so `config` rolls it back.
fn deaf_conf(dir: &std::path::Path) -> std::path::PathBuf {
    let deaf = dir.join("deaf.conf");
    std::fs::write(&deaf, counted_conf().replace("listen 80;", "listen 8080;")).unwrap();
    deaf
}

/// nginx on the intel and arm pools of `ns` (`up --pools-by agentpool`), running `conf`
/// (written in `dir`), both waited for; its pods' names.
fn up_by_pools_with(c: &TestCluster, ns: &str, conf: &str, dir: &Path) -> Vec<String> {
    ok(&k8s(
        c,
        ns,
        &["up", "--pools-by", "agentpool", "--wait-timeout", "90s"],
    ));
    let file = dir.join("nginx.conf");
    std::fs::write(&file, conf).unwrap();
    ok(&k8s(
        c,
        ns,
        &["config", file.to_str().unwrap(), "--wait-timeout", "90s"],
    ));
    pod_names(&ok(&k8s(c, ns, &["status"])))
}

/// What a pod's log shows once it has caught up with `counted` (or as it stands after 10 s):
/// a line the server wrote as the last response went out reaches the log through the
/// container's output and the node agent a moment after the load ended. A log that stays
/// short is returned short, for the caller's assertion to fail.
fn caught_up(counted: u64, logged: impl Fn() -> u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let n = logged();
        if n >= counted || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Access-log lines of these nginx pods (the counted format: "CONN STATUS \"REQUEST\"").
fn access_lines(c: &TestCluster, ns: &str, pods: &[String]) -> usize {
    pods.iter()
        .map(|p| {
            c.pod_log(ns, p)
                .lines()
                .filter(|l| l.contains("\"GET / HTTP/1.1\""))
                .count()
        })
        .sum()
}

/// The pods of the status table (the lines before the first blank one).
fn pod_names(status: &str) -> Vec<String> {
    status
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

/// The load worker pods of a namespace now: (name, node, phase).
fn load_pods(c: &TestCluster, ns: &str) -> Vec<(String, String, String)> {
    let list = c.get_json(&[
        "-n",
        ns,
        "pods",
        "-l",
        "app.kubernetes.io/name=archbench-load",
    ]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            (
                s(&p["metadata"]["name"]),
                s(&p["spec"]["nodeName"]),
                s(&p["status"]["phase"]),
            )
        })
        .collect()
}

/// Requests the API server has begun to answer (its audit log: one auditID per request,
/// logged as its response starts and again as it completes) whose verb and URI satisfy `f`.
fn audited(c: &TestCluster, f: impl Fn(&str, &str) -> bool) -> usize {
    let ids: std::collections::BTreeSet<String> = c
        .audit()
        .iter()
        .filter(|e| {
            f(
                e["verb"].as_str().unwrap_or(""),
                e["requestURI"].as_str().unwrap_or(""),
            )
        })
        .filter_map(|e| e["auditID"].as_str().map(str::to_string))
        .collect();
    ids.len()
}

/// Objects of the test's own, applied by the cluster's kubectl.
fn kubectl_apply(c: &TestCluster, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("objects.yaml");
    std::fs::write(&f, yaml).unwrap();
    c.kubectl_ok(&["apply", "-f", f.to_str().unwrap()]);
}

#[test]
fn the_guides_workflow_end_to_end() {
    let Some(c) = cluster() else { return };
    let ns = "guide";
    let dir = tempfile::tempdir().unwrap();
    // up: both architectures on their own nodes, addresses from the load balancer.
    let up = ok(&k8s(c, ns, &["up", "--wait-timeout", "90s"]));
    assert!(
        up.contains("Deployment nginx-arm-deployment: created"),
        "{up}"
    );
    let rows: Vec<&str> = up
        .lines()
        .filter(|l| l.starts_with("intel ") || l.starts_with("arm "))
        .collect();
    assert_eq!(rows.len(), 2, "{up}");
    for row in &rows {
        let (arch, node) = if row.starts_with("arm") {
            ("arm64", "aks-arm-0")
        } else {
            ("amd64", "aks-intel-0")
        };
        assert!(row.contains(arch) && row.contains(node), "{row}");
        assert!(row.contains("10.250.0."), "a LoadBalancer address: {row}");
        assert!(row.contains(" yes "), "ready: {row}");
    }
    // The real scheduler put them there; the real Deployment controller made ReplicaSets.
    let rs = c.kubectl_ok(&["-n", ns, "get", "replicasets", "-o", "name"]);
    assert_eq!(rs.lines().count(), 2, "{rs}");
    // A second up changes nothing and says so.
    let again = ok(&k8s(c, ns, &["up", "--wait-timeout", "90s"]));
    assert!(again.contains("nothing changed"), "{again}");
    // Another variant with another configuration for the shared ConfigMap, whose intel and
    // arm this `up` does not declare: refused before anything is applied (it replaced their
    // configuration, for their next pod to run, and nothing rolled).
    let other = dir.path().join("other.conf");
    std::fs::write(&other, "events {}\nhttp { server { listen 80; } }\n").unwrap();
    let o = k8s(
        c,
        ns,
        &[
            "up",
            "--variant",
            "extra:arch=amd64",
            "--config",
            other.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ConfigMap nginx-config: arm, intel run with another configuration in it"),
        "{err}"
    );
    let extra = c.kubectl_ok(&["-n", ns, "get", "deployments", "-o", "name"]);
    assert!(!extra.contains("extra"), "{extra}");
    // curl: the tuned JSON names the pod that answered; multiarch spreads over both
    // (kube-proxy's rules choose the endpoint).
    let one = ok(&k8s(c, ns, &["curl", "arm"]));
    assert!(one.contains("\"message\": \"nginx response\""), "{one}");
    assert!(one.contains("answered by nginx-arm-deployment-"), "{one}");
    // kube-proxy programs the second endpoint a moment after the API lists it (seconds on
    // two busy cores): a batch of 24 may still find one rule; the next one finds both.
    crate::util::wait_for_value("multiarch to answer from both", PROMPTLY, || {
        let spread = ok(&k8s(c, ns, &["curl", "multiarch", "--count", "24"]));
        let split = spread
            .lines()
            .find(|l| l.starts_with("answers by variant"))?;
        (split.contains("arm ") && split.contains("intel ")).then_some(())
    });
    // config: a file with a counted access log, checked with the pods' nginx -t first.
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    let before = pod_names(&ok(&k8s(c, ns, &["status"])));
    let applied = ok(&k8s(
        c,
        ns,
        &["config", conf.to_str().unwrap(), "--wait-timeout", "90s"],
    ));
    assert!(applied.contains("nginx -t in nginx-"), "{applied}");
    let pods = pod_names(&ok(&k8s(c, ns, &["status"])));
    assert_eq!(pods.len(), 2);
    assert!(
        pods.iter().all(|p| !before.contains(p)),
        "new pods: {before:?} -> {pods:?}"
    );
    // A configuration nginx rejects changes nothing, in nginx's own words.
    let bad = dir.path().join("bad.conf");
    std::fs::write(&bad, "events {}\nhttp { no_such_directive on; }\n").unwrap();
    let o = k8s(c, ns, &["config", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nginx rejects the configuration"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("no_such_directive"), "{}", stderr(&o));
    // One that passes nginx -t but never serves the container's port is rolled back.
    let deaf = deaf_conf(dir.path());
    let o = k8s(
        c,
        ns,
        &["config", deaf.to_str().unwrap(), "--wait-timeout", "10s"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the previous one is back"),
        "{}",
        stderr(&o)
    );
    // Said once the previous configuration serves (as the way forward waits): a request
    // right after is answered (one after a rollback had its connection refused).
    for arch in ["intel", "arm"] {
        ok(&k8s(c, ns, &["curl", arch]));
    }
    let status = ok(&k8s(c, ns, &["status"]));
    assert_eq!(status.matches(" yes ").count(), 2, "{status}");
    let pods = pod_names(&status);
    // top: each pod's own cgroup, through exec.
    let top = ok(&k8s(c, ns, &["top"]));
    assert!(top.contains("cgroup (exec)"), "{top}");
    // login with a command: its output and its exit code.
    let o = k8s(
        c,
        ns,
        &[
            "login",
            "arm",
            "--",
            "sh",
            "-c",
            "echo hi from $(hostname); exit 3",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("hi from nginx-arm-deployment-"),
        "{}",
        stdout(&o)
    );
    // fingerprint: the arm node's LSE atomics, the pod's nginx -V.
    let fp = ok(&k8s(c, ns, &["fingerprint"]));
    assert!(fp.contains("arm: pod nginx-arm-deployment-"), "{fp}");
    assert!(fp.contains("LSE      yes"), "{fp}");
    assert!(fp.contains("nginx version: nginx/"), "{fp}");
    // The executable read from the pod: the arm64 node runs Debian's arm64 nginx (under
    // qemu-user), whose atomics have an LSE path; the fingerprint says it is emulated.
    assert!(
        fp.contains("binary   aarch64 executable, build id "),
        "{fp}"
    );
    assert!(
        fp.contains("outline atomics, LSE used where the CPU has it"),
        "{fp}"
    );
    assert!(
        fp.contains("WARNING: the server runs under emulation (/usr/bin/qemu-aarch64-static"),
        "{fp}"
    );
    assert!(!fp.contains("only LL/SC"), "{fp}");
    // load both: the pods watched; every request counted is one the pods' nginx logged.
    let out = dir.path().join("results");
    let served_before = access_lines(c, ns, &pods);
    let load = ok(&k8s(
        c,
        ns,
        &[
            "load",
            "both",
            "-d",
            "2s",
            "-c",
            "4",
            "--cost",
            "intel=0.192",
            "--cost",
            "arm=0.154",
            "--out-dir",
            out.to_str().unwrap(),
            "--json",
            dir.path().join("also.json").to_str().unwrap(),
        ],
    ));
    assert!(load.contains("archbench compare"), "{load}");
    // --json FILE as every other command takes it: the same document as the run directory's.
    assert_eq!(
        read_json(dir.path().join("also.json")),
        read_json(the_run_dir(&out).join("k8s-load.json"))
    );
    // The guide's claim, measured: each architecture's cost of a million requests.
    assert!(load.contains("Cost       arm at 0.1540/h: "), "{load}");
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    let mut counted = 0;
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        counted += run["totals"]["requests"].as_u64().unwrap();
        let server = &run["servers"][0];
        assert!(
            server["target"]
                .as_str()
                .unwrap()
                .starts_with(&format!("pod:{ns}/")),
            "{server}"
        );
        assert!(server["cpu_s"].as_f64().unwrap() > 0.0, "{server}");
        assert!(
            server["peak_memory_bytes"].as_u64().unwrap() > 0,
            "{server}"
        );
    }
    assert!(counted > 0);
    assert_eq!(doc["cost"].as_array().unwrap().len(), 2, "{}", doc["cost"]);
    // Requests in flight when a run's time ran out were answered but not counted: at most
    // one per connection.
    let served = caught_up(counted, || {
        (access_lines(c, ns, &pods) - served_before) as u64
    });
    assert!(
        served >= counted && served <= counted + 8,
        "nginx logged {served}, archbench counted {counted}"
    );
    // The script's own layout.
    let wrk = ok(&k8s(
        c,
        ns,
        &[
            "load",
            "both",
            "-d",
            "1s",
            "-c",
            "2",
            "--layout",
            "wrk",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    ));
    for line in [
        "INTEL RESULTS:",
        "ARM RESULTS:",
        "Both tests completed",
        "Requests/sec:",
    ] {
        assert!(wrk.contains(line), "{line} in {wrk}");
    }
    // kubectl sees what archbench made as archbench says: our labels, our field manager.
    let deploy = c.get_json(&[
        "-n",
        ns,
        "deployment",
        "nginx-arm-deployment",
        "--show-managed-fields",
    ]);
    assert_eq!(
        deploy["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "archbench"
    );
    assert!(deploy["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["manager"] == "archbench" && m["operation"] == "Apply"));
    // status lists archbench's nginx pods only: a pod of someone else's with the app label
    // but not archbench's managed-by label is not one of them.
    kubectl_apply(
        c,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: intruder, namespace: {ns}, labels: {{app: nginx-multiarch}}}}\n\
             spec: {{containers: [{{name: c, image: nginx}}]}}\n"
        ),
    );
    let status = ok(&k8s(c, ns, &["status"]));
    assert!(!status.contains("intruder"), "{status}");
    c.kubectl_ok(&[
        "-n",
        ns,
        "delete",
        "pod",
        "intruder",
        "--grace-period=0",
        "--force",
    ]);
    // down: only ours, the namespace too (archbench created it), and it waits; a Deployment
    // of someone else's in the namespace is not ours, so the namespace stays with it.
    kubectl_apply(
        c,
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: foreign, namespace: {ns}}}\n\
             spec:\n  replicas: 0\n  selector: {{matchLabels: {{app: foreign}}}}\n  template:\n    \
             metadata: {{labels: {{app: foreign}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
        ),
    );
    let down = ok(&k8s(c, ns, &["down"]));
    assert!(
        down.contains("Deployment nginx-arm-deployment: deleted"),
        "{down}"
    );
    assert!(
        down.contains(
            "Namespace guide: kept, it holds what is not archbench's: Deployment foreign"
        ),
        "{down}"
    );
    let left = c.kubectl_ok(&["-n", ns, "get", "deployments", "-o", "name"]);
    assert_eq!(left.trim(), "deployment.apps/foreign", "{left}");
    let status = ok(&k8s(c, ns, &["status"]));
    assert!(status.contains("no pods of archbench's"), "{status}");
    // A Secret of the user's keeps it as much: any kind the cluster serves counts (a fixed
    // list of five kinds let the namespace go, Secret and all).
    c.kubectl_ok(&["-n", ns, "delete", "deployment", "foreign"]);
    c.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "secret",
        "generic",
        "my-db-password",
        "--from-literal=pw=x",
    ]);
    let down = ok(&k8s(c, ns, &["down"]));
    assert!(
        down.contains(
            "Namespace guide: kept, it holds what is not archbench's: Secret my-db-password"
        ),
        "{down}"
    );
    // Once it is archbench's alone again, the namespace goes too.
    c.kubectl_ok(&["-n", ns, "delete", "secret", "my-db-password"]);
    let down = ok(&k8s(c, ns, &["down"]));
    assert!(down.contains("Namespace guide: deleted"), "{down}");
}

/// One amd64 node of 2 cores, `aks-intel-0`: a cluster of its own for a test.
fn one_amd64_node() -> Vec<NodeSpec> {
    vec![NodeSpec::new(
        0,
        "aks-intel-0",
        "amd64",
        "intel",
        "Standard_D2s_v6",
    )]
}

/// A one-node cluster (amd64 only) for the failures users meet, some of them cluster-wide
/// (no load-balancer addresses).
#[test]
fn errors_a_user_will_meet_are_one_line_and_say_what_to_do() {
    if !can_run() {
        return;
    }
    let c = TestCluster::start(&options(Some(one_amd64_node())), "errors")
        .unwrap_or_else(|e| panic!("{e}"));
    let c = &c;
    let ns = "errors";
    // No arm64 node: the real scheduler's message, in archbench's words.
    let o = k8s(c, ns, &["up", "--wait-timeout", "60s"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no node with kubernetes.io/arch=arm64"),
        "{err}"
    );
    // The arm Deployment that `up` left mounts the shared configuration, and an `up` of
    // intel alone with another one would be refused while it is there (its pod, once
    // placed, would run that one): gone first.
    ok(&k8s(c, ns, &["down"]));
    // An image that cannot be pulled.
    let o = k8s(
        c,
        ns,
        &[
            "up",
            "--arch",
            "intel",
            "--image",
            "no-such-image:1",
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot be pulled"), "{}", stderr(&o));
    // A configuration nginx rejects at start: the crash loop, with nginx's own words.
    let dir = tempfile::tempdir().unwrap();
    let crash = dir.path().join("crash.conf");
    std::fs::write(
        &crash,
        // Refused as nginx reads it, before it binds a port: never ready even for a moment
        // (`up` runs no nginx -t; `config` would refuse it first).
        "events {}\nhttp { archbench_no_such_directive on; server { listen 80; } }\n",
    )
    .unwrap();
    let o = k8s(
        c,
        ns,
        &[
            "up",
            "--arch",
            "intel",
            "--config",
            crash.to_str().unwrap(),
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("keeps crashing"), "{err}");
    assert!(
        err.contains("archbench_no_such_directive"),
        "nginx's log is quoted: {err}"
    );
    // A memory limit below what the configuration needs: a 4000 MiB limit_req zone, whose
    // slab pages nginx initializes before it listens, is killed by the kernel at 16 MiB,
    // over and over; `up` and `status` say so.
    let hungry = dir.path().join("hungry.conf");
    std::fs::write(
        &hungry,
        "worker_processes 1;\nevents {}\nhttp { limit_req_zone $binary_remote_addr zone=big:4000m rate=1r/s; server { listen 80; } }\n",
    )
    .unwrap();
    let o = k8s(
        c,
        "oom",
        &[
            "up",
            "--variant",
            "small:arch=amd64,memory=16Mi",
            "--config",
            hungry.to_str().unwrap(),
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("keeps crashing (CrashLoopBackOff, last killed as OOMKilled"),
        "{err}"
    );
    assert!(err.contains("raise the variant's memory="), "{err}");
    let status = ok(&k8s(c, "oom", &["status"]));
    assert!(status.contains("CrashLoopBackOff(OOMKilled)"), "{status}");
    // top and fingerprint go on past a pod with no container to exec in, naming it (they
    // failed outright with "container not found"). It runs for moments between its
    // restarts, so either it was read or it is said why not.
    let pod = pod_names(&status)[0].clone();
    let top = ok(&k8s(c, "oom", &["top"]));
    let row = top.lines().find(|l| l.contains(&pod)).unwrap_or_default();
    assert!(
        row.contains("not read:") || row.contains("cgroup (exec)"),
        "{top}"
    );
    let o = k8s(c, "oom", &["fingerprint"]);
    assert!(
        o.status.success() || stderr(&o).starts_with("archbench: small: "),
        "{}",
        stderr(&o)
    );
    ok(&k8s(c, "oom", &["down"]));
    // The node exists but has no room left (another variant holds its CPU): said so, not
    // "no node with" as if there were none.
    let holds = "a:arch=amd64,cpu=1500m,memory=64Mi";
    ok(&k8s(
        c,
        "room",
        &["up", "--variant", holds, "--wait-timeout", "60s"],
    ));
    let o = k8s(
        c,
        "room",
        &[
            "up",
            "--variant",
            holds,
            "--variant",
            "b:arch=amd64,cpu=1500m,memory=64Mi",
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no node with kubernetes.io/arch=amd64 has room for b's pod (1 such node)")
            && err.contains("Insufficient cpu")
            && err.contains("lower the variant's cpu="),
        "{err}"
    );
    ok(&k8s(c, "room", &["down"]));
    // A LoadBalancer address that never comes (new services, in a namespace of their own):
    // NodePort is suggested.
    c.fault("withhold-load-balancers", true);
    let o = k8s(c, "lb", &["up", "--arch", "intel", "--wait-timeout", "5s"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--service-type NodePort"),
        "{}",
        stderr(&o)
    );
    // Ctrl-C while it waits for one: what stays is said, and the exit is 130.
    let (code, rest) = interrupted_while_waiting(
        c,
        "wait",
        &["up", "--arch", "intel", "--wait-timeout", "5m"],
        "waiting:",
    );
    assert_eq!(code, Some(130));
    assert!(rest.contains("interrupted while waiting"), "{rest}");
    // Each object it applied is named, as a created one.
    assert!(
        rest.contains("applied before it, and left as it is: ")
            && rest.contains("Deployment nginx-intel-deployment created")
            && rest.contains("Service nginx-intel-svc created"),
        "{rest}"
    );
    assert!(rest.contains("archbench k8s down removes it"), "{rest}");
    c.fault("withhold-load-balancers", false);
    // No cluster at all: the server is named.
    let gone = dir.path().join("gone.kubeconfig");
    let (_held, port) = crate::util::nginx::refusing_port();
    let mut kc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.kubeconfig()).unwrap()).unwrap();
    kc["clusters"][0]["cluster"]["server"] = format!("https://127.0.0.1:{port}").into();
    std::fs::write(&gone, kc.to_string()).unwrap();
    let o = crate::util::bin()
        .args(["k8s", "--kubeconfig", gone.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("no cluster reachable at https://127.0.0.1:{port}")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // The only node stops reporting (last: it breaks the cluster): a new pod is placed
    // nowhere, and the node is named as not Ready, with its kubelet's condition.
    c.fault("stop-heartbeats:aks-intel-0", true);
    crate::util::wait_until(
        "aks-intel-0 NotReady",
        std::time::Duration::from_secs(120),
        || {
            let node = c.get_json(&["node", "aks-intel-0"]);
            node["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] != "True")
        },
    );
    let o = k8s(
        c,
        "gone",
        &["up", "--arch", "intel", "--wait-timeout", "60s"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the node with kubernetes.io/arch=amd64 for intel is not Ready: aks-intel-0 (NodeStatusUnknown")
            && err.contains("bring its kubelet back"),
        "{err}"
    );
}

/// A sized variant's rollout replaces its pods in place: while the old pod holds the node,
/// the scheduler refuses the new one ("Insufficient cpu") and places it at its next try. A
/// scheduler whose next try comes late (here a back-off of 30 s at every try, as a loaded or
/// an older scheduler's) is waited for, not taken for a final refusal: `config` applies the
/// new configuration and rolls nothing back. One 2-core node, the variant asking for both; its
/// nginx takes 3 s to stop (as a server draining its connections), so the scheduler always
/// tries the new pod while the old one is there.
#[test]
fn a_rollout_waits_for_a_late_scheduler_when_its_pods_fill_their_node() {
    if !can_run() {
        return;
    }
    // The build stands where the image's nginx is: it runs a copy of the real one.
    let builds = tempfile::tempdir().unwrap();
    let real = builds.path().join("nginx-real");
    std::fs::copy("/usr/sbin/nginx", &real).unwrap();
    let slow = builds.path().join("nginx-slow-stop");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" -V \"*) exec {real} \"$@\";; esac\n\
             {real} \"$@\" &\npid=$!\ntrap 'sleep 3; kill -TERM $pid' TERM\n\
             wait $pid\nwait $pid\n",
            real = real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut opts = options(Some(one_amd64_node()));
    opts.scheduler_backoff = Some(30);
    opts.nginx_builds = vec![(SLOW_STOP_IMAGE.into(), slow)];
    let c = TestCluster::start(&opts, "backoff").unwrap_or_else(|e| panic!("{e}"));
    let c = &c;
    let ns = "backoff";
    let variant =
        format!("full:instance-type=Standard_D2s_v6,cpu=2,memory=256Mi,image={SLOW_STOP_IMAGE}");
    ok(&k8s(
        c,
        ns,
        &["up", "--variant", &variant, "--wait-timeout", "60s"],
    ));
    // `up` ran the tuned configuration: back to the image's own.
    let stock = k8s(c, ns, &["config", "stock", "--wait-timeout", "90s"]);
    let out = ok(&stock);
    assert!(out.contains("applied"), "{out}");
    assert!(!stderr(&stock).contains("failed"), "{}", stderr(&stock));
    // The case was met: the new pod was refused while the old one held the node.
    let events = c.get_json(&[
        "-n",
        ns,
        "events",
        "--field-selector",
        "reason=FailedScheduling",
    ]);
    let refused = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str())
        .any(|m| m.contains("Insufficient cpu"));
    assert!(refused, "no FailedScheduling for want of cpu: {events}");
    // One pod, ready, without the ConfigMap mounted: the image's own configuration.
    let pods = c.get_json(&["-n", ns, "pods"]);
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{pods}");
    let ready = items[0]["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(ready, "{pods}");
    let mounted = pods["items"][0]["spec"]["volumes"].to_string();
    assert!(!mounted.contains("nginx-config"), "{mounted}");
    // Ctrl-C while the next configuration rolls (its pod waits for the old one's room): it
    // says the new one stays and how to put the previous one back.
    let (code, rest) = interrupted_while_waiting(
        c,
        ns,
        &["config", "tuned", "--wait-timeout", "90s"],
        "waiting",
    );
    assert_eq!(code, Some(130));
    assert!(
        rest.contains("the new configuration is applied and stays")
            && rest.contains("`archbench k8s config stock` puts the previous one back"),
        "{rest}"
    );
}

/// Ctrl-C while `config` puts the previous configuration back (the new one passed nginx -t
/// but its pods never served): it says the previous one is applied again and stays, and why
/// the new one failed.
#[test]
fn an_interrupted_rollback_says_the_previous_configuration_stays() {
    let Some(c) = cluster() else { return };
    let ns = "rollback";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    let dir = tempfile::tempdir().unwrap();
    let deaf = deaf_conf(dir.path());
    let (code, rest) = interrupted_while_waiting(
        c,
        ns,
        &["config", deaf.to_str().unwrap(), "--wait-timeout", "10s"],
        "putting the previous configuration back",
    );
    assert_eq!(code, Some(130), "{rest}");
    assert!(
        rest.contains("the previous configuration is applied again and stays")
            && rest.contains("the new one had failed"),
        "{rest}"
    );
    ok(&k8s(c, ns, &["down"]));
}

/// Runs `args`, sends it SIGINT once its stderr says `waiting`, and returns its exit status
/// and the rest of its stderr.
fn interrupted_while_waiting(
    c: &TestCluster,
    ns: &str,
    args: &[&str],
    waiting: &str,
) -> (Option<i32>, String) {
    let mut child = k8s_command(c, ns, args).spawn().unwrap();
    let err = crate::util::LineReader::new(child.stderr.take().unwrap());
    let child = crate::util::KillOnDrop::new(child);
    err.wait_for(waiting, PROMPTLY);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    (o.status.code(), err.rest(PROMPTLY))
}

/// A user of the test's own, bound to a Role in `ns` with these rules (YAML list items).
fn user_with_role(c: &TestCluster, name: &str, ns: &str, rules: &str) -> PathBuf {
    let kc = c.user(name, &[], None);
    kubectl_apply(
        c,
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             rules:\n{rules}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\n\
             subjects: [{{kind: User, name: {name}, apiGroup: rbac.authorization.k8s.io}}]\n"
        ),
    );
    kc
}

#[test]
fn a_pod_restarted_during_a_load_is_followed_and_reported() {
    let Some(c) = cluster() else { return };
    let ns = "restart";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    let pod = pod_names(&ok(&k8s(c, ns, &["status"])))[0].clone();
    // A user RBAC does not allow exec: `top` falls back to the metrics API (metrics-server,
    // scraping the node agent), and says so.
    let viewer = user_with_role(
        c,
        "no-exec",
        ns,
        "- {apiGroups: [\"\", apps], resources: [pods, deployments, services, configmaps, nodes, events], verbs: [get, list, watch]}\n\
         - {apiGroups: [metrics.k8s.io], resources: [pods], verbs: [get, list]}",
    );
    let top = crate::util::wait_for_value("the pod in the metrics API", PROMPTLY, || {
        let o = k8s_as(c, &viewer, ns, &["top"]);
        (o.status.success() && stdout(&o).contains("metrics API")).then(|| stdout(&o))
    });
    assert!(top.contains(&pod), "{top}");
    // A load by that user cannot watch its pod: said at once in RBAC's words, with the one
    // exec refused (it was retried for 10 s, then the API's status dumped raw).
    let exec = format!("/api/v1/namespaces/{ns}/pods/{pod}/exec");
    // The cgroup stream's exec is told by its loop; the load may also exec `nginx -V` and
    // read /proc/cpuinfo for the server's build, refused as well, once each.
    let streams = || audited(c, |_, uri| uri.starts_with(&exec) && uri.contains("while"));
    let before = streams();
    let o = k8s_as(c, &viewer, ns, &["load", "arm", "-d", "1s", "-c", "1"]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("(RBAC: archbench needs to create pods/exec); ask for that permission"),
        "{err}"
    );
    assert!(!err.contains("Status {"), "{err}");
    let refused = streams();
    assert_eq!(refused - before, 1, "{err}");
    // A load whose pod's nginx is killed a moment in: the run is kept, the restart told. The
    // run lasts long enough for the restart to be seen within it on a loaded machine (the full
    // suite ended a 4 s run first once, and an 8 s run once: the arm pod's nginx restarts
    // under qemu-user).
    let dir = tempfile::tempdir().unwrap();
    let child = k8s_command(
        c,
        ns,
        &[
            "load",
            "arm",
            "-d",
            "15s",
            "-c",
            "2",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
    )
    .spawn()
    .unwrap();
    // The load has begun once the pod's cgroup stream (an exec) is open: its own, not the
    // refused one above.
    crate::util::wait_until("the cgroup stream of the pod", PROMPTLY, || {
        streams() > refused
    });
    c.kill_pod(ns, &pod);
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    assert!(text.contains("During run 1 of arm"), "{text}");
    let doc = read_json(the_run_dir(dir.path()).join("k8s-load.json"));
    let server = &doc["targets"][0]["runs"][0]["servers"][0];
    let events = server["events"].as_array().unwrap();
    assert!(!events.is_empty(), "{server}");
    assert!(
        doc["targets"][0]["runs"][0]["totals"]["requests"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The restart is the real one: the API's restartCount.
    let p = c.get_json(&["-n", ns, "pod", &pod]);
    assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 1);
    // top --watch refreshes until Ctrl-C, on the pod as it is now.
    let mut child = k8s_command(c, ns, &["top", "--watch"]).spawn().unwrap();
    let out = crate::util::LineReader::new(child.stdout.take().unwrap());
    for _ in 0..2 {
        out.wait_for("cgroup (exec)", PROMPTLY);
    }
    let child = crate::util::KillOnDrop::new(child);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    // down --keep-namespace: ours go, the namespace stays.
    let down = ok(&k8s(c, ns, &["down", "--keep-namespace"]));
    assert!(
        down.contains("Deployment nginx-arm-deployment: deleted"),
        "{down}"
    );
    assert!(!down.contains("Namespace"), "{down}");
}

/// The pods of a k8s load result's first run of its first target's server, by name.
fn watched_pods(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["targets"][0]["runs"][0]["servers"][0]["pods"]
        .as_array()
        .expect("the server's pods")
        .clone()
}

/// The run's answered requests over the pods' CPU seconds, from the result alone, checked
/// against the ratio it states.
fn check_ratio_over_every_pod(doc: &serde_json::Value) -> (f64, Vec<f64>) {
    let run = &doc["targets"][0]["runs"][0];
    let server = &run["servers"][0];
    let cpu: Vec<f64> = watched_pods(doc)
        .iter()
        .map(|p| p["cpu_s"].as_f64().unwrap())
        .collect();
    let sum: f64 = cpu.iter().sum();
    assert!(
        (server["cpu_s"].as_f64().unwrap() - sum).abs() < 1e-9,
        "the server's CPU is its pods' sum: {server}"
    );
    let requests = run["totals"]["requests"].as_u64().unwrap() as f64;
    let ratio = server["requests_per_cpu_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("a ratio: {server}"));
    assert!(
        (ratio - requests / sum).abs() <= 1e-9 * ratio,
        "{ratio} req per CPU-s stated, {requests} / {sum} = {}",
        requests / sum
    );
    (ratio, cpu)
}

#[test]
fn every_pod_of_a_variant_is_watched_and_a_replaced_one_followed() {
    let Some(c) = cluster() else { return };
    let ns = "replicas";
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    ok(&k8s(
        c,
        ns,
        &[
            "up",
            "--variant",
            "two:arch=amd64,replicas=2",
            "--config",
            conf.to_str().unwrap(),
            "--wait-timeout",
            "90s",
        ],
    ));
    let mut pods = pod_names(&ok(&k8s(c, ns, &["status"])));
    pods.sort();
    assert_eq!(pods.len(), 2, "{pods:?}");
    let served = |pod: &String| access_lines(c, ns, std::slice::from_ref(pod));
    let before: Vec<usize> = pods.iter().map(served).collect();
    // 16 connections through the Service: both pods answer (their own logs say so).
    let out = dir.path().join("steady");
    let text = ok(&k8s(
        c,
        ns,
        &[
            "load",
            "two",
            "-d",
            "3s",
            "-c",
            "16",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    ));
    for (pod, was) in pods.iter().zip(&before) {
        assert!(served(pod) > *was, "{pod} answered none of the load");
    }
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    let watched = watched_pods(&doc);
    let mut names: Vec<&str> = watched
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, pods, "{watched:?}");
    for p in &watched {
        assert_eq!(p["node"], "aks-intel-0", "{p}");
        assert!(p["cpu_s"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["not_measured"].is_null(), "{p}");
        assert!(
            text.contains(&format!(
                "pod {} on aks-intel-0: ",
                p["name"].as_str().unwrap()
            )),
            "{text}"
        );
    }
    let (ratio, cpu) = check_ratio_over_every_pod(&doc);
    eprintln!("two replicas: {cpu:?} CPU s, {ratio:.0} req per pod CPU-second");
    // What a pod cannot say is null with the reason, not a zero or a one.
    let server = &doc["targets"][0]["runs"][0]["servers"][0];
    assert!(
        server["context_switches"].is_null() && server["processes"].is_null(),
        "{server}"
    );
    let reasons = server["unmeasured"].as_array().unwrap();
    assert!(
        reasons.iter().any(|u| u["figure"] == "processes"),
        "{server}"
    );
    // A pod deleted mid-run: its replacement is followed from its start, the deleted one
    // keeps what it used, and the ratio is over all three.
    let out = dir.path().join("replaced");
    let child = k8s_command(
        c,
        ns,
        &[
            "load",
            "two",
            "-d",
            "6s",
            "-c",
            "16",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    )
    .spawn()
    .unwrap();
    let victim = pods[0].clone();
    let was = served(&victim);
    // Deleted once the load has worked it a while, not at its first request: the watch reads
    // each pod every 250 ms, and a pod read only once has no interval to measure (it failed
    // once so, deleted 0.25 s in: cpu_s 0). 5,000 requests take the pod 0.2-2 s here.
    crate::util::wait_until("the load to work the pod", PROMPTLY, || {
        served(&victim) > was + 5000
    });
    c.kubectl_ok(&["-n", ns, "delete", "pod", &victim, "--wait=false"]);
    let text = ok(&finish_within(child, PROMPTLY * 2));
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    let watched = watched_pods(&doc);
    assert_eq!(watched.len(), 3, "{watched:?}");
    let pod = |name: &str| watched.iter().find(|p| p["name"] == name).unwrap();
    let server = &doc["targets"][0]["runs"][0]["servers"][0];
    let sampled = server["sampled_s"].as_f64().unwrap();
    let gone = pod(&victim);
    assert!(
        gone["seen_until_s"].as_f64().unwrap() < sampled - 0.5,
        "{gone}"
    );
    let new = watched
        .iter()
        .find(|p| !pods.iter().any(|o| p["name"] == o.as_str()))
        .unwrap();
    assert!(new["seen_from_s"].as_f64().unwrap() > 0.0, "{new}");
    for p in &watched {
        assert!(p["cpu_s"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["not_measured"].is_null(), "{p}");
    }
    let events: Vec<&str> = server["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with(&format!("pod {victim} was deleted"))),
        "{events:?}"
    );
    let appeared = format!("pod {} of two appeared", new["name"].as_str().unwrap());
    assert!(
        events.iter().any(|e| e.starts_with(&appeared)),
        "{events:?}"
    );
    assert!(text.contains(&appeared), "{text}");
    let (ratio, cpu) = check_ratio_over_every_pod(&doc);
    eprintln!("a pod replaced: {cpu:?} CPU s, {ratio:.0} req per pod CPU-second");
    ok(&k8s(c, ns, &["down"]));
}

#[test]
fn login_gives_a_terminal_that_follows_the_window_and_is_restored() {
    if crate::util::require_tool("tmux").is_none() {
        return;
    }
    let Some(c) = cluster() else { return };
    let ns = "login";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    let session = format!("archbench-login-{}", std::process::id());
    let script = format!(
        "{} {} k8s --kubeconfig {} -n {ns} login arm; echo EXIT=$?; {}",
        c.laptop_shell_prefix(),
        env!("CARGO_BIN_EXE_archbench"),
        c.kubeconfig().display(),
        crate::util::PRINT_TERMINAL_MODES
    );
    let _pane = crate::util::tmux_pane(&session, &script);
    // A shell in the pod: it answers, and sees the pane's size.
    crate::util::wait_until("the pod's shell prompt", PROMPTLY, || {
        crate::util::tmux_capture(&session).contains('#')
    });
    crate::util::tmux(&[
        "send-keys",
        "-t",
        &session,
        "echo $((6*7)); stty size",
        "Enter",
    ]);
    crate::util::wait_until("the shell's answer", PROMPTLY, || {
        let screen = crate::util::tmux_capture(&session);
        screen.contains("\n42") && screen.contains("30 100")
    });
    crate::util::tmux(&["send-keys", "-t", &session, "exit 5", "Enter"]);
    crate::util::wait_until(
        "the exit status and the restored terminal",
        PROMPTLY,
        || crate::util::tmux_capture(&session).contains("EXIT=5"),
    );
    // Raw mode is gone: the local terminal is canonical and echoes again.
    crate::util::wait_until("stty's report", PROMPTLY, || {
        let screen = crate::util::tmux_capture(&session);
        crate::util::terminal_restored(&screen)
    });
}

#[test]
fn an_in_cluster_load_of_three_workers_is_one_run_merged_exactly() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    let ns = "incluster";
    let dir = tempfile::tempdir().unwrap();
    // nginx on the intel and arm pools only (the load node is amd64 too).
    let pods = up_by_pools_with(c, ns, &counted_conf(), dir.path());
    let served_before = access_lines(c, ns, &pods);
    let out = dir.path().join("results");
    // Open loop, 3 workers per target, 7 connections: shares 3, 2, 2.
    let child = k8s_command(
        c,
        ns,
        &[
            "load",
            "both",
            "--in-cluster",
            "--workers",
            "3",
            "-c",
            "7",
            "--rate",
            "300",
            "-d",
            "3s",
            "--per-worker",
            "--wait-timeout",
            "90s",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    )
    .spawn()
    .unwrap();
    // While it runs: six workers, all on the node without nginx (pod anti-affinity, applied
    // by the real scheduler).
    crate::util::wait_until("six load pods running", PROMPTLY, || {
        let p = load_pods(c, ns);
        p.len() == 6 && p.iter().all(|(_, _, phase)| phase == "Running")
    });
    for (name, node, _) in load_pods(c, ns) {
        assert_eq!(node, "aks-load-0", "{name}");
    }
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    let err = stderr(&o);
    assert!(err.contains("3/3 load workers ready"), "{err}");
    for t in ["intel", "arm"] {
        assert!(
            text.contains(&format!("{t} run 1: 3 workers merged, first sends")),
            "{text}"
        );
    }
    assert!(text.contains("worker 2 (pod archbench-load-arm-"), "{text}");
    let run_dir = the_run_dir(&out);
    let doc = read_json(run_dir.join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    let mut counted = 0;
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        counted += run["totals"]["requests"].as_u64().unwrap();
        assert_eq!(run["plan"]["connections"], 7, "{}", run["plan"]);
        assert_eq!(run["sources"].as_array().unwrap().len(), 3);
        let shares: Vec<u64> = run["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["plan"]["connections"].as_u64().unwrap())
            .collect();
        assert_eq!(shares, [3, 2, 2]);
        assert!(run["lost_sources"].as_array().unwrap().is_empty());
        // Started together: the first sends lie within the start's grace.
        let skew = run["start_skew_s"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&skew), "skew {skew}");
        // The nginx pod behind it was watched.
        assert!(
            run["servers"][0]["cpu_s"].as_f64().unwrap() > 0.0,
            "{}",
            run["servers"]
        );
        // Percentiles equal those of one histogram of every worker's own recording.
        let workers: Vec<serde_json::Value> = std::fs::read_dir(run_dir.join("workers"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .contains(&format!("-{}-", t["name"].as_str().unwrap()))
            })
            .flat_map(|job| std::fs::read_dir(job).unwrap())
            .map(|e| read_json(e.unwrap().path()))
            .collect();
        assert_eq!(workers.len(), 3);
        let mut all = archbench::stats::latency_histogram();
        let mut requests = 0;
        for w in &workers {
            requests += w["totals"]["requests"].as_u64().unwrap();
            let h: archbench::stats::SerializedHistogram =
                serde_json::from_value(w["histograms"]["total"].clone()).unwrap();
            all.add(&h.0).unwrap();
        }
        assert_eq!(requests, run["totals"]["requests"].as_u64().unwrap());
        for (q, key) in [(0.5, "p50_us"), (0.99, "p99_us")] {
            assert_eq!(
                all.value_at_quantile(q),
                run["latency"]["total"][key].as_u64().unwrap(),
                "{key}"
            );
        }
    }
    // 300 req/s for 3 s on each target, through kube-proxy's ClusterIP rules: every request
    // counted was answered by nginx, and nginx answered at most one more per connection (in
    // flight at the deadline).
    assert!(counted > 1_500, "{counted}");
    let served = caught_up(counted, || {
        (access_lines(c, ns, &pods) - served_before) as u64
    });
    assert!(
        served >= counted && served <= counted + 14,
        "nginx logged {served}, archbench counted {counted}"
    );
    // The Jobs are gone with their pods (the garbage collector's work).
    crate::util::wait_until("the load pods gone", PROMPTLY, || {
        load_pods(c, ns).is_empty()
    });
    ok(&k8s(c, ns, &["down"]));
}

#[test]
fn a_load_worker_killed_mid_run_is_reported_lost_and_the_rest_kept() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    let ns = "killed";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    ok(&k8s(
        c,
        ns,
        &["config", conf.to_str().unwrap(), "--wait-timeout", "90s"],
    ));
    let starts = |c: &TestCluster| {
        audited(c, |verb, uri| {
            verb == "create"
                && uri.starts_with(&format!("/api/v1/namespaces/{ns}/pods/"))
                && uri.ends_with(":9090/proxy/start")
        })
    };
    let child = k8s_command(
        c,
        ns,
        &[
            "load",
            "arm",
            "--in-cluster",
            "--workers",
            "3",
            "-c",
            "6",
            "-d",
            "4s",
            "--node-selector",
            "agentpool=load",
            "--out-dir",
            dir.path().join("killed").to_str().unwrap(),
        ],
    )
    .spawn()
    .unwrap();
    // Once every worker has been given its start, kill worker 1's process.
    crate::util::wait_until("three starts through the pod proxy", PROMPTLY, || {
        starts(c) == 3
    });
    let victim = load_pods(c, ns)
        .into_iter()
        .find(|(name, _, _)| name.contains("-1-"))
        .unwrap();
    assert_eq!(victim.1, "aks-load-0", "--node-selector agentpool=load");
    c.kill_pod(ns, &victim.0);
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    assert!(text.contains("arm run 1: 2 workers merged"), "{text}");
    assert!(
        text.contains(&format!("lost worker 1 (pod {})", victim.0)),
        "{text}"
    );
    assert!(
        stderr(&o).contains("the figures lack its 2 connections"),
        "{}",
        stderr(&o)
    );
    let doc = read_json(the_run_dir(&dir.path().join("killed")).join("k8s-load.json"));
    let run = &doc["targets"][0]["runs"][0];
    assert_eq!(run["sources"].as_array().unwrap().len(), 2);
    let lost = &run["lost_sources"][0];
    assert_eq!(lost["connections"], 2);
    assert!(
        lost["reason"].as_str().unwrap().contains("exit 137"),
        "{lost}"
    );
    assert!(run["totals"]["requests"].as_u64().unwrap() > 0);
    assert!(
        run["limiter"]["reason"]
            .as_str()
            .unwrap()
            .contains("1 worker(s) lost"),
        "{}",
        run["limiter"]
    );
    crate::util::wait_until("the load pods gone", PROMPTLY, || {
        load_pods(c, ns).is_empty()
    });
    // Ctrl-C mid-run: the workers stop, what they measured is merged and saved, the Job goes.
    let out = dir.path().join("interrupted");
    let child = k8s_command(
        c,
        ns,
        &[
            "load",
            "arm",
            "--in-cluster",
            "--workers",
            "2",
            "-c",
            "2",
            "-d",
            "50s",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    )
    .spawn()
    .unwrap();
    crate::util::wait_until("two more starts", PROMPTLY, || starts(c) == 5);
    let pods = pod_names(&ok(&k8s(c, ns, &["status"])));
    let before = access_lines(c, ns, &pods);
    crate::util::wait_until("requests of this run reaching nginx", PROMPTLY, || {
        access_lines(c, ns, &pods) > before
    });
    let child = crate::util::KillOnDrop::new(child);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    assert_eq!(doc["interrupted"], true, "{doc}");
    let run = &doc["targets"][0]["runs"][0];
    assert_eq!(run["sources"].as_array().unwrap().len(), 2, "{run}");
    assert!(run["totals"]["requests"].as_u64().unwrap() > 0);
    assert!(run["totals"]["elapsed_s"].as_f64().unwrap() < 40.0);
    crate::util::wait_until("the load pods gone", PROMPTLY, || {
        load_pods(c, ns).is_empty()
    });
    // A load Job left over (say, by a controller that was killed): `down` removes it.
    kubectl_apply(
        c,
        &format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: archbench-load-arm-leftover\n  namespace: {ns}\n  \
             labels: {{app.kubernetes.io/managed-by: archbench}}\nspec:\n  template:\n    spec:\n      \
             restartPolicy: Never\n      containers: [{{name: archbench, image: \"archbench:0.1.0\", args: [--version]}}]\n"
        ),
    );
    let down = ok(&k8s(c, ns, &["down"]));
    assert!(
        down.contains("Job archbench-load-arm-leftover: deleted"),
        "{down}"
    );
}

#[test]
fn in_cluster_flags_are_checked_before_any_cluster_is_asked() {
    for (args, says) in [
        (&["load", "both", "--workers", "3"][..], "--in-cluster"),
        (
            &["load", "both", "--in-cluster", "--workers", "0"][..],
            "--workers 0: give 1 to 1000",
        ),
        (
            &["load", "both", "--in-cluster", "--workers", "1001"][..],
            "--workers 1001: give 1 to 1000",
        ),
        (
            &["load", "arm", "--in-cluster", "--workers", "9", "-c", "4"][..],
            "every worker needs a connection",
        ),
        (
            &["load", "arm", "--in-cluster", "--node-selector", "pool"][..],
            "use KEY=VALUE",
        ),
        (
            &["load", "arm", "--in-cluster", "--prometheus", "9464"][..],
            "--in-cluster workers report only when they end",
        ),
        (
            &["up", "--variant", "q:image=caddy:2,workers=2"][..],
            "q: config= and workers= set nginx's configuration; a Caddy variant (caddy:2)",
        ),
        (
            &["up", "--http3", "--config", "stock"][..],
            "--http3: intel: https needs a configuration to listen on 443 in",
        ),
        (
            &["sweep", "both", "--streams", "4", "--connections", "1,2"][..],
            "--streams needs --http2 or --http3",
        ),
        (
            &["load", "both", "--streams", "4"][..],
            "--streams needs --http2",
        ),
        // The multi-arch Service's pods are the variants': side by side, both loads would
        // share them.
        (
            &["load", "all", "multiarch"][..],
            "multiarch is served by the same pods as all",
        ),
    ] {
        // No cluster exists at this address: a usage error must come first.
        let o = crate::util::bin()
            .args(["k8s", "--kubeconfig", "/nonexistent/kubeconfig"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
    // The worker's own command: a control address that is none.
    let o = crate::util::bin()
        .args(["agent", "http://127.0.0.1:1/", "--control", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--control nowhere"), "{}", stderr(&o));
    // Without a token its endpoint (every address, by default) would start a load for anyone:
    // it refuses unless told the endpoint is open on purpose; both at once is a contradiction.
    for (extra, token, says) in [
        (
            &[][..],
            None,
            "no control token: set ARCHBENCH_CONTROL_TOKEN",
        ),
        (
            &[][..],
            Some(""),
            "no control token: set ARCHBENCH_CONTROL_TOKEN",
        ),
        (
            &["--control-no-auth"][..],
            Some("s3cret"),
            "and --control-no-auth; give one",
        ),
    ] {
        let mut cmd = crate::util::bin();
        cmd.args(["agent", "http://127.0.0.1:1/", "--control", "127.0.0.1:0"])
            .args(extra)
            .env_remove("ARCHBENCH_CONTROL_TOKEN");
        if let Some(t) = token {
            cmd.env("ARCHBENCH_CONTROL_TOKEN", t);
        }
        let o = cmd.output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{extra:?} {token:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(says),
            "{extra:?} {token:?}: {}",
            stderr(&o)
        );
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
}

/// An agent on a free loopback port with these extra arguments and token: the process
/// (killed on drop), its stderr lines up to the one that says where it listens, and that
/// address.
fn start_agent(
    url: &str,
    extra: &[&str],
    token: Option<&str>,
) -> (crate::util::KillOnDrop, Vec<String>, String) {
    let mut cmd = crate::util::bin();
    cmd.args(["agent", url, "-c", "2", "-d", "1s", "--part", "1/2"])
        .args(["--control", "127.0.0.1:0"])
        .args(extra)
        .env_remove("ARCHBENCH_CONTROL_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("ARCHBENCH_CONTROL_TOKEN", t);
    }
    let mut child = cmd.spawn().unwrap();
    let err = crate::util::LineReader::new(child.stderr.take().unwrap());
    let child = crate::util::KillOnDrop::new(child);
    let deadline = std::time::Instant::now() + PROMPTLY;
    let mut lines = Vec::new();
    loop {
        // The next line, whatever it says (every line contains "").
        let line = err.wait_for(
            "",
            deadline.saturating_duration_since(std::time::Instant::now()),
        );
        if let Some((_, addr)) = line.split_once("waiting for its start on ") {
            let addr = addr.trim().to_string();
            lines.push(line);
            return (child, lines, addr);
        }
        lines.push(line);
    }
}

/// One HTTP/1.1 request to a worker's control endpoint: the status code and body.
fn control_request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PROMPTLY)).unwrap();
    let token = token
        .map(|t| format!("X-Archbench-Token: {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{token}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        text.split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string(),
    )
}

#[test]
fn a_worker_takes_orders_only_with_its_token_and_prints_its_result() {
    let server = crate::util::ServeChild::start(&[]);
    let (child, _err, addr) = start_agent(&server.url, &[], Some("s3cret"));
    assert_eq!(
        control_request(&addr, "GET", "/ready", None, ""),
        (200, "ready 1/2\n".into())
    );
    // Without the token (any pod can reach the port), or with another, nothing starts.
    let soon = archbench::timefmt::rfc3339_micros(std::time::SystemTime::now());
    assert_eq!(control_request(&addr, "POST", "/start", None, &soon).0, 403);
    assert_eq!(
        control_request(&addr, "POST", "/start", Some("guess"), &soon).0,
        403
    );
    // Nor with the token's first part, or the token and more (no prefix match).
    for near in ["s3cre", "s3cret2", ""] {
        assert_eq!(
            control_request(&addr, "POST", "/start", Some(near), &soon).0,
            403,
            "{near:?}"
        );
    }
    assert_eq!(control_request(&addr, "POST", "/stop", None, "").0, 403);
    assert_eq!(control_request(&addr, "GET", "/result", None, "").0, 503);
    let (status, text) = control_request(&addr, "POST", "/start", Some("s3cret"), &soon);
    assert_eq!(status, 200, "{text}");
    let o = child.finish_within(PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let json = out
        .lines()
        .find_map(|l| l.strip_prefix(archbench::agent_protocol::RESULT_PREFIX))
        .unwrap_or_else(|| panic!("no result line in {out}"));
    let r: serde_json::Value = serde_json::from_str(json).unwrap();
    assert!(r["totals"]["requests"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["plan"]["part"]["index"], 1);
    assert_eq!(r["plan"]["connections"], 1);
    assert_eq!(r["started_at"], soon.as_str());
}

#[test]
fn a_worker_open_on_purpose_takes_orders_without_a_token() {
    let server = crate::util::ServeChild::start(&[]);
    let (child, err, addr) = start_agent(&server.url, &["--control-no-auth"], None);
    assert!(
        err.iter()
            .any(|l| l.contains("--control-no-auth: anyone who reaches")),
        "{err:?}"
    );
    let soon = archbench::timefmt::rfc3339_micros(std::time::SystemTime::now());
    let (status, text) = control_request(&addr, "POST", "/start", None, &soon);
    assert_eq!(status, 200, "{text}");
    let o = child.finish_within(PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(archbench::agent_protocol::RESULT_PREFIX),
        "{}",
        stdout(&o)
    );
}

/// `k8s load both` with live metrics: both architectures' counters and their pods' CPU, as a
/// scraper sees them, ending at the comparison's figures. The scraper runs where the
/// endpoint is (the cluster's namespace).
#[test]
fn load_both_serves_live_metrics_for_both_targets_and_their_pods() {
    use crate::util::prometheus::{one, parse, parser_available, scrape, serving};
    if !parser_available() {
        return;
    }
    let Some(c) = cluster() else { return };
    let ns = "live";
    ok(&k8s(c, ns, &["up", "--wait-timeout", "90s"]));
    let dir = tempfile::tempdir().unwrap();
    let cmd = k8s_command(
        c,
        ns,
        &[
            "load",
            "both",
            "-d",
            "2s",
            "-c",
            "2",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
    );
    let (child, err, addr) = serving(cmd);
    let scrape = || {
        let addr = addr.clone();
        c.laptop_within(move || scrape(&addr))
    };
    // While both load: each pod's CPU is there, labelled by its target.
    crate::util::wait_until("both pods' CPU in the metrics", PROMPTLY, || {
        let s = parse(&scrape());
        s.get("archbench_server_cpu_cores").is_some_and(|v| {
            ["intel", "arm"].iter().all(|t| {
                v.iter().any(|(l, _)| {
                    l.get("target").map(String::as_str) == Some(*t)
                        && l.get("server")
                            .is_some_and(|p| p.starts_with(&format!("pod:{ns}/")))
                })
            })
        })
    });
    err.wait_for("--linger", PROMPTLY * 2);
    let s = parse(&scrape());
    let doc = read_json(the_run_dir(dir.path()).join("k8s-load.json"));
    for t in doc["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        // k8s load runs no warm-up unless asked: the counter is the measured run's.
        let requests: u64 = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["totals"]["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(
            one(&s, "archbench_requests_total", &[("target", name)]),
            requests as f64,
            "{name}"
        );
    }
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    ok(&k8s(c, ns, &["down"]));
}

/// RBAC as the API server enforces it: a user who may only read in the namespace cannot
/// `up` (one line naming what it lacks), and can read `status`.
#[test]
fn a_read_only_user_is_told_what_it_may_not_do() {
    let Some(c) = cluster() else { return };
    let ns = "rbac";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    let reader = user_with_role(
        c,
        "reader",
        ns,
        "- {apiGroups: [\"*\"], resources: [\"*\"], verbs: [get, list, watch]}",
    );
    let o = k8s_as(c, &reader, ns, &["up", "--arch", "arm"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("User \"reader\" cannot patch resource")
            && err.contains(&format!("in the namespace \"{ns}\""))
            && err.contains("archbench needs to patch"),
        "{err}"
    );
    // Reading is allowed: status lists the pods (nodes are read where the user may).
    let status = ok(&k8s_as(c, &reader, ns, &["status"]));
    assert!(status.contains("nginx-arm-deployment-"), "{status}");
    // The build is not read, and the line says why as it was: the exec its Role lacks (the
    // nodes it may not read no longer stop the reading; a guess named exec either way).
    assert!(
        status
            .contains("arm: CPU and nginx build not read: forbidden: pods \"nginx-arm-deployment-")
            && status.contains("(RBAC: archbench needs to create pods/exec)"),
        "{status}"
    );
    ok(&k8s(c, ns, &["down"]));
}

/// Authentication as AKS does it: an `exec:` credential plugin in the kubeconfig (kubelogin
/// there; here a script printing an ExecCredential with a service-account token the API
/// server accepts). And a kubeconfig whose CA is not the server's: a clear TLS error, soon.
#[test]
fn an_exec_credential_plugin_authenticates_and_a_wrong_ca_is_refused() {
    let Some(c) = cluster() else { return };
    let ns = "auth";
    c.kubectl_ok(&["create", "namespace", ns]);
    c.kubectl_ok(&["-n", ns, "create", "serviceaccount", "aks-user"]);
    c.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "auth-aks-user",
        "--clusterrole=view",
        &format!("--serviceaccount={ns}:aks-user"),
    ]);
    let token = c.kubectl_ok(&["-n", ns, "create", "token", "aks-user", "--duration=1h"]);
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls");
    let plugin = dir.path().join("credential-plugin");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho called >> {}\nprintf '%s' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\"}}}}'\n",
            calls.display(),
            token.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ca = std::fs::read(c.dir().join("pki/ca.crt")).unwrap();
    let server = archbench_cluster::topology::apiserver_url();
    let kubeconfig = |ca_pem: Vec<u8>, credentials| archbench_cluster::pki::Kubeconfig {
        server: server.clone(),
        ca_pem,
        user: "aks-user".into(),
        credentials,
        namespace: None,
    };
    let exec = dir.path().join("exec.kubeconfig");
    let with_plugin = kubeconfig(
        ca.clone(),
        archbench_cluster::pki::Credentials::Exec {
            command: plugin.display().to_string(),
            args: Vec::new(),
        },
    );
    std::fs::write(&exec, with_plugin.render()).unwrap();
    let status = ok(&k8s_as(c, &exec, ns, &["status"]));
    assert!(status.contains("no pods of archbench's"), "{status}");
    assert!(
        std::fs::read_to_string(&calls).unwrap().contains("called"),
        "the plugin was asked"
    );
    // The API server saw the service account, not the admin.
    let as_user = audited(c, |verb, uri| {
        verb == "list" && uri.starts_with(&format!("/api/v1/namespaces/{ns}/pods"))
    });
    assert!(as_user > 0);
    // Another CA: refused at the handshake, in one line that says it is the certificate.
    let other = rcgen::generate_simple_self_signed(vec!["elsewhere".to_string()]).unwrap();
    let wrong = dir.path().join("wrong-ca.kubeconfig");
    let with_wrong_ca = kubeconfig(
        other.cert.pem().into_bytes(),
        archbench_cluster::pki::Credentials::Exec {
            command: plugin.display().to_string(),
            args: Vec::new(),
        },
    );
    std::fs::write(&wrong, with_wrong_ca.render()).unwrap();
    let started = std::time::Instant::now();
    let o = k8s_as(c, &wrong, ns, &["status"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(&server), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "no hang"
    );
    c.kubectl_ok(&["delete", "clusterrolebinding", "auth-aks-user"]);
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// In-cluster config: `archbench k8s status` run as a pod finds the API server by the
/// `kubernetes` Service and authenticates with the token its node projected, within what
/// its Role allows.
#[test]
fn archbench_in_a_pod_uses_its_service_account() {
    let Some(c) = cluster() else { return };
    let ns = "incfg";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    kubectl_apply(
        c,
        &format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: prober, namespace: {ns}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: prober, namespace: {ns}}}\n\
             rules: [{{apiGroups: [\"\"], resources: [pods, services], verbs: [get, list]}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: prober, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: prober}}\n\
             subjects: [{{kind: ServiceAccount, name: prober, namespace: {ns}}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: incfg-nodes}}\n\
             rules: [{{apiGroups: [\"\"], resources: [nodes], verbs: [get, list]}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: incfg-nodes}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: incfg-nodes}}\n\
             subjects: [{{kind: ServiceAccount, name: prober, namespace: {ns}}}]\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: status, namespace: {ns}}}\nspec:\n  \
             serviceAccountName: prober\n  restartPolicy: Never\n  \
             containers: [{{name: archbench, image: \"archbench:test\", args: [k8s, -n, {ns}, status]}}]\n"
        ),
    );
    crate::util::wait_until("the status pod to finish", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "status"]);
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    });
    let log = c.kubectl_ok(&["-n", ns, "logs", "status"]);
    let p = c.get_json(&["-n", ns, "pod", "status"]);
    assert_eq!(p["status"]["phase"], "Succeeded", "{log}");
    assert!(log.contains("nginx-arm-deployment-"), "{log}");
    // It was the pod's service account that asked.
    let by_sa = c
        .audit()
        .iter()
        .filter(|e| e["user"]["username"] == format!("system:serviceaccount:{ns}:prober"))
        .count();
    assert!(by_sa > 0);
    c.kubectl_ok(&["delete", "clusterrolebinding", "incfg-nodes"]);
    c.kubectl_ok(&["delete", "clusterrole", "incfg-nodes"]);
    c.kubectl_ok(&["-n", ns, "delete", "pod", "status"]);
    ok(&k8s(c, ns, &["down"]));
}

/// Server-side apply against another field manager: someone scaled the Deployment with
/// kubectl, to none; a load says so (exit 1: the command line was right), and `up` takes the
/// replicas back (archbench owns what it declares, as `kubectl apply --server-side
/// --force-conflicts` would) and says what it took over.
#[test]
fn up_says_what_it_takes_over_from_another_field_manager() {
    let Some(c) = cluster() else { return };
    let ns = "conflict";
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    c.kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "deployment",
        "nginx-arm-deployment",
        "--replicas=0",
    ]);
    crate::util::wait_until("the arm pod gone", PROMPTLY, || {
        let pods = c.get_json(&["-n", ns, "pods"]);
        pods["items"].as_array().is_some_and(|p| p.is_empty())
    });
    let o = k8s(c, ns, &["load", "arm", "-d", "1s", "-c", "1"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("its Deployment nginx-arm-deployment is scaled to 0 replicas"),
        "{err}"
    );
    // The scale subresource records no owner of a zero: taken over all the same, and said.
    let up = ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    assert!(
        up.contains(
            "Deployment nginx-arm-deployment: configured, taking over .spec.replicas (it was 0, \
             set outside archbench)"
        ),
        "{up}"
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "deployment",
        "nginx-arm-deployment",
        "--replicas=2",
    ]);
    let up = ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    assert!(
        up.contains(
            "Deployment nginx-arm-deployment: configured, taking over .spec.replicas (from kubectl"
        ),
        "{up}"
    );
    let d = c.get_json(&["-n", ns, "deployment", "nginx-arm-deployment"]);
    assert_eq!(d["spec"]["replicas"], 1);
    // Taken back, nothing is left to take: the next up changes nothing.
    let again = ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    assert!(again.contains("nothing changed"), "{again}");
    ok(&k8s(c, ns, &["down"]));
}

/// Validation by the real API server: what it refuses reaches the user in one line, with
/// the server's own words.
#[test]
fn what_the_api_server_refuses_is_one_line() {
    let Some(c) = cluster() else { return };
    let ns = "invalid";
    let o = k8s(c, ns, &["up", "--arch", "arm", "--image", "nginx:1.27 "]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The Deployment's validation lets it through; the ReplicaSet's pods are refused, and
    // the rollout stops there with the API server's words (not at the wait's end).
    let err = stderr(&o);
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("archbench:"))
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("must not have leading or trailing whitespace"),
        "{err}"
    );
    // A namespace name the server's validation would refuse is a usage error before any
    // request to it, in the server's own terms (an RFC 1123 label).
    let o = k8s(c, "Not_A_Namespace", &["up", "--arch", "arm"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("a namespace is 1 to 63 lowercase letters, digits and '-'"),
        "{err}"
    );
    // After the refusals, a good image rolls out in the same namespace.
    ok(&k8s(
        c,
        ns,
        &["up", "--arch", "arm", "--wait-timeout", "90s"],
    ));
    ok(&k8s(c, ns, &["down"]));
}

/// The image the variants test's node agent runs another nginx build for.
/// Another nginx build for the test cluster's `nginx_builds`: a program in `dir` that runs
/// `on_version(REAL)` for `nginx -V` (REAL: the distribution's nginx, copied beside it) and
/// then, unless that exits, the real nginx with its arguments.
fn nginx_build(dir: &Path, name: &str, on_version: impl Fn(&str) -> String) -> PathBuf {
    let real = dir.join(format!("nginx-real-{name}"));
    std::fs::copy("/usr/sbin/nginx", &real).unwrap();
    let program = dir.join(format!("nginx-{name}"));
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" -V \"*) {};; esac\nexec {} \"$@\"\n",
            on_version(&real.display().to_string()),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    program
}

const ATOMICS_IMAGE: &str = "registry.example/nginx:outline-atomics";
/// The image whose nginx takes 3 s to stop.
const SLOW_STOP_IMAGE: &str = "registry.example/nginx:slow-stop";

/// Two variants of one architecture told apart by instance type (the guide's "how do larger
/// instance types scale" setup), on a cluster with a 2-core and an 8-core amd64 node: one `up`
/// deploys both, each where its selector says, sized and configured as asked; curl, load,
/// config, status and down take their names.
#[test]
fn variants_by_instance_type_deploy_side_by_side_and_are_told_apart() {
    if !can_run() {
        return;
    }
    // A cluster of its own: the load node of the others runs their load workers, whose CPU
    // requests would leave the large variant's pods Pending.
    let mut nodes = archbench_cluster::topology::default_nodes();
    nodes.push(NodeSpec::new(2, "aks-big-0", "amd64", "big", "Standard_D8s_v6").sized(8, 32));
    // A second nginx build for one image: the distribution's nginx, its `nginx -V` saying it
    // was built with -moutline-atomics (what an image of one's own would be).
    let builds = tempfile::tempdir().unwrap();
    let atomics = nginx_build(builds.path(), "atomics", |real| {
        format!("{real} -V 2>&1 | sed 's/^configure arguments:/configure arguments: --with-cc-opt=-moutline-atomics/' >&2; exit 0")
    });
    let mut opts = options(Some(nodes));
    opts.nginx_builds = vec![(ATOMICS_IMAGE.into(), atomics)];
    let c = TestCluster::start(&opts, "variants").unwrap_or_else(|e| panic!("{e}"));
    let c = &c;
    let ns = "variants";
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    let small = "small:arch=amd64,instance-type=Standard_D2s_v6,cpu=1,memory=256Mi";
    let large = "large:instance-type=Standard_D8s_v6,cpu=4,memory=1Gi,replicas=2,workers=2";
    let up_args = [
        "up",
        "--variant",
        small,
        "--variant",
        large,
        "--config",
        conf.to_str().unwrap(),
        "--wait-timeout",
        "90s",
    ];
    let up = ok(&k8s(c, ns, &up_args));
    for made in [
        "ConfigMap nginx-config: created",
        "ConfigMap nginx-large-config: created",
        "Deployment nginx-small-deployment: created",
        "Deployment nginx-large-deployment: created",
        "Service nginx-small-svc: created",
        "Service nginx-large-svc: created",
    ] {
        assert!(up.contains(made), "{made} in {up}");
    }
    // Where each runs and how big it is, from the real scheduler's placement.
    let rows: Vec<&str> = up.lines().filter(|l| l.starts_with("small ")).collect();
    assert_eq!(rows.len(), 1, "{up}");
    for want in [
        "aks-intel-0",
        "Standard_D2s_v6",
        "2 cpu, 8Gi",
        "1 cpu, 256Mi",
        " yes ",
    ] {
        assert!(rows[0].contains(want), "{want} in {}", rows[0]);
    }
    let rows: Vec<&str> = up.lines().filter(|l| l.starts_with("large ")).collect();
    assert_eq!(rows.len(), 2, "two replicas: {up}");
    for row in &rows {
        for want in [
            "aks-big-0",
            "Standard_D8s_v6",
            "8 cpu, 32Gi",
            "4 cpu, 1Gi",
            " yes ",
        ] {
            assert!(row.contains(want), "{want} in {row}");
        }
    }
    let again = ok(&k8s(c, ns, &up_args));
    assert!(again.contains("nothing changed"), "{again}");
    // Guaranteed pods (requests = limits), labelled with their variant and architecture;
    // the large one runs the shared configuration with its own worker_processes.
    let pod = c.get_json(&["-n", ns, "pods", "-l", "variant=large"]);
    let first = &pod["items"][0];
    assert_eq!(first["status"]["qosClass"], "Guaranteed", "{first}");
    let cm = c.get_json(&["-n", ns, "configmap", "nginx-large-config"]);
    let text = cm["data"]["nginx.conf"].as_str().unwrap();
    assert!(text.starts_with("worker_processes 2;"), "{text}");
    assert!(
        text.contains("access_log /var/log/nginx/access.log counted if=$counted;"),
        "{text}"
    );
    let small_pod = c.get_json(&["-n", ns, "pods", "-l", "variant=small"]);
    assert_eq!(small_pod["items"][0]["metadata"]["labels"]["arch"], "amd64");
    // curl by name; the multi-arch service spreads over every variant's pods.
    let one = ok(&k8s(c, ns, &["curl", "large"]));
    assert!(one.contains("answered by nginx-large-deployment-"), "{one}");
    // load of both variants and the multi-arch service, in the order named (the first the
    // baseline), every request counted one the pods' nginx logged.
    let status = ok(&k8s(c, ns, &["status"]));
    // Under the table, what each variant runs: its CPU and its nginx build.
    let model = archbench::os::cpu_model_in(&std::fs::read_to_string("/proc/cpuinfo").unwrap());
    assert!(
        status.contains(&format!("small: {model} (amd64); nginx version: nginx/")),
        "{status}"
    );
    let pods = pod_names(&status);
    assert_eq!(pods.len(), 3, "{status}");
    let out = dir.path().join("results");
    let served_before = access_lines(c, ns, &pods);
    let prices = dir.path().join("prices.csv");
    std::fs::write(
        &prices,
        "instance_type,price_per_hour\n# the test's own figures\nStandard_D2s_v6,0.096\nStandard_D8s_v6,0.384\n",
    )
    .unwrap();
    let text = ok(&k8s(
        c,
        ns,
        &[
            "load",
            "small",
            "large",
            "-d",
            "1s",
            "-c",
            "2",
            "--prices",
            prices.to_str().unwrap(),
            "--slo",
            "errors<50%",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    ));
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    // What each ran on, and its price from its node's instance type: its share of the node's
    // allocatable CPU (1 of 2 cores; 4 of 8, twice).
    assert!(
        text.contains(&format!(
            "Ran on     small: aks-intel-0 (Standard_D2s_v6, amd64, {}; 2 cpu, 8.00 GiB allocatable); limits 1 cpu, 256.00 MiB; 1 replica",
            archbench::os::cpu_model_in(&std::fs::read_to_string("/proc/cpuinfo").unwrap())
        )),
        "{text}"
    );
    assert!(
        text.contains("Scaling    large vs small: 8.00x the vCPUs (8 vs 1)"),
        "{text}"
    );
    for (k, want) in [(0, 0.096 * 0.5), (1, 0.384 * 0.5 * 2.0)] {
        let cost = &doc["cost"][k];
        let price = cost["price_per_hour"].as_f64().unwrap();
        assert!((price - want).abs() < 1e-9, "{cost}");
        let rps = cost["requests_per_sec"].as_f64().unwrap();
        let per_million = cost["cost_per_million"].as_f64().unwrap();
        assert!((per_million - want / (rps * 3600.0) * 1e6).abs() < 1e-9 * per_million);
    }
    assert_eq!(
        doc["cost"][1]["basis"],
        "Standard_D8s_v6 at 0.384/h x 4 of 8 cpu x 2 replicas"
    );
    assert_eq!(doc["placements"][1]["node"], "aks-big-0");
    let scaling = &doc["scaling"][0];
    let ratio = (scaling["requests_per_sec"].as_f64().unwrap()
        / scaling["baseline_requests_per_sec"].as_f64().unwrap())
        / 8.0;
    // A verdict per vCPU only where both sides' servers limited the load; else the figures
    // stay and the verdict is withheld, naming the side and why.
    let sides: Vec<String> = [0, 1]
        .iter()
        .map(|&k| doc["targets"][k]["runs"][0]["limiter"]["side"].to_string())
        .collect();
    if sides.iter().all(|s| s == "\"server\"") {
        assert!((scaling["efficiency"].as_f64().unwrap() - ratio).abs() < 1e-9);
        assert!(scaling["withheld"].is_null(), "{scaling}");
        // The guide's claim, measured under the SLO both met.
        assert!(
            text.contains("x its requests per dollar at errors<50%)"),
            "{text}"
        );
        assert!(doc["cost"][1]["withheld"].is_null(), "{}", doc["cost"]);
    } else {
        assert!(scaling["efficiency"].is_null(), "{sides:?}: {scaling}");
        let why = scaling["withheld"].as_str().unwrap();
        assert!(why.contains("its servers did not limit it"), "{why}");
        assert!(text.contains("no scaling verdict: "), "{text}");
        // Nor a verdict per dollar: the costs stay, the comparison of them is withheld.
        assert!(
            text.contains("(no per-dollar verdict against small: "),
            "{text}"
        );
        assert!(!text.contains("x its requests per dollar"), "{text}");
    }
    // A price list without a variant's instance type is refused before any load.
    std::fs::write(&prices, "Standard_D2s_v6,0.096\n").unwrap();
    let o = k8s(
        c,
        ns,
        &[
            "load",
            "small",
            "large",
            "-d",
            "1s",
            "--prices",
            prices.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no price for Standard_D8s_v6, the instance type large runs on"),
        "{}",
        stderr(&o)
    );
    let names: Vec<&str> = doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["small", "large"]);
    let counted: u64 = doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["runs"][0]["totals"]["requests"].as_u64().unwrap())
        .sum();
    let served = caught_up(counted, || {
        (access_lines(c, ns, &pods) - served_before) as u64
    });
    assert!(
        counted > 0 && served >= counted && served <= counted + 6,
        "nginx logged {served}, archbench counted {counted}"
    );
    // The multi-arch Service on its own (beside them it is refused: its pods are theirs),
    // every variant's pods watched under it.
    let multi_out = dir.path().join("multi");
    ok(&k8s(
        c,
        ns,
        &[
            "load",
            "multiarch",
            "-d",
            "1s",
            "-c",
            "2",
            "--out-dir",
            multi_out.to_str().unwrap(),
        ],
    ));
    let multi = read_json(the_run_dir(&multi_out).join("k8s-load.json"));
    let mut labels: Vec<&str> = multi["targets"][0]["runs"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    labels.sort_unstable();
    assert_eq!(labels, ["multiarch/large", "multiarch/small"]);
    // The output flags compare and sweep take: -o json on stdout, --markdown and --html
    // files, --slo judged (an objective nothing meets: exit 1, the miss named).
    let md = dir.path().join("load.md");
    let page = dir.path().join("load.html");
    let o = k8s(
        c,
        ns,
        &[
            "load",
            "small",
            "large",
            "-d",
            "1s",
            "-c",
            "1",
            "-o",
            "json",
            "--slo",
            "p99<1us",
            "--markdown",
            md.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("SLO not met"), "{}", stderr(&o));
    let printed: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    crate::util::schema::assert_valid(&printed);
    assert_eq!(
        printed["slo"][0]["outcome"]["passed"], false,
        "{}",
        printed["slo"]
    );
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("**Ran on** small: aks-intel-0"));
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
    // k8s sweep: both variants at three loads, interleaved, their pods watched at every
    // step; every request counted one the pods logged; the document `report --html` draws.
    let sweep_out = dir.path().join("sweep");
    let html = dir.path().join("sweep.html");
    let served_before = access_lines(c, ns, &pods);
    let text = ok(&k8s(
        c,
        ns,
        &[
            "sweep",
            "small",
            "large",
            "-c",
            "1,2,4",
            "-d",
            "1s",
            "--no-warmup",
            "--cost",
            "small=0.096",
            "--cost",
            "large=0.384",
            "--out-dir",
            sweep_out.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--markdown",
            dir.path().join("sweep.md").to_str().unwrap(),
        ],
    ));
    let md = std::fs::read_to_string(dir.path().join("sweep.md")).unwrap();
    assert!(md.contains("Per dollar large: "), "{md}");
    assert!(text.contains("small") && text.contains("large"), "{text}");
    let doc = read_json(the_run_dir(&sweep_out).join("k8s-sweep.json"));
    crate::util::schema::assert_valid(&doc);
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{doc}");
    let mut counted = 0;
    let mut runs = 0;
    for step in steps {
        for t in step["comparison"]["targets"].as_array().unwrap() {
            for run in t["runs"].as_array().unwrap() {
                runs += 1;
                counted += run["totals"]["requests"].as_u64().unwrap();
                let server = &run["servers"][0];
                assert!(
                    server["target"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("pod:{ns}/nginx-")),
                    "{server}"
                );
                assert!(server["cpu_s"].as_f64().unwrap() > 0.0, "{server}");
            }
        }
    }
    // Every step's pod memory, from the same runs' servers.
    for t in doc["targets"].as_array().unwrap() {
        for p in t["points"].as_array().unwrap() {
            assert!(p["server_memory_bytes"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
    let first: Vec<&str> = steps[0]["comparison"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(first, ["small", "large"]);
    let served = caught_up(counted, || {
        (access_lines(c, ns, &pods) - served_before) as u64
    });
    // At most one request in flight per connection when a run's time ran out.
    assert!(
        counted > 0 && served >= counted && served <= counted + 14,
        "nginx logged {served}, archbench counted {counted} in {runs} runs"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.matches("<svg").count() >= 2, "charts in the HTML");
    // How each scaled at its knee, for its vCPUs: in the document and on the page.
    let scaling = &doc["scaling"][0];
    assert_eq!(scaling["name"], "large", "{doc}");
    let knee_cost = |k: usize| {
        doc["targets"][k]["cost_per_million_at_knee"]
            .as_f64()
            .unwrap()
    };
    assert!(
        text.contains("Scaling    large vs small: 8.00x the vCPUs"),
        "{text}"
    );
    // (Compared as numbers: serde_json's reading of a float may be one ulp off its writing.)
    let on_page = |page: &str| -> f64 {
        let at = page
            .find("class=\"scaling\" data-value=\"")
            .expect("the scaling line on the page");
        let rest = &page[at + "class=\"scaling\" data-value=\"".len()..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    };
    // Verdicts per vCPU and per dollar rest on a knee only where its step's servers limited
    // the load; else the figures stay and the verdicts are withheld, saying why.
    let withheld: Vec<String> = [0, 1]
        .iter()
        .filter_map(|&k| doc["targets"][k]["withheld"].as_str().map(String::from))
        .collect();
    if !withheld.is_empty() {
        assert!(scaling["efficiency"].is_null(), "{scaling}");
        let why = scaling["withheld"].as_str().unwrap();
        assert!(withheld.iter().any(|w| why.contains(w.as_str())), "{why}");
        assert!(text.contains("no scaling verdict: "), "{text}");
        assert!(
            text.contains("Per dollar large: no per-dollar verdict against small: "),
            "{text}"
        );
    } else {
        assert!(
            text.contains(&format!(
                "Per dollar large: {:.2}x the requests per dollar of small at the knee",
                knee_cost(0) / knee_cost(1)
            )),
            "{text}"
        );
        let efficiency = scaling["efficiency"].as_f64().unwrap();
        assert!(
            (on_page(&page) - efficiency).abs() <= 1e-12 * efficiency.abs(),
            "the efficiency on the page"
        );
    }
    // Opened by Chromium without a network: the sweep's three charts, and the efficiency the
    // JSON has.
    if let Some(chromium) = crate::util::require_tool("chromium") {
        let dom = crate::cases::html::chromium(
            &chromium,
            &["--dump-dom", &format!("file://{}", html.display())],
        );
        assert_eq!(
            dom.split("<figure class=\"chart\"").count() - 1,
            3,
            "throughput and p99 against load, and requests per pod CPU-second"
        );
        if let Some(efficiency) = scaling["efficiency"].as_f64() {
            assert!((on_page(&dom) - efficiency).abs() <= 1e-12 * efficiency.abs());
        }
    }
    // The same sweep from inside the cluster: each run an Indexed Job of two load pods
    // (kept off nginx's nodes), started together, merged; their requests the pods logged.
    let inside_out = dir.path().join("inside");
    let served_before = access_lines(c, ns, &pods);
    ok(&k8s(
        c,
        ns,
        &[
            "sweep",
            "small",
            "large",
            "-c",
            "2,4",
            "-d",
            "1s",
            "--no-warmup",
            "--in-cluster",
            "--workers",
            "2",
            "--image",
            "archbench:test",
            "-q",
            "--out-dir",
            inside_out.to_str().unwrap(),
        ],
    ));
    let doc = read_json(the_run_dir(&inside_out).join("k8s-sweep.json"));
    crate::util::schema::assert_valid(&doc);
    let mut counted = 0;
    for step in doc["steps"].as_array().unwrap() {
        for t in step["comparison"]["targets"].as_array().unwrap() {
            let run = &t["runs"][0];
            counted += run["totals"]["requests"].as_u64().unwrap();
            assert_eq!(
                run["sources"].as_array().unwrap().len(),
                2,
                "two workers merged"
            );
        }
    }
    let served = caught_up(counted, || {
        (access_lines(c, ns, &pods) - served_before) as u64
    });
    assert_eq!(doc["steps"].as_array().unwrap().len(), 2);
    assert!(
        counted > 0 && served >= counted && served <= counted + 12,
        "nginx logged {served}, the workers counted {counted}"
    );
    // A new shared configuration reaches both; large keeps its worker_processes.
    let tuned = ok(&k8s(c, ns, &["config", "tuned", "--wait-timeout", "90s"]));
    assert!(tuned.contains("applied"), "{tuned}");
    let cm = c.get_json(&["-n", ns, "configmap", "nginx-large-config"]);
    let text = cm["data"]["nginx.conf"].as_str().unwrap();
    assert_eq!(
        text,
        archbench::k8s::TUNED_NGINX_CONF.replace("worker_processes auto;", "worker_processes 2;")
    );
    // A variant no node can run is refused before anything is applied, saying what the
    // nodes have.
    let o = k8s(
        c,
        ns,
        &["up", "--variant", "huge:instance-type=Standard_E64s_v6"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no node has node.kubernetes.io/instance-type=Standard_E64s_v6 for huge: the nodes have node.kubernetes.io/instance-type=Standard_D2ps_v6, Standard_D2s_v6, Standard_D8s_v6"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let o = k8s(c, ns, &["up", "--variant", "wide:arch=arm64,cpu=3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the largest allocatable of its nodes is 2 cpu"),
        "{}",
        stderr(&o)
    );
    let deployments = c.kubectl_ok(&["-n", ns, "get", "deployments", "-o", "name"]);
    assert!(
        !deployments.contains("huge") && !deployments.contains("wide"),
        "{deployments}"
    );
    // A variant whose image cannot be pulled: the runtime's words, in one line.
    let o = k8s(
        c,
        "unpulled",
        &[
            "up",
            "--variant",
            "gone:instance-type=Standard_D2s_v6,image=registry.example/no-such-image:1",
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be pulled"), "{}", stderr(&o));
    ok(&k8s(c, "unpulled", &["down"]));
    // Two builds of nginx by image, side by side on one node type: the fingerprint and every
    // load's document say which build each variant ran.
    let builds_ns = "builds";
    ok(&k8s(
        c,
        builds_ns,
        &[
            "up",
            "--variant",
            "distro:instance-type=Standard_D2s_v6",
            "--variant",
            &format!("atomics:instance-type=Standard_D2s_v6,image={ATOMICS_IMAGE}"),
            "--service-type",
            "NodePort",
            "--wait-timeout",
            "90s",
        ],
    ));
    let fp = ok(&k8s(c, builds_ns, &["fingerprint"]));
    let built = |name: &str| {
        fp.lines()
            .skip_while(|l| !l.starts_with(&format!("{name}: pod ")))
            .skip(1)
            .take_while(|l| l.starts_with(' '))
            .find(|l| l.trim_start().starts_with("built "))
            .unwrap_or_else(|| panic!("{name}'s build in {fp}"))
            .to_string()
    };
    assert!(
        built("atomics").contains("--with-cc-opt=-moutline-atomics"),
        "{fp}"
    );
    assert!(!built("distro").contains("-moutline-atomics"), "{fp}");
    let builds_out = dir.path().join("builds");
    ok(&k8s(
        c,
        builds_ns,
        &[
            "load",
            "distro",
            "atomics",
            "-d",
            "1s",
            "-c",
            "1",
            "--out-dir",
            builds_out.to_str().unwrap(),
        ],
    ));
    let doc = read_json(the_run_dir(&builds_out).join("k8s-load.json"));
    let configured = |k: usize| {
        doc["targets"][k]["runs"][0]["servers"][0]["fingerprint"]["configure_arguments"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", doc["targets"][k]["runs"][0]["servers"][0]))
            .to_string()
    };
    assert!(!configured(0).contains("-moutline-atomics"));
    assert!(configured(1).contains("--with-cc-opt=-moutline-atomics"));
    ok(&k8s(c, builds_ns, &["down"]));
    // HTTP/2 to the pods (h2c: nginx listening with http2), from here and from in-cluster
    // workers: every request counted one the pod logged as HTTP/2.0.
    let h2_ns = "http2";
    let h2_conf = dir.path().join("h2.conf");
    std::fs::write(
        &h2_conf,
        counted_conf().replace("listen 80;", "listen 80 http2;"),
    )
    .unwrap();
    ok(&k8s(
        c,
        h2_ns,
        &[
            "up",
            "--variant",
            "h2:instance-type=Standard_D2s_v6",
            "--config",
            h2_conf.to_str().unwrap(),
            "--service-type",
            "NodePort",
            "--wait-timeout",
            "90s",
        ],
    ));
    let h2_pods = pod_names(&ok(&k8s(c, h2_ns, &["status"])));
    let logged_h2 = || -> usize {
        h2_pods
            .iter()
            .map(|p| c.pod_log(h2_ns, p).matches("\"GET / HTTP/2.0\"").count())
            .sum()
    };
    let h2_out = dir.path().join("h2");
    for (k, inside) in [(0, false), (1, true)] {
        let before = logged_h2();
        let mut args = vec![
            "load",
            "h2",
            "--http2",
            "--streams",
            "4",
            "-c",
            "2",
            "-d",
            "1s",
            "--out-dir",
        ];
        let out_dir = h2_out.join(k.to_string());
        args.push(out_dir.to_str().unwrap());
        if inside {
            args.extend([
                "--in-cluster",
                "--workers",
                "2",
                "--image",
                "archbench:test",
            ]);
        }
        ok(&k8s(c, h2_ns, &args));
        let doc = read_json(the_run_dir(&out_dir).join("k8s-load.json"));
        let run = &doc["targets"][0]["runs"][0];
        let counted = run["totals"]["requests"].as_u64().unwrap();
        assert_eq!(run["plan"]["http2_streams"], 4, "{}", run["plan"]);
        let served = caught_up(counted, || (logged_h2() - before) as u64);
        // At most one stream's request per slot in flight when the time ran out: 2 x 4.
        assert!(
            counted > 0 && served >= counted && served <= counted + 8,
            "in-cluster {inside}: nginx logged {served} HTTP/2 requests, archbench counted {counted}"
        );
    }
    ok(&k8s(c, h2_ns, &["down"]));
    // down removes every variant's objects, their own ConfigMaps too.
    let down = ok(&k8s(c, ns, &["down"]));
    for gone in [
        "Deployment nginx-large-deployment: deleted",
        "ConfigMap nginx-large-config: deleted",
        "Service nginx-small-svc: deleted",
    ] {
        assert!(down.contains(gone), "{gone} in {down}");
    }
}

#[test]
fn https_is_set_up_once_and_loaded_with_its_certificate_pinned() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    let ns = "tls";
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    let conf = conf.to_str().unwrap();
    let up = [
        "up",
        "--tls",
        "--variant",
        "secure:arch=amd64",
        "--variant",
        "plain:arch=arm64,tls=off",
        "--config",
        conf,
        "--service-type",
        "NodePort",
        "--wait-timeout",
        "90s",
    ];
    let first = ok(&k8s(c, ns, &up));
    assert!(first.contains("Secret nginx-tls: created"), "{first}");
    // The certificate is kept: a second up changes nothing.
    let again = ok(&k8s(c, ns, &up));
    assert!(again.contains("nothing changed"), "{again}");
    let secret = c.get_json(&["-n", ns, "secret", "nginx-tls"]);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let ports = |svc: &str| -> Vec<(String, u64)> {
        c.get_json(&["-n", ns, "service", svc])["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["port"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        ports("nginx-secure-svc"),
        [("http".to_string(), 80), ("https".to_string(), 443)]
    );
    assert_eq!(ports("nginx-plain-svc"), [("http".to_string(), 80)]);
    assert_eq!(ports("nginx-multiarch-svc"), [("http".to_string(), 80)]);

    // The pods a load is counted against: the new ones once `config` has rolled them.
    let pods = std::cell::RefCell::new(pod_names(&ok(&k8s(c, ns, &["status"]))));
    let logged = |protocol: &str| -> usize {
        let request = format!("\"GET / {protocol}\"");
        pods.borrow()
            .iter()
            .map(|p| c.pod_log(ns, p).matches(&request).count())
            .sum()
    };
    let load = |extra: &[&str], k: usize| -> serde_json::Value {
        let out = dir.path().join(format!("out{k}"));
        let mut args = vec![
            "load",
            "secure",
            "--tls",
            "-c",
            "2",
            "-d",
            "1s",
            "--out-dir",
        ];
        args.push(out.to_str().unwrap());
        args.extend(extra);
        ok(&k8s(c, ns, &args));
        read_json(the_run_dir(&out).join("k8s-load.json"))
    };
    // One load of `secure`: every request counted is one nginx logged as `protocol`, but
    // for at most `in_flight` left when the time ran out. Its run.
    let counted_load = |extra: &[&str], k: usize, protocol: &str, in_flight: u64| {
        let before = logged(protocol);
        let doc = load(extra, k);
        let run = doc["targets"][0]["runs"][0].clone();
        let counted = run["totals"]["requests"].as_u64().unwrap();
        let served = caught_up(counted, || (logged(protocol) - before) as u64);
        assert!(
            counted > 0 && served >= counted && served <= counted + in_flight,
            "{extra:?}: nginx logged {served} {protocol} requests, archbench counted {counted}"
        );
        run
    };
    // From here, HTTP/1.1, over the pinned certificate (the one in the Secret, kept beside
    // the results).
    let run = counted_load(&[], 0, "HTTP/1.1", 2);
    assert!(
        run["plan"]["url"].as_str().unwrap().starts_with("https://"),
        "{}",
        run["plan"]
    );
    let pinned = run["plan"]["pinned_cert"].as_str().unwrap();
    assert!(pinned.ends_with("nginx-tls.crt"), "{pinned}");
    use base64::Engine as _;
    let in_secret = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["tls.crt"].as_str().unwrap())
        .unwrap();
    assert_eq!(std::fs::read(pinned).unwrap(), in_secret);
    assert!(
        run["tls"]["full_handshakes"].as_u64().unwrap() >= 1,
        "{}",
        run["tls"]
    );
    assert_eq!(run["errors"]["tls"], 0, "{}", run["errors"]);

    // HTTP/2 by ALPN, from here and from in-cluster workers that pin the mounted Secret.
    for (k, inside) in [(1, false), (2, true)] {
        let mut extra = vec!["--http2", "--streams", "4"];
        if inside {
            extra.extend([
                "--in-cluster",
                "--workers",
                "2",
                "--image",
                "archbench:test",
            ]);
        }
        // 4 streams on each of 2 connections in flight at the end.
        let run = counted_load(&extra, k, "HTTP/2.0", 8);
        assert_eq!(
            run["tls"]["alpn"], "h2",
            "in-cluster {inside}: {}",
            run["tls"]
        );
    }

    // A variant without https: one line saying how to get it, nothing loaded.
    let plain = k8s(c, ns, &["load", "plain", "--tls", "-d", "1s"]);
    assert_eq!(plain.status.code(), Some(1), "{}", stderr(&plain));
    let said = stderr(&plain);
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(
        said.contains("serves no https") && said.contains("--tls"),
        "{said}"
    );

    // A new configuration the listener cannot go into is refused before anything changes.
    let serverless = dir.path().join("serverless.conf");
    std::fs::write(&serverless, "events {}\nhttp {}\n").unwrap();
    let refused = k8s(c, ns, &["config", serverless.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("no `server {` block"),
        "{}",
        stderr(&refused)
    );
    // A new configuration keeps https: read back without the listener, given it again.
    let v2 = dir.path().join("v2.conf");
    std::fs::write(
        &v2,
        counted_conf().replace("keepalive_timeout 65;", "keepalive_timeout 60;"),
    )
    .unwrap();
    let configured = ok(&k8s(
        c,
        ns,
        &["config", v2.to_str().unwrap(), "--wait-timeout", "90s"],
    ));
    assert!(
        configured.contains("applied; the new pods:"),
        "{configured}"
    );
    // A load right after `config` measures the new configuration: every request it counts
    // is one the new pods logged (the old ones are off the Service before `config` ends).
    let old_pods = pods.borrow().clone();
    let table = configured
        .split("applied; the new pods:")
        .nth(1)
        .unwrap_or("");
    assert!(
        old_pods.iter().all(|p| !table.contains(p.as_str())),
        "the old pods are gone when config ends: {configured}"
    );
    let run = load(&[], 3)["targets"][0]["runs"][0].clone();
    *pods.borrow_mut() = pod_names(&ok(&k8s(c, ns, &["status"])))
        .into_iter()
        .filter(|p| !old_pods.contains(p))
        .collect();
    let counted = run["totals"]["requests"].as_u64().unwrap();
    let served = caught_up(counted, || logged("HTTP/1.1") as u64);
    assert!(
        counted > 0 && served >= counted && served <= counted + 2,
        "after config: the new pods {:?} logged {served}, archbench counted {counted}; {}",
        pods.borrow(),
        run["errors"]
    );
    let shared = c.get_json(&["-n", ns, "configmap", "nginx-config"]);
    let text = shared["data"]["nginx.conf"].as_str().unwrap();
    assert!(text.contains("keepalive_timeout 60;"), "{text}");
    assert_eq!(text.matches("listen 443 ssl http2").count(), 1, "{text}");

    let down = ok(&k8s(c, ns, &["down"]));
    assert!(down.contains("Secret nginx-tls: deleted"), "{down}");
}

/// `k8s config NEW && k8s load` measures NEW: a load started the moment `config` returns is
/// answered by the new pods only (every request counted is one they logged), in both
/// directions of a change. One replica: while kube-proxy still routed to the old pod, whose
/// nginx had stopped, a load had every connection refused.
#[test]
fn a_load_right_after_config_is_served_by_the_new_pods_only() {
    let Some(c) = cluster() else { return };
    let ns = "reconfigured";
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.conf");
    std::fs::write(&v1, counted_conf()).unwrap();
    let v2 = dir.path().join("v2.conf");
    std::fs::write(
        &v2,
        counted_conf().replace("keepalive_timeout 65;", "keepalive_timeout 60;"),
    )
    .unwrap();
    ok(&k8s(
        c,
        ns,
        &[
            "up",
            "--variant",
            "once:arch=amd64",
            "--config",
            v1.to_str().unwrap(),
            "--service-type",
            "NodePort",
            "--wait-timeout",
            "90s",
        ],
    ));
    let mut before = pod_names(&ok(&k8s(c, ns, &["status"])));
    for (k, conf) in [v2, v1.clone()].iter().enumerate() {
        let configured = ok(&k8s(
            c,
            ns,
            &["config", conf.to_str().unwrap(), "--wait-timeout", "90s"],
        ));
        assert!(configured.contains("applied"), "{configured}");
        // At once, as a script would: no wait of the test's own.
        let out = dir.path().join(format!("out{k}"));
        let loaded = k8s(
            c,
            ns,
            &[
                "load",
                "once",
                "-c",
                "2",
                "-d",
                "1s",
                "--out-dir",
                out.to_str().unwrap(),
            ],
        );
        let now = pod_names(&ok(&k8s(c, ns, &["status"])));
        let new: Vec<String> = now
            .iter()
            .filter(|p| !before.contains(p))
            .cloned()
            .collect();
        assert_eq!(
            new.len(),
            1,
            "a new pod after config: {now:?} (before {before:?})"
        );
        ok(&loaded);
        let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
        let counted = doc["targets"][0]["runs"][0]["totals"]["requests"]
            .as_u64()
            .unwrap();
        let served = caught_up(counted, || access_lines(c, ns, &new) as u64);
        // The new pods served nothing before the load; 2 connections in flight at the end.
        assert!(
            counted > 0 && served >= counted && served <= counted + 2,
            "step {k}: the new pods logged {served}, archbench counted {counted}\n{configured}"
        );
        before = now;
    }
    ok(&k8s(c, ns, &["down"]));
}

/// One process reads a pod's `nginx -V` (and /proc/cpuinfo) once, however many runs,
/// watches and placements ask for its build: an image whose nginx counts its `-V` calls, a
/// load of two runs and a warm-up (a watch each) and its placements.
#[test]
fn a_load_reads_each_pods_build_once() {
    if !can_run() {
        return;
    }
    const COUNTED_IMAGE: &str = "registry.example/nginx:counted";
    let builds = tempfile::tempdir().unwrap();
    let calls = builds.path().join("version-calls");
    let counted = nginx_build(builds.path(), "counted", |_| {
        format!("echo V >> {}", calls.display())
    });
    let mut opts = options(None);
    opts.nginx_builds = vec![(COUNTED_IMAGE.into(), counted)];
    let c = TestCluster::start(&opts, "inspect").unwrap_or_else(|e| panic!("{e}"));
    let ns = "inspect";
    ok(&k8s(
        &c,
        ns,
        &[
            "up",
            "--variant",
            &format!("web:arch=amd64,image={COUNTED_IMAGE}"),
            "--wait-timeout",
            "90s",
        ],
    ));
    // What `up` itself read is not the load's.
    std::fs::write(&calls, "").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    ok(&k8s(
        &c,
        ns,
        &[
            "load",
            "web",
            "-d",
            "300ms",
            "-c",
            "1",
            "--runs",
            "2",
            "--out-dir",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
    ));
    let doc = read_json(&json);
    // The build was read: every run's server says it, and the placement has the CPU.
    for run in doc["targets"][0]["runs"].as_array().unwrap() {
        assert!(
            run["servers"][0]["fingerprint"]["version"]
                .as_str()
                .is_some_and(|v| v.contains("nginx/")),
            "{}",
            run["servers"][0]
        );
    }
    assert!(
        doc["placements"][0]["cpu_model"].is_string(),
        "{}",
        doc["placements"]
    );
    let read = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        read.lines().count(),
        1,
        "nginx -V ran {} times",
        read.lines().count()
    );
}

/// An arm64 HTTP server for the arm64 node's images: it answers every request with 200 (one
/// request per connection), counts them atomically, and prints an nginx-like `-V` naming how
/// it was built, so `k8s fingerprint` reads both of its witnesses.
const ATOMICS_SERVER: &str = r#"#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

static atomic_long served;

static void stop(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-V") == 0) {
            fprintf(stderr, "nginx version: nginx/1.22.1 (archbench's atomics test server)\nconfigure arguments: --with-cc-opt='%s'\n", BUILT);
            return 0;
        }
    signal(SIGTERM, stop);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(80) };
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 64) != 0) {
        perror("listen");
        return 1;
    }
    for (;;) {
        int c = accept(s, 0, 0);
        if (c < 0)
            continue;
        char buf[4096];
        if (read(c, buf, sizeof buf) > 0) {
            atomic_fetch_add(&served, 1);
            static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
            if (write(c, answer, sizeof answer - 1) < 0)
                perror("write");
        }
        close(c);
    }
}
"#;

/// The arm64 node runs arm64 code: Debian's arm64 nginx under qemu-user (`uname -m` aarch64,
/// its executable an AArch64 ELF, `nginx -V` the arm64 build's), and `k8s fingerprint` reads
/// each pod's build from its executable: Debian's arm64 nginx and a cross-built server with
/// outline atomics have an LSE path (no warning), the same server built with
/// -mno-outline-atomics has only LL/SC (warned), the amd64 pod's x86 nginx has no atomics
/// question; every arm64 pod is said to be emulated, and a load of one is counted against its
/// access log.
#[test]
fn the_arm64_node_runs_arm64_builds_read_from_their_executables() {
    if !can_run() {
        return;
    }
    let (Some(gcc), Some(readelf)) = (
        crate::util::require_tool("aarch64-linux-gnu-gcc"),
        crate::util::require_tool("aarch64-linux-gnu-readelf"),
    ) else {
        return;
    };
    let builds = tempfile::tempdir().unwrap();
    let src = builds.path().join("server.c");
    std::fs::write(&src, ATOMICS_SERVER).unwrap();
    let build = |name: &str, flags: &[&str]| {
        let exe = builds.path().join(name);
        let o = std::process::Command::new(&gcc)
            .arg("-O2")
            .args(flags)
            .arg(format!("-DBUILT=\"{}\"", flags.join(" ")))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        exe
    };
    let helpers = build("server-outline", &[]);
    let llsc = build("server-llsc", &["-mno-outline-atomics"]);
    let build_id = |exe: &Path| {
        let o = std::process::Command::new(&readelf)
            .arg("-n")
            .arg(exe)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .unwrap_or_else(|| panic!("{text}"))
            .trim()
            .to_string()
    };
    let mut opts = options(None);
    opts.nginx_builds = vec![
        ("registry.example/server:outline".into(), helpers.clone()),
        ("registry.example/server:llsc".into(), llsc.clone()),
    ];
    let c = TestCluster::start(&opts, "arm64").unwrap_or_else(|e| panic!("{e}"));
    let c = &c;
    let ns = "arm64";
    ok(&k8s(
        c,
        ns,
        &[
            "up",
            "--variant",
            "debian:arch=arm64",
            "--variant",
            "outline:arch=arm64,image=registry.example/server:outline",
            "--variant",
            "llsc:arch=arm64,image=registry.example/server:llsc",
            "--variant",
            "intel:arch=amd64",
            "--config",
            "stock",
            "--wait-timeout",
            "120s",
        ],
    ));
    let pod = |variant: &str| {
        let p = c.get_json(&["-n", ns, "pods", "-l", &format!("variant={variant}")]);
        p["items"][0]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let debian = pod("debian");
    // Identity, as the pod sees it.
    let inside = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        &debian,
        "--",
        "sh",
        "-c",
        "uname -m; od -An -tx1 -j18 -N2 /proc/self/exe; nginx -V 2>&1 | head -1",
    ]);
    let lines: Vec<&str> = inside.lines().map(str::trim).collect();
    assert_eq!(lines[0], "aarch64", "{inside}");
    assert_eq!(lines[1], "b7 00", "EM_AARCH64: {inside}");
    assert!(
        lines[2].starts_with("nginx version: nginx/1.22"),
        "{inside}"
    );
    // The builds, from the executables.
    let fp = ok(&k8s(c, ns, &["fingerprint"]));
    // One variant's lines: its heading, then the indented ones under it.
    let section = |variant: &str| -> String {
        let heading = format!("{variant}: pod ");
        let mut lines = fp.lines().skip_while(|l| !l.starts_with(&heading));
        let first = lines.next().unwrap_or_else(|| panic!("{variant} in {fp}"));
        std::iter::once(first)
            .chain(lines.take_while(|l| l.starts_with("  ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (debian_fp, outline_fp, llsc_fp, intel_fp) = (
        section("debian"),
        section("outline"),
        section("llsc"),
        section("intel"),
    );
    for arm in [&debian_fp, &outline_fp, &llsc_fp] {
        assert!(arm.contains("binary   aarch64 executable"), "{arm}");
        assert!(
            arm.contains("WARNING: the server runs under emulation"),
            "{arm}"
        );
    }
    for with_lse in [&debian_fp, &outline_fp] {
        assert!(with_lse.contains("outline atomics, LSE used"), "{with_lse}");
        assert!(!with_lse.contains("only LL/SC"), "{with_lse}");
    }
    assert!(
        debian_fp.contains("nginx version: nginx/1.22"),
        "{debian_fp}"
    );
    assert!(llsc_fp.contains("LL/SC only"), "{llsc_fp}");
    assert!(
        llsc_fp.contains("WARNING:") && llsc_fp.contains("only LL/SC atomics"),
        "{llsc_fp}"
    );
    assert!(
        llsc_fp.contains("-mno-outline-atomics"),
        "nginx -V beside it: {llsc_fp}"
    );
    assert!(outline_fp.contains(&build_id(&helpers)), "{outline_fp}");
    assert!(llsc_fp.contains(&build_id(&llsc)), "{llsc_fp}");
    assert!(
        intel_fp.contains("binary   x86_64 executable"),
        "{intel_fp}"
    );
    assert!(
        !intel_fp.contains("atomics") && !intel_fp.contains("WARNING"),
        "{intel_fp}"
    );
    // A load of the emulated nginx: counted exactly against its access log, and said to be
    // emulated where its figures are.
    let served = || {
        c.pod_log(ns, &debian)
            .lines()
            .filter(|l| l.contains("\"GET / HTTP/1.1\"") && !l.contains("kube-probe"))
            .count() as u64
    };
    let before = served();
    let out = tempfile::tempdir().unwrap();
    let load = ok(&k8s(
        c,
        ns,
        &[
            "load",
            "debian",
            "-d",
            "2s",
            "-c",
            "2",
            "--out-dir",
            out.path().to_str().unwrap(),
        ],
    ));
    assert!(load.contains("under emulation"), "{load}");
    let doc = read_json(the_run_dir(out.path()).join("k8s-load.json"));
    let run = &doc["targets"][0]["runs"][0];
    let counted = run["totals"]["requests"].as_u64().unwrap();
    assert!(counted > 0, "{run}");
    assert_eq!(
        run["servers"][0]["fingerprint"]["emulator"], "/usr/bin/qemu-aarch64-static",
        "{run}"
    );
    let logged = caught_up(counted, || served() - before);
    // Requests in flight when the time ran out were answered but not counted: at most one
    // per connection.
    assert!(
        logged >= counted && logged <= counted + 2,
        "nginx logged {logged}, archbench counted {counted}"
    );
    ok(&k8s(c, ns, &["down"]));
}

/// The README's advice when no load-balancer address comes, tested from where a laptop is:
/// NodePort Services are loaded through the nodes' external addresses (the laptop has no
/// route to their InternalIPs), and the load is served.
#[test]
fn a_nodeport_setup_is_loaded_from_the_laptop_through_the_nodes_external_addresses() {
    let Some(c) = cluster() else { return };
    let ns = "nodeport";
    ok(&k8s(
        c,
        ns,
        &[
            "up",
            "--arch",
            "intel",
            "--service-type",
            "NodePort",
            "--wait-timeout",
            "90s",
        ],
    ));
    let out = tempfile::tempdir().unwrap();
    ok(&k8s(
        c,
        ns,
        &[
            "load",
            "intel",
            "-d",
            "1s",
            "-c",
            "1",
            "--out-dir",
            out.path().to_str().unwrap(),
        ],
    ));
    let doc = read_json(the_run_dir(out.path()).join("k8s-load.json"));
    let run = &doc["targets"][0]["runs"][0];
    assert!(run["totals"]["requests"].as_u64().unwrap() > 0, "{run}");
    let url = run["plan"]["url"].as_str().unwrap_or_default().to_string();
    assert!(
        url.contains("10.241.0."),
        "an external address: {}",
        run["plan"]
    );
    ok(&k8s(c, ns, &["down"]));
}

/// Requests a Caddy pod's access log (JSON lines on its output) says it answered over
/// `proto` ("HTTP/3.0", "HTTP/2.0").
fn caddy_logged(c: &TestCluster, ns: &str, pods: &[String], proto: &str) -> u64 {
    pods.iter()
        .flat_map(|p| {
            c.pod_log(ns, p)
                .lines()
                .filter_map(|l| l.find('{').map(|at| l[at..].to_string()))
                .collect::<Vec<_>>()
        })
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .filter(|v| v["msg"] == "handled request" && v["request"]["proto"] == proto)
        .count() as u64
}

/// A Caddy variant (Debian's caddy, run by the node agent for `image=caddy:2`) answers
/// HTTP/3 on its Service's UDP 443 beside https on TCP 443: `k8s load --http3` from the
/// laptop (the load balancer's address) and from in-cluster workers (the ClusterIP), the
/// Secret's certificate pinned, each request counted one Caddy logged as HTTP/3.0. A
/// variant whose server answers no HTTP/3 is refused in one line, exit 2; nginx's `--http3`
/// objects are accepted by the API server (Debian's nginx 1.22 cannot run them: no QUIC).
#[test]
fn a_caddy_variant_is_loaded_over_http3_counted_against_its_log() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    if crate::util::require_tool("caddy").is_none() {
        return;
    }
    let ns = "h3";
    let up_args = [
        "up",
        "--variant",
        "quic:arch=amd64,image=caddy:2",
        "--variant",
        "plain:arch=amd64",
        "--wait-timeout",
        "90s",
    ];
    let up = ok(&k8s(c, ns, &up_args));
    assert!(up.contains("Secret nginx-tls: created"), "{up}");
    let ports = |svc: &str| -> Vec<(String, u64, String)> {
        c.get_json(&["-n", ns, "service", svc])["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let s = |k: &str| p[k].as_str().unwrap().to_string();
                (s("name"), p["port"].as_u64().unwrap(), s("protocol"))
            })
            .collect()
    };
    let tcp = |n: &str, p| (n.to_string(), p, "TCP".to_string());
    assert_eq!(
        ports("nginx-quic-svc"),
        [
            tcp("http", 80),
            tcp("https", 443),
            ("http3".into(), 443, "UDP".into())
        ]
    );
    assert_eq!(ports("nginx-plain-svc"), [tcp("http", 80)]);
    let pods: Vec<String> = pod_names(&ok(&k8s(c, ns, &["status"])))
        .into_iter()
        .filter(|p| p.starts_with("nginx-quic-"))
        .collect();
    assert_eq!(pods.len(), 1, "{pods:?}");
    let dir = tempfile::tempdir().unwrap();
    // 4 streams on each of 2 connections: at most 8 requests in flight when the time is up,
    // answered by Caddy but not counted. With --0rtt each connection resumes a session
    // fetched before the clock (from here, and by each in-cluster worker) and sends its first
    // requests as early data, which Caddy accepts.
    for (k, inside, zero_rtt) in [
        (0, false, false),
        (1, true, false),
        (2, false, true),
        (3, true, true),
    ] {
        let out = dir.path().join(format!("out{k}"));
        let mut args = vec![
            "load",
            "quic",
            "--http3",
            "--streams",
            "4",
            "-c",
            "2",
            "-d",
            "1s",
        ];
        if inside {
            args.extend([
                "--in-cluster",
                "--workers",
                "2",
                "--image",
                "archbench:test",
            ]);
        }
        if zero_rtt {
            args.push("--0rtt");
        }
        args.extend(["--out-dir", out.to_str().unwrap()]);
        let before = caddy_logged(c, ns, &pods, "HTTP/3.0");
        ok(&k8s(c, ns, &args));
        let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
        let run = &doc["targets"][0]["runs"][0];
        let counted = run["totals"]["requests"].as_u64().unwrap();
        let served = caught_up(counted, || caddy_logged(c, ns, &pods, "HTTP/3.0") - before);
        eprintln!(
            "in-cluster {inside}, --0rtt {zero_rtt}: counted {counted}, Caddy logged {served}"
        );
        assert!(
            counted > 100 && served >= counted && served <= counted + 8,
            "in-cluster {inside}: Caddy logged {served} HTTP/3 requests, archbench counted {counted}; {}",
            run["errors"]
        );
        assert_eq!(
            run["tls"]["alpn"], "h3",
            "in-cluster {inside}: {}",
            run["tls"]
        );
        if !inside {
            let pinned = run["plan"]["pinned_cert"].as_str().unwrap_or("");
            assert!(pinned.ends_with("nginx-tls.crt"), "{}", run["plan"]);
        }
        let quic = &run["quic"];
        assert!(quic["handshakes"].as_u64().unwrap() >= 2, "{quic}");
        assert_eq!(quic["handshakes_failed"], 0, "{quic}");
        if zero_rtt {
            // Two connections (one per worker in the cluster): two sessions fetched, both
            // resumed with early data Caddy took; the fetching handshakes sent no request.
            // (A count of none is left out of the document.)
            let n = |k: &str| quic[k].as_u64().unwrap_or(0);
            assert_eq!(
                (
                    n("sessions_fetched"),
                    n("zero_rtt_accepted"),
                    n("zero_rtt_rejected")
                ),
                (2, 2, 0),
                "in-cluster {inside}: {quic}"
            );
            assert_eq!(run["tls"]["resumed_handshakes"], 2, "{}", run["tls"]);
            assert_eq!(run["plan"]["http3_0rtt"], true, "{}", run["plan"]);
        }
        // The pod watched is Caddy, and said so.
        let version = run["servers"][0]["fingerprint"]["version"].as_str();
        assert!(
            version.is_some_and(|v| v.starts_with("caddy 2.") || v.starts_with("caddy v2.")),
            "in-cluster {inside}: {}",
            run["servers"][0]["fingerprint"]
        );
    }
    assert_eq!(
        caddy_logged(c, ns, &pods, "HTTP/1.1"),
        0,
        "probes are not logged"
    );

    // Through the nodes' external addresses too: the UDP port has a node port of its own.
    let nodeport = [&up_args[..], &["--service-type", "NodePort"]].concat();
    ok(&k8s(c, ns, &nodeport));
    let udp = c.get_json(&["-n", ns, "service", "nginx-quic-svc"])["spec"]["ports"][2].clone();
    assert_eq!(udp["protocol"], "UDP", "{udp}");
    let out = dir.path().join("nodeport");
    let before = caddy_logged(c, ns, &pods, "HTTP/3.0");
    let args = [
        "load",
        "quic",
        "--http3",
        "-c",
        "1",
        "-d",
        "1s",
        "--out-dir",
    ];
    ok(&k8s(c, ns, &[&args[..], &[out.to_str().unwrap()]].concat()));
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    let run = &doc["targets"][0]["runs"][0];
    let url = run["plan"]["url"].as_str().unwrap();
    assert!(url.ends_with(&format!(":{}/", udp["nodePort"])), "{url}");
    let counted = run["totals"]["requests"].as_u64().unwrap();
    let served = caught_up(counted, || caddy_logged(c, ns, &pods, "HTTP/3.0") - before);
    assert!(
        counted > 100 && served >= counted && served <= counted + 1,
        "through a node port: Caddy logged {served} HTTP/3 requests, archbench counted {counted}"
    );
    // k8s sweep climbs over the same port: each step's runs counted as Caddy logged them.
    let out = dir.path().join("sweep");
    let before = caddy_logged(c, ns, &pods, "HTTP/3.0");
    let args = [
        "sweep",
        "quic",
        "--http3",
        "-c",
        "1,2",
        "-d",
        "1s",
        "--no-warmup",
    ];
    ok(&k8s(
        c,
        ns,
        &[&args[..], &["--out-dir", out.to_str().unwrap()]].concat(),
    ));
    let doc = read_json(the_run_dir(&out).join("k8s-sweep.json"));
    let runs: Vec<&serde_json::Value> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["comparison"]["targets"][0]["runs"].as_array().unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{doc}");
    let counted: u64 = runs
        .iter()
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .sum();
    assert!(runs.iter().all(|r| r["tls"]["alpn"] == "h3"), "{doc}");
    let served = caught_up(counted, || caddy_logged(c, ns, &pods, "HTTP/3.0") - before);
    // At most a request per connection in flight at each run's end: 1 + 2.
    assert!(
        counted > 100 && served >= counted && served <= counted + 3,
        "sweep: Caddy logged {served} HTTP/3 requests, archbench counted {counted}"
    );

    // nginx here answers no HTTP/3: one line, exit 2, before anything is loaded.
    let refused = k8s(c, ns, &["load", "plain", "--http3", "-d", "1s"]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("answers no HTTP/3"), "{said}");

    // nginx's QUIC setup: its objects, as `up --http3` would apply them, pass the API
    // server's own validation (a dry run: Debian's nginx 1.22 could not start them).
    let yaml = ok(&k8s(
        c,
        ns,
        &["manifests", "--http3", "--variant", "edge:arch=amd64"],
    ));
    assert!(
        yaml.contains("listen 443 quic reuseport; # archbench k8s --http3"),
        "{yaml}"
    );
    let f = dir.path().join("http3.yaml");
    std::fs::write(&f, &yaml).unwrap();
    let dry = c.kubectl_ok(&["apply", "--dry-run=server", "-f", f.to_str().unwrap()]);
    assert!(
        dry.contains("service/nginx-edge-svc created (server dry run)"),
        "{dry}"
    );

    let down = ok(&k8s(c, ns, &["down"]));
    assert!(down.contains("Secret nginx-tls: deleted"), "{down}");
}

/// `--stages` on the cluster: from here, and split over two in-cluster workers whose parts
/// merge into the stages; each second after the first sent within 5% of what the stages ask,
/// and every request counted in nginx's log.
#[test]
fn a_staged_load_follows_its_stages_from_here_and_from_in_cluster_workers() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    let ns = "staged";
    let dir = tempfile::tempdir().unwrap();
    let pods = up_by_pools_with(c, ns, &counted_conf(), dir.path());
    for inside in [false, true] {
        let before = access_lines(c, ns, &pods);
        let out = dir.path().join(format!("run-{inside}"));
        let mut args = vec![
            "load",
            "intel",
            "-c",
            "4",
            "--stages",
            "1s@100, 2s@100..300",
            "--wait-timeout",
            "90s",
            "--out-dir",
            out.to_str().unwrap(),
        ];
        if inside {
            args.extend(["--in-cluster", "--workers", "2"]);
        }
        ok(&k8s(c, ns, &args));
        let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
        crate::util::schema::assert_valid(&doc);
        let run = &doc["targets"][0]["runs"][0];
        assert_eq!(
            run["plan"]["stages"].as_array().unwrap().len(),
            2,
            "{inside}"
        );
        let mut series = run["series"].as_array().unwrap().clone();
        // A worker the machine woke late reads its last responses just after the stages end:
        // a fourth second that asks nothing and holds at most those few (they were answered,
        // and nginx logged them).
        if series.len() == 4 {
            let spill = series.pop().unwrap();
            let n = spill["completed"].as_u64().unwrap() + spill["errors"].as_u64().unwrap();
            assert!(
                spill["target_rate"] == 0.0 && n <= 12,
                "{inside}: {spill} after {series:?}"
            );
        }
        assert_eq!(series.len(), 3, "{inside}: {series:?}");
        for (s, want) in series.iter().zip([100.0, 150.0, 250.0]) {
            let asked = s["target_rate"].as_f64().unwrap();
            assert!((asked - want).abs() < 1e-6, "{inside}: {series:?}");
        }
        for s in &series[1..] {
            let sent = s["completed"].as_f64().unwrap() + s["errors"].as_f64().unwrap();
            let asked = s["target_rate"].as_f64().unwrap();
            assert!((sent - asked).abs() <= 0.05 * asked, "{inside}: {series:?}");
        }
        let counted = run["totals"]["requests"].as_u64().unwrap();
        let served = caught_up(counted, || (access_lines(c, ns, &pods) - before) as u64);
        assert!(
            (490..=500).contains(&counted) && served >= counted && served <= counted + 4,
            "{inside}: nginx logged {served}, archbench counted {counted}"
        );
    }
    ok(&k8s(c, ns, &["down"]));
}

/// `k8s sweep --find-max` against the cluster's nginx capped by `limit_req` at 300 requests a
/// second per pod (a burst of 30, for a client made late by a loaded machine; the rest 503):
/// the search brackets the rate where errors pass 1%, through the Service's ClusterIP rules,
/// from here.
#[test]
fn k8s_sweep_finds_the_rate_a_capped_nginx_sustains() {
    let Some(c) = cluster() else {
        return;
    };
    let ns = "capped";
    let dir = tempfile::tempdir().unwrap();
    let capped = archbench::k8s::TUNED_NGINX_CONF
        .replace(
            "keepalive_timeout 65;",
            "keepalive_timeout 65;\n    limit_req_zone $server_port zone=cap:1m rate=300r/s;\n    limit_req_status 503;",
        )
        .replace(
            "return 200",
            "limit_req zone=cap burst=30 nodelay;\n            empty_gif;\n            # return 200",
        );
    let pods: Vec<String> = up_by_pools_with(c, ns, &capped, dir.path())
        .into_iter()
        .filter(|p| p.contains("intel"))
        .collect();
    let cap = 300.0 * pods.len() as f64;
    let search = |out: &Path| {
        ok(&k8s(
            c,
            ns,
            &[
                "sweep",
                "intel",
                "--find-max",
                "--rates",
                &format!("{}:{}", cap / 3.0, cap * 3.0),
                "--slo",
                "errors<1%",
                "-c",
                "8",
                "-d",
                "2s",
                "--no-warmup",
                "--out-dir",
                out.to_str().unwrap(),
            ],
        ));
        let doc = read_json(the_run_dir(out).join("k8s-sweep.json"));
        crate::util::schema::assert_valid(&doc);
        doc
    };
    let mut doc = search(&dir.path().join("results"));
    // A probe this machine's client could not keep (the suite loads both cores) ends the
    // search with that verdict, rightly: no maximum is claimed from it. Once more, then.
    if doc["find_max"][0]["verdict"]
        .as_str()
        .is_some_and(|v| v.starts_with("the client could not keep"))
    {
        eprintln!("the client could not keep a probe: {}", doc["find_max"][0]);
        doc = search(&dir.path().join("again"));
    }
    let m = &doc["find_max"][0];
    let (Some(sustained), Some(failed)) = (
        m["sustained"]["rate"].as_f64(),
        m["failed"]["rate"].as_f64(),
    ) else {
        panic!("cap {cap}: no bracket: {m}");
    };
    assert!(
        (0.85 * cap..=1.2 * cap).contains(&sustained),
        "cap {cap}: {m}"
    );
    assert!(
        failed > sustained && failed <= sustained * 1.05 + 1.0,
        "{m}"
    );
    ok(&k8s(c, ns, &["down"]));
}
