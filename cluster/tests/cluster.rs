//! The test cluster against itself: the harness's network rule, and what the node agent does
//! under Kubernetes' own API server, controller-manager, scheduler and kube-proxy — pods
//! with their network, volumes and token, services routed by kube-proxy, exec, logs, attach
//! and port-forward through the API server (the last two in `streams`), restarts, crash
//! loops, pulls that fail, Jobs through the Job controller, metrics through metrics-server,
//! and nothing left behind by `down`.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use archbench_cluster::testing::output_within;
use archbench_cluster::{TestCluster, TestOptions};

// beside this file, not in tests/ (where cargo would build it as a test binary of its own)
#[path = "cluster/streams.rs"]
mod streams;

/// How long anything a cluster does promptly may take here (two busy cores).
const PROMPTLY: Duration = Duration::from_secs(90);

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Root, Go (or the components built) and nginx; else a failure, or a listed skip.
fn can_run() -> bool {
    let why = archbench_cluster::testing::unavailable().or_else(|| {
        (!Path::new("/usr/sbin/nginx").is_file())
            .then(|| "nginx is not installed (apt-get install nginx)".to_string())
    });
    let Some(why) = why else { return true };
    archbench_cluster::skips::cannot_run(&why);
    false
}

fn shared() -> Option<&'static TestCluster> {
    if !can_run() {
        return None;
    }
    match TestCluster::shared("agent", &TestOptions::default()) {
        Ok(c) => Some(c),
        Err(e) => panic!("{e}"),
    }
}

fn harness() -> Command {
    Command::new(env!("CARGO_BIN_EXE_archbench-cluster"))
}

/// Polls `f` until it gives a value; panics naming `what` after `timeout`.
fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `curl` from inside the cluster's namespace: (HTTP status, body).
fn curl(c: &TestCluster, url: &str) -> (String, String) {
    let mut cmd = c.command("curl");
    cmd.args(["-s", "-m", "5", "-w", "\n%{http_code}", url]);
    let o = output_within(cmd, PROMPTLY);
    let text = stdout(&o);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_string(), body.to_string())
}

fn apply(c: &TestCluster, ns: &str, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("objects.yaml");
    std::fs::write(&f, yaml).unwrap();
    c.kubectl_ok(&["-n", ns, "apply", "-f", f.to_str().unwrap()]);
}

fn namespace(c: &TestCluster, ns: &str) {
    let _ = c.kubectl(&["delete", "namespace", ns, "--wait=true", "--timeout=60s"]);
    c.kubectl_ok(&["create", "namespace", ns]);
    // The service-account controller makes `default` shortly after the namespace.
    wait_for("the namespace's default service account", PROMPTLY, || {
        c.kubectl(&["-n", ns, "get", "serviceaccount", "default"])
            .status
            .success()
            .then_some(())
    });
}

fn pods(c: &TestCluster, ns: &str, selector: &str) -> Vec<serde_json::Value> {
    c.get_json(&["-n", ns, "pods", "-l", selector])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Root (network namespaces need it); else a failure, or a listed skip.
fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    archbench_cluster::skips::cannot_run("network namespaces need root");
    false
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
}

/// A network namespace of the test's own (`ip netns add`), deleted when dropped.
struct OwnNetns(String);

impl OwnNetns {
    fn new(kind: &str) -> OwnNetns {
        let name = format!("abtest-{kind}-{}", std::process::id());
        ip(&["netns", "add", &name]);
        OwnNetns(name)
    }

    /// `ip -n NAME ARGS`.
    fn ip(&self, args: &[&str]) {
        ip(&[&["-n", self.0.as_str()][..], args].concat());
    }
}

impl Drop for OwnNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

#[test]
fn a_namespace_that_leads_anywhere_is_refused() {
    if !root() {
        return;
    }
    // A namespace of this test's own, given a default route (to a peer that is not there).
    let own = OwnNetns::new("route");
    let name = own.0.clone();
    own.ip(&["link", "add", "r0", "type", "veth", "peer", "name", "r1"]);
    own.ip(&["link", "set", "r0", "up"]);
    own.ip(&["addr", "add", "192.0.2.1/24", "dev", "r0"]);
    own.ip(&["route", "add", "default", "via", "192.0.2.254"]);
    let dir = tempfile::tempdir().unwrap();
    let o = output_within(
        {
            let mut c = harness();
            c.args(["up", dir.path().to_str().unwrap(), "--netns", &name]);
            c
        },
        PROMPTLY,
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "network namespace {name} has a default route (default via 192.0.2.254 dev r0)"
        )),
        "{err}"
    );
    assert!(
        !dir.path().join("cluster.json").exists(),
        "nothing was started"
    );
    // The machine's own namespace (this test's), when it has a default route (this kind of
    // machine does).
    let own = std::fs::read_to_string("/proc/self/net/route").unwrap_or_default();
    if own
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some("00000000"))
    {
        let o = output_within(
            {
                let mut c = harness();
                c.args([
                    "up",
                    dir.path().to_str().unwrap(),
                    "--netns",
                    "/proc/self/ns/net",
                ]);
                c
            },
            PROMPTLY,
        );
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains("has a default route"), "{}", stderr(&o));
    }
    // One without a default route but with an interface of its own: refused too (its routes
    // or rules could carry 10.x elsewhere).
    let linked = OwnNetns::new("link");
    let other = linked.0.clone();
    linked.ip(&["link", "add", "x0", "type", "veth", "peer", "name", "x1"]);
    let o = output_within(
        {
            let mut c = harness();
            c.args(["up", dir.path().to_str().unwrap(), "--netns", &other]);
            c
        },
        PROMPTLY,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "the network namespace {other} has interfaces of its own (x1, x0)"
        )) || stderr(&o).contains(&format!(
            "the network namespace {other} has interfaces of its own (x0, x1)"
        )),
        "{}",
        stderr(&o)
    );
    // exec into a cluster that is not there says so, and runs nothing.
    let o = output_within(
        {
            let mut c = harness();
            c.args(["exec", dir.path().to_str().unwrap(), "--", "true"]);
            c
        },
        PROMPTLY,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no cluster in"), "{}", stderr(&o));
}

/// A default route outside the main table, reached by a rule, is a default route: `up`
/// refuses the namespace, the supervisor refuses it once inside, and so does a node agent
/// started there; for IPv6 as for IPv4.
#[test]
fn a_default_route_in_any_table_is_refused_by_every_entry() {
    if !root() {
        return;
    }
    let own = OwnNetns::new("rule");
    let name = own.0.clone();
    own.ip(&["link", "add", "r0", "type", "veth", "peer", "name", "r1"]);
    own.ip(&["link", "set", "r0", "up"]);
    own.ip(&["link", "set", "r1", "up"]);
    own.ip(&["addr", "add", "192.0.2.1/24", "dev", "r0"]);
    own.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.0.2.254",
        "table",
        "100",
    ]);
    own.ip(&["rule", "add", "lookup", "100", "pref", "1000"]);
    // What /proc/net/route (the main table only) does not show.
    let main = Command::new("ip")
        .args(["netns", "exec", &name, "cat", "/proc/net/route"])
        .output()
        .unwrap();
    assert!(
        !stdout(&main)
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some("00000000")),
        "{}",
        stdout(&main)
    );
    let v4 =
        "default via 192.0.2.254 dev r0 table 100, looked up by rule 1000: from all lookup 100";
    let refused = |args: &[&str], inside: bool| {
        let mut c = if inside {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &name])
                .arg(env!("CARGO_BIN_EXE_archbench-cluster"));
            c
        } else {
            harness()
        };
        c.args(args).stdin(Stdio::null());
        let o = output_within(c, PROMPTLY);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{args:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        format!("{}{}", stdout(&o), stderr(&o))
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let said = refused(&["up", d, "--netns", &name], false);
    assert!(
        said.contains(&format!(
            "network namespace {name} has a default route ({v4})"
        )),
        "{said}"
    );
    assert!(
        !dir.path().join("cluster.json").exists(),
        "nothing was started"
    );
    // A cluster directory naming the namespace, as `up` records it (nothing runs in it).
    let path = format!("/run/netns/{name}");
    let cdir = archbench_cluster::layout::ClusterDir::new(dir.path());
    cdir.write_state(&archbench_cluster::layout::State {
        netns_path: path.clone().into(),
        netns_name: None,
        laptop_netns: None,
        supervisor_pid: 0,
        nodes: archbench_cluster::topology::default_nodes(),
        kube_bin: "/nonexistent".into(),
        archbench_binary: None,
        nginx_binary: "/usr/sbin/nginx".into(),
        nginx_builds: Vec::new(),
        arm64_root: None,
        scheduler_backoff: None,
    })
    .unwrap();
    // The supervisor enters it, checks, and tells `up` on its stdout.
    let said = refused(&["supervise", d], false);
    assert!(
        said.contains(&format!(
            "error: the network namespace {path} has a default route ({v4})"
        )),
        "{said}"
    );
    // A node agent started inside it checks where it is.
    let said = refused(&["node", d, "aks-intel-0"], true);
    assert!(
        said.contains(&format!("(the node agent's) has a default route ({v4})")),
        "{said}"
    );
    // The same through IPv6 alone.
    own.ip(&["rule", "del", "pref", "1000"]);
    own.ip(&["route", "del", "default", "table", "100"]);
    own.ip(&["-6", "route", "add", "default", "dev", "r0", "table", "200"]);
    own.ip(&["-6", "rule", "add", "lookup", "200", "pref", "2000"]);
    let said = refused(&["supervise", d], false);
    assert!(
        said.contains("has a default route (default dev r0 table 200, looked up by rule 2000: from all lookup 200 (IPv6))"),
        "{said}"
    );
}

/// Every address the harness writes or prints for people (each kubeconfig's server, `status`)
/// is loopback from the machine's own namespace, where a mistaken use connects to nothing
/// and is refused at once, instead of sending SYNs out of the default route.
#[test]
fn what_the_harness_hands_people_goes_nowhere_from_outside_its_namespace() {
    let Some(c) = shared() else { return };
    let d = c.dir().to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let mut h = harness();
        h.args(args).stdin(Stdio::null());
        let o = output_within(h, PROMPTLY);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    let user = run(&["user", &d, "someone"]);
    let kubeconfigs = [c.kubeconfig(), user.trim().into()];
    let mut addresses = Vec::new();
    for k in &kubeconfigs {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(k).unwrap()).unwrap();
        for cluster in doc["clusters"].as_array().unwrap() {
            let server = cluster["cluster"]["server"].as_str().unwrap();
            let url = server.strip_prefix("https://").unwrap();
            let (host, _port) = url.rsplit_once(':').unwrap();
            addresses.push(host.trim_matches(['[', ']']).to_string());
        }
    }
    let status = run(&["status", &d]);
    // Any word of it that is an address, or an address and a port.
    for word in status.split(|ch: char| ch.is_whitespace() || "(),;".contains(ch)) {
        let host = word.rsplit_once(':').map_or(word, |(h, _)| h);
        for w in [word, host] {
            if w.parse::<std::net::IpAddr>().is_ok() {
                addresses.push(w.to_string());
            }
        }
    }
    assert!(addresses.len() >= 2, "{addresses:?} from {status}");
    // From this test's namespace (the machine's): each one local, on loopback.
    for a in &addresses {
        let o = Command::new("ip")
            .args(["route", "get", a])
            .output()
            .unwrap();
        let route = stdout(&o);
        assert!(
            o.status.success() && route.starts_with("local ") && route.contains(" dev lo "),
            "{a}: {route}{}",
            stderr(&o)
        );
    }
    // So kubectl with the admin kubeconfig, run here by mistake, is refused at once.
    let cache = tempfile::tempdir().unwrap();
    let state = archbench_cluster::layout::ClusterDir::new(c.dir())
        .read_state()
        .unwrap();
    let mut kubectl = Command::new(state.kube_bin.join("kubectl"));
    kubectl
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["get", "namespaces", "--request-timeout=20s"])
        .env("KUBECACHEDIR", cache.path())
        .stdin(Stdio::null());
    for proxy in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        kubectl.env_remove(proxy);
    }
    let began = Instant::now();
    let o = output_within(kubectl, PROMPTLY);
    let took = began.elapsed();
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(stderr(&o).contains("connection refused"), "{}", stderr(&o));
    assert!(took < Duration::from_secs(15), "refused after {took:?}");
}

const WEB: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: page}
data:
  index.html: "served from a ConfigMap\n"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: nginx
        image: nginx:1.27
        ports: [{containerPort: 80}]
        volumeMounts: [{name: page, mountPath: /var/www/html}]
      volumes: [{name: page, configMap: {name: page}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
"#;

#[test]
fn pods_get_their_network_volumes_token_and_services() {
    let Some(c) = shared() else { return };
    let ns = "t-web";
    namespace(c, ns);
    apply(c, ns, WEB);
    c.kubectl_ok(&[
        "-n",
        ns,
        "rollout",
        "status",
        "deployment/web",
        "--timeout=90s",
    ]);
    let ps = pods(c, ns, "app=web");
    assert_eq!(ps.len(), 2);
    // The scheduler spread them (required anti-affinity) over both nodes.
    let mut nodes: Vec<&str> = ps
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["aks-arm-0", "aks-intel-0"]);
    let svc = c.get_json(&["-n", ns, "service", "web"]);
    let cluster_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let node_port = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    let lb = wait_for("the load balancer's address", PROMPTLY, || {
        let svc = c.get_json(&["-n", ns, "service", "web"]);
        svc["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .map(str::to_string)
    });
    assert!(lb.starts_with("10.250.0."), "{lb}");
    // kube-proxy programs a new Service's rules within a sync or two.
    wait_for("the Service's rules", PROMPTLY, || {
        (curl(c, &format!("http://{cluster_ip}/")).0 == "200").then_some(())
    });
    let mut urls = vec![format!("http://{cluster_ip}/"), format!("http://{lb}/")];
    for n in c.nodes() {
        urls.push(format!("http://{}:{node_port}/", n.ip));
    }
    for p in &ps {
        urls.push(format!(
            "http://{}/",
            p["status"]["podIP"].as_str().unwrap()
        ));
    }
    for url in &urls {
        assert_eq!(
            curl(c, url),
            ("200".to_string(), "served from a ConfigMap\n".to_string()),
            "{url}"
        );
    }
    // Every answer is in some pod's access log (nginx logs to its stdout, the pod's log),
    // and the one that found the rules in place. nginx writes its log line after the answer,
    // and the node agent copies stdout to the log as it comes: the last line may land a
    // moment after curl returned, so the logs are read again until they hold every answer.
    let logged = || -> usize {
        ps.iter()
            .map(|p| {
                c.pod_log(ns, p["metadata"]["name"].as_str().unwrap())
                    .lines()
                    .filter(|l| l.contains("\"GET / HTTP/1.1\" 200"))
                    .count()
            })
            .sum()
    };
    wait_for("every answer in the pods' logs", PROMPTLY, || {
        (logged() > urls.len()).then_some(())
    });
    assert_eq!(logged(), urls.len() + 1);
    // Through the API server: logs, and exec in the container's namespaces.
    let arm = ps
        .iter()
        .find(|p| p["spec"]["nodeName"] == "aks-arm-0")
        .unwrap();
    let name = arm["metadata"]["name"].as_str().unwrap();
    let via_api = c.kubectl_ok(&["-n", ns, "logs", name]);
    assert!(via_api.contains("\"GET / HTTP/1.1\" 200"), "{via_api}");
    let inside = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        name,
        "--",
        "sh",
        "-c",
        "hostname; grep -c atomics /proc/cpuinfo; ip -4 -o addr show eth0; \
         cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; \
         test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token; \
         grep -c BEGIN /var/run/secrets/kubernetes.io/serviceaccount/ca.crt; \
         echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT",
    ]);
    let lines: Vec<&str> = inside.lines().collect();
    assert_eq!(lines[0], name, "{inside}");
    assert_ne!(
        lines[1], "0",
        "an arm64 node's cpuinfo has LSE atomics: {inside}"
    );
    assert!(
        lines[2].contains(arm["status"]["podIP"].as_str().unwrap()),
        "{inside}"
    );
    assert_eq!(lines[3], ns, "{inside}");
    assert_eq!(lines[4], "token", "{inside}");
    assert_eq!(lines[5], "1", "{inside}");
    assert_eq!(lines[6], "10.96.0.1:443", "{inside}");
    // The arm64 node runs arm64 code: Debian's arm64 nginx and busybox under qemu-user.
    let arch = c.kubectl_ok(&["-n", ns, "exec", name, "--", "uname", "-m"]);
    assert_eq!(arch.trim(), "aarch64");
    // The projected token is one the API server accepts: the pod reaches it by the
    // `kubernetes` Service (kube-proxy) and is told who it is (from the amd64 pod, whose
    // image has curl).
    let intel = ps
        .iter()
        .find(|p| p["spec"]["nodeName"] == "aks-intel-0")
        .unwrap();
    let intel = intel["metadata"]["name"].as_str().unwrap();
    let whoami = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        intel,
        "--",
        "sh",
        "-c",
        "curl -s -m 5 --cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
         -H \"Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)\" \
         -X POST -H 'Content-Type: application/json' \
         -d '{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}' \
         https://kubernetes.default.svc.cluster.local/apis/authentication.k8s.io/v1/selfsubjectreviews",
    ]);
    assert!(
        whoami.contains(&format!("system:serviceaccount:{ns}:default")),
        "{whoami}"
    );
    // A command that reads stdin while it writes: 2 MiB through `cat` and back, whole (stdin
    // is fed beside the output, so neither pipe can stall the other).
    let input: Vec<u8> = (0..2 * 1024 * 1024u32)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut cmd = c.command("kubectl");
    cmd.args(["-n", ns, "exec", "-i", name, "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = input.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&feed).unwrap();
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = rx
        .recv_timeout(PROMPTLY)
        .expect("cat through exec finishes")
        .unwrap();
    writer.join().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout.len(), input.len());
    assert!(o.stdout == input, "the bytes came back as they went");
    // A command's exit status is kubectl's.
    let o = c.kubectl(&[
        "-n",
        ns,
        "exec",
        name,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out\n");
    assert!(stderr(&o).starts_with("err\n"), "{}", stderr(&o));
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

#[test]
fn containers_restart_crash_loop_and_fail_to_pull_as_on_a_cluster() {
    let Some(c) = shared() else { return };
    let ns = "t-faults";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: steady, labels: {app: steady}}
spec:
  containers: [{name: nginx, image: nginx, ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: crashing}
spec:
  containers:
  - {name: app, image: nginx, command: [sh, -c, "echo boom; exit 3"]}
---
apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  containers: [{name: app, image: registry.example/no-such-image:1}]
"#,
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/steady",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    // A killed container restarts (restartPolicy Always), and is ready again.
    c.kill_pod(ns, "steady");
    wait_for("steady's restart", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "steady"]);
        let cs = &p["status"]["containerStatuses"][0];
        (cs["restartCount"] == 1 && cs["ready"] == true).then_some(())
    });
    let p = c.get_json(&["-n", ns, "pod", "steady"]);
    assert_eq!(
        p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        137
    );
    // A container that keeps exiting: CrashLoopBackOff, its last words in --previous.
    let waiting = wait_for("the crash loop", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "crashing"]);
        let cs = &p["status"]["containerStatuses"][0];
        (cs["state"]["waiting"]["reason"] == "CrashLoopBackOff").then(|| cs.clone())
    });
    assert!(waiting["restartCount"].as_u64().unwrap() >= 1, "{waiting}");
    assert_eq!(
        waiting["lastState"]["terminated"]["exitCode"], 3,
        "{waiting}"
    );
    let previous = c.kubectl_ok(&["-n", ns, "logs", "crashing", "--previous"]);
    assert_eq!(previous, "boom\n");
    // An image that cannot be pulled: the runtime's words, then the back-off.
    let reason = wait_for("the failed pull", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "missing"]);
        let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
        matches!(
            w["reason"].as_str(),
            Some("ErrImagePull" | "ImagePullBackOff")
        )
        .then(|| w["message"].as_str().unwrap_or("").to_string())
    });
    assert!(
        reason.contains("registry.example/no-such-image:1"),
        "{reason}"
    );
    let events = c.kubectl_ok(&["-n", ns, "events", "--for", "pod/missing"]);
    assert!(events.contains("Failed to pull image"), "{events}");
    // Deleting a pod ends its processes (SIGTERM: nginx stops at once) and then its object.
    let pids: Vec<u32> = std::fs::read_dir(c.dir().join("nodes"))
        .unwrap()
        .flatten()
        .flat_map(|n| {
            std::fs::read_dir(n.path().join("pods"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|p| {
            p.file_name()
                .to_string_lossy()
                .starts_with(&format!("{ns}_steady_"))
        })
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("pids"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|f| std::fs::read_to_string(f.path()).ok()?.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 1);
    c.kubectl_ok(&["-n", ns, "delete", "pod", "steady", "--timeout=60s"]);
    assert!(
        !Path::new(&format!("/proc/{}", pids[0])).exists(),
        "nginx is gone"
    );
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// The laptop's namespace reaches the cluster as a laptop reaches AKS: kubectl through the
/// kubeconfig's address, a LoadBalancer address and a NodePort on the nodes' external
/// addresses answer; the nodes' InternalIPs, ClusterIPs and pod IPs have no route there.
#[test]
fn the_laptop_reaches_only_what_a_laptop_reaches_on_aks() {
    let Some(c) = shared() else { return };
    let ns = "t-laptop";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: laptop-web}}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers: [{name: nginx, image: nginx, ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: lb}
spec: {type: LoadBalancer, selector: {app: laptop-web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: np}
spec: {type: NodePort, selector: {app: laptop-web}, ports: [{port: 80}]}
"#,
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/web",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    let from_laptop = |url: &str| {
        let mut cmd = c.laptop_command("curl");
        cmd.args([
            "-s",
            "-o",
            "/dev/null",
            "-m",
            "5",
            "-w",
            "%{http_code}",
            url,
        ]);
        stdout(&output_within(cmd, PROMPTLY))
    };
    // The API server, by the same kubeconfig.
    let mut kubectl = c.laptop_command("kubectl");
    kubectl.args(["-n", ns, "get", "pod", "web", "-o", "name"]);
    assert_eq!(stdout(&output_within(kubectl, PROMPTLY)).trim(), "pod/web");
    let lb = wait_for("the load balancer's address", PROMPTLY, || {
        let svc = c.get_json(&["-n", ns, "service", "lb"]);
        svc["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .map(str::to_string)
    });
    let np = c.get_json(&["-n", ns, "service", "np"]);
    let node_port = np["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    let clusterip = np["spec"]["clusterIP"].as_str().unwrap().to_string();
    let pod_ip = c.get_json(&["-n", ns, "pod", "web"])["status"]["podIP"]
        .as_str()
        .unwrap()
        .to_string();
    // kube-proxy programs a new Service's rules within a sync or two.
    wait_for("the load balancer from the laptop", PROMPTLY, || {
        (from_laptop(&format!("http://{lb}/")) == "200").then_some(())
    });
    let nodes = c.get_json(&["nodes"]);
    for n in nodes["items"].as_array().unwrap() {
        let address = |kind: &str| {
            n["status"]["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["type"] == kind)
                .and_then(|a| a["address"].as_str())
                .unwrap()
                .to_string()
        };
        let (internal, external) = (address("InternalIP"), address("ExternalIP"));
        assert_eq!(
            from_laptop(&format!("http://{external}:{node_port}/")),
            "200"
        );
        unreachable_from_laptop(c, &internal);
    }
    for ip in [clusterip, pod_ip, "10.240.0.1".to_string()] {
        unreachable_from_laptop(c, &ip);
    }
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// No route from the laptop: the kernel says so at once (and sends nothing).
fn unreachable_from_laptop(c: &TestCluster, ip: &str) {
    let mut cmd = c.laptop_command("ip");
    cmd.args(["route", "get", ip]);
    let o = output_within(cmd, PROMPTLY);
    assert!(!o.status.success(), "{ip}: {}", stdout(&o));
    assert!(stderr(&o).contains("unreachable"), "{ip}: {}", stderr(&o));
}

/// A container's condition in the pod's status: (ready, started, restartCount).
fn container_flags(c: &TestCluster, ns: &str, pod: &str) -> (bool, bool, u64) {
    let p = c.get_json(&["-n", ns, "pod", pod]);
    let cs = &p["status"]["containerStatuses"][0];
    (
        cs["ready"] == true,
        cs["started"] == true,
        cs["restartCount"].as_u64().unwrap_or(0),
    )
}

fn exec_in(c: &TestCluster, ns: &str, pod: &str, container: &str, script: &str) {
    c.kubectl_ok(&[
        "-n", ns, "exec", pod, "-c", container, "--", "sh", "-c", script,
    ]);
}

/// Init containers one after another to completion; readiness, liveness and startup probes
/// (httpGet, tcpSocket, exec) by the kubelet's rules; a field the agent does not model
/// refused with its name.
#[test]
fn probes_and_init_containers_follow_the_kubelets_rules() {
    let Some(c) = shared() else { return };
    let ns = "t-probes";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: init}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - {name: first, image: nginx, volumeMounts: [{name: work, mountPath: /run/work}],
     command: [sh, -c, "echo one > /run/work/order; until [ -e /run/work/go ]; do sleep 0.1; done"]}
  - {name: second, image: nginx, volumeMounts: [{name: work, mountPath: /run/work}],
     command: [sh, -c, "echo two >> /run/work/order"]}
  containers:
  - {name: app, image: nginx, volumeMounts: [{name: work, mountPath: /run/work}],
     command: [sh, -c, "cat /run/work/order; exec sleep 600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: init-fails}
spec:
  restartPolicy: Never
  initContainers: [{name: setup, image: nginx, command: [sh, -c, "exit 4"]}]
  containers: [{name: app, image: nginx, command: [sleep, "600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  terminationGracePeriodSeconds: 2
  volumes: [{name: state, emptyDir: {}}]
  containers:
  - name: app
    image: nginx
    volumeMounts: [{name: state, mountPath: /run/state}]
    command: [sh, -c, "touch /run/state/alive; exec sleep 600"]
    startupProbe: {exec: {command: [cat, /run/state/started]}, periodSeconds: 1, failureThreshold: 600}
    readinessProbe: {exec: {command: [cat, /run/state/ready]}, periodSeconds: 1, failureThreshold: 2}
    livenessProbe: {exec: {command: [cat, /run/state/alive]}, periodSeconds: 1, failureThreshold: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: http}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers:
  - name: nginx
    image: nginx
    ports: [{name: web, containerPort: 80}]
    readinessProbe:
      httpGet: {path: /, port: web, httpHeaders: [{name: User-Agent, value: probe-test}]}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: http-missing}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers:
  - name: nginx
    image: nginx
    readinessProbe: {httpGet: {path: /no-such-page, port: 80}, periodSeconds: 1}
    livenessProbe: {tcpSocket: {port: 80}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: hooked}
spec:
  containers:
  - {name: app, image: nginx, lifecycle: {preStop: {exec: {command: [sleep, "1"]}}}}
"#,
    );
    // While the first init container runs: Pending, not Initialized, the app not started.
    wait_for("the first init container running", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "init"]);
        (p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()).then_some(())
    });
    let p = c.get_json(&["-n", ns, "pod", "init"]);
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let initialized = &p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
        .unwrap();
    assert_eq!(initialized["status"], "False", "{initialized}");
    assert_eq!(initialized["reason"], "ContainersNotInitialized");
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    exec_in(c, ns, "init", "first", "touch /run/work/go");
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/init",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    assert_eq!(
        c.kubectl_ok(&["-n", ns, "logs", "init", "-c", "app"]),
        "one\ntwo\n"
    );
    let p = c.get_json(&["-n", ns, "pod", "init"]);
    for s in p["status"]["initContainerStatuses"].as_array().unwrap() {
        assert_eq!(s["state"]["terminated"]["reason"], "Completed", "{s}");
    }
    // An init container that fails under restartPolicy Never fails the pod; its app never runs.
    wait_for("the failed pod", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "init-fails"]);
        (p["status"]["phase"] == "Failed").then_some(())
    });
    let p = c.get_json(&["-n", ns, "pod", "init-fails"]);
    assert_eq!(
        p["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"],
        4
    );
    assert!(
        p["status"]["containerStatuses"][0]["state"]["waiting"].is_object(),
        "{p}"
    );
    // The startup probe holds readiness and liveness back: not started, not ready.
    wait_for("probed running", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "probed"]);
        p["status"]["containerStatuses"][0]["state"]["running"]
            .is_object()
            .then_some(())
    });
    assert_eq!(container_flags(c, ns, "probed"), (false, false, 0));
    exec_in(c, ns, "probed", "app", "touch /run/state/started");
    wait_for("probed started", PROMPTLY, || {
        (container_flags(c, ns, "probed") == (false, true, 0)).then_some(())
    });
    // Readiness follows its exec probe both ways (two failures in a row to go unready).
    exec_in(c, ns, "probed", "app", "touch /run/state/ready");
    wait_for("probed ready", PROMPTLY, || {
        (container_flags(c, ns, "probed") == (true, true, 0)).then_some(())
    });
    exec_in(c, ns, "probed", "app", "rm /run/state/ready");
    wait_for("probed unready again", PROMPTLY, || {
        (container_flags(c, ns, "probed") == (false, true, 0)).then_some(())
    });
    // A failed liveness probe restarts the container (and its startup probe starts over).
    exec_in(c, ns, "probed", "app", "rm /run/state/alive");
    wait_for("probed restarted", PROMPTLY, || {
        let (_, _, restarts) = container_flags(c, ns, "probed");
        (restarts == 1).then_some(())
    });
    let events = c.kubectl_ok(&["-n", ns, "events", "--for", "pod/probed"]);
    for want in [
        "Readiness probe failed",
        "Liveness probe failed",
        "Container app failed liveness probe, will be restarted",
    ] {
        assert!(events.contains(want), "{want} in {events}");
    }
    // httpGet: a named port and the probe's own headers; a 404 is a failure, a port that
    // answers is alive.
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/http",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    let log = c.kubectl_ok(&["-n", ns, "logs", "http"]);
    assert!(
        log.contains("\"probe-test\""),
        "the probe's User-Agent: {log}"
    );
    let events = wait_for("the 404's event", PROMPTLY, || {
        let e = c.kubectl_ok(&["-n", ns, "events", "--for", "pod/http-missing"]);
        e.contains("Readiness probe failed: HTTP probe failed with statuscode: 404")
            .then_some(e)
    });
    assert!(events.contains("Unhealthy"), "{events}");
    // Unready, yet alive: its liveness probe holds (no restart).
    assert_eq!(container_flags(c, ns, "http-missing"), (false, true, 0));
    // A repeated failure is one Event with a count, as the kubelet's correlator makes it.
    let repeated = wait_for("the 404 counted again", PROMPTLY, || {
        let listed = c.get_json(&[
            "-n",
            ns,
            "events",
            "--field-selector",
            "involvedObject.name=http-missing,reason=Unhealthy",
        ]);
        let same: Vec<serde_json::Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["message"] == "Readiness probe failed: HTTP probe failed with statuscode: 404"
            })
            .cloned()
            .collect();
        let counted = same.len() == 1 && same[0]["count"].as_u64() >= Some(2);
        (same.len() > 1 || counted).then_some(same)
    });
    assert_eq!(repeated.len(), 1, "{repeated:?}");
    // What the agent does not model: refused, named, never started.
    let waiting = wait_for("the refusal", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "hooked"]);
        let w = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (w["reason"] == "CreateContainerConfigError").then_some(w)
    });
    assert!(
        waiting["message"]
            .as_str()
            .unwrap()
            .starts_with("spec.containers[0].lifecycle is not modelled"),
        "{waiting}"
    );
    let events = c.kubectl_ok(&["-n", ns, "events", "--for", "pod/hooked"]);
    assert!(events.contains("lifecycle is not modelled"), "{events}");
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

#[test]
fn an_indexed_job_runs_through_the_job_controller() {
    let Some(c) = shared() else { return };
    let ns = "t-job";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: count}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: worker, image: nginx, command: [sh, -c, "echo index=$JOB_COMPLETION_INDEX host=$(hostname)"]}
"#,
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "job/count",
        "--for=condition=Complete",
        "--timeout=90s",
    ]);
    let mut seen: Vec<String> = pods(c, ns, "batch.kubernetes.io/job-name=count")
        .iter()
        .map(|p| c.kubectl_ok(&["-n", ns, "logs", p["metadata"]["name"].as_str().unwrap()]))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "index=0 host=count-0\n",
            "index=1 host=count-1\n",
            "index=2 host=count-2\n"
        ]
    );
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

#[test]
fn the_metrics_api_serves_each_pods_usage() {
    let Some(c) = shared() else { return };
    let ns = "t-top";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers:
  - {name: app, image: nginx, command: [sh, -c, "while :; do :; done"]}
  - {name: idle, image: nginx, command: [sleep, "600"]}
"#,
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/busy",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    // The kubelet's own figures: each container's from its own cgroup, and no error.
    let raw = c.kubectl_ok(&[
        "get",
        "--raw",
        "/api/v1/nodes/aks-intel-0/proxy/metrics/resource",
    ]);
    for container in ["app", "idle"] {
        let row = format!(
            "container_cpu_usage_seconds_total{{container=\"{container}\",namespace=\"{ns}\",pod=\"busy\"}}"
        );
        assert!(raw.contains(&row), "{row} in {raw}");
    }
    assert!(raw.contains("resource_scrape_error 0"), "{raw}");
    // metrics-server needs two scrapes 10 s apart before it reports a pod.
    let line = wait_for("busy in kubectl top", PROMPTLY, || {
        let o = c.kubectl(&["-n", ns, "top", "pod", "busy", "--no-headers"]);
        o.status.success().then(|| stdout(&o))
    });
    // A spinning shell burns most of a core: hundreds of millicores.
    let cpu: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.strip_suffix('m'))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(cpu >= 200, "{line}");
    // Per container: the spinning one has the pod's CPU, the sleeping one next to none.
    let per = c.kubectl_ok(&[
        "-n",
        ns,
        "top",
        "pod",
        "busy",
        "--containers",
        "--no-headers",
    ]);
    let millicores = |container: &str| -> u64 {
        per.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(container))
            .and_then(|l| l.split_whitespace().nth(2)?.strip_suffix('m')?.parse().ok())
            .unwrap_or_else(|| panic!("{container} in {per}"))
    };
    assert!(millicores("app") >= 200, "{per}");
    assert!(millicores("idle") < 20, "{per}");
    let nodes = c.kubectl_ok(&["top", "node", "--no-headers"]);
    assert_eq!(nodes.lines().count(), 2, "{nodes}");
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// A `cpu.stat` field of the pod's /sys/fs/cgroup, read through exec.
fn cgroup_stat(c: &TestCluster, ns: &str, pod: &str) -> (u64, u64, u64) {
    let text = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        pod,
        "--",
        "cat",
        "/sys/fs/cgroup/cpu.stat",
    ]);
    let field = |k: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {text}"))
    };
    (
        field("usage_usec "),
        field("nr_throttled "),
        field("throttled_usec "),
    )
}

#[test]
fn cpu_and_memory_limits_are_enforced_and_an_oom_kill_reported() {
    let Some(c) = shared() else { return };
    let ns = "t-limits";
    namespace(c, ns);
    apply(
        c,
        ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: capped}
spec:
  containers:
  - name: app
    image: nginx
    command: [sh, -c, "while :; do :; done"]
    resources: {limits: {cpu: 200m, memory: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: hungry}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: nginx
    # tail keeps the last line whole: /dev/zero has no newline, so 256 MiB of it.
    command: [sh, -c, "head -c 268435456 /dev/zero | tail -n 1 > /dev/null"]
    resources: {limits: {memory: 32Mi}}
"#,
    );
    c.kubectl_ok(&[
        "-n",
        ns,
        "wait",
        "pod/capped",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    // What the pod sees is its own limit.
    let cpu_max = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        "capped",
        "--",
        "cat",
        "/sys/fs/cgroup/cpu.max",
    ]);
    assert_eq!(cpu_max, "20000 100000\n");
    let memory_max = c.kubectl_ok(&[
        "-n",
        ns,
        "exec",
        "capped",
        "--",
        "cat",
        "/sys/fs/cgroup/memory.max",
    ]);
    assert_eq!(memory_max, format!("{}\n", 64 << 20));
    // A spinning shell wants a whole core; the quota gives it a fifth, and the kernel counts
    // the periods it ran out of.
    let (used0, throttled0, waited0) = cgroup_stat(c, ns, "capped");
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let (used1, throttled1, waited1) = cgroup_stat(c, ns, "capped");
    let cores = (used1 - used0) as f64 / t0.elapsed().as_micros() as f64;
    eprintln!(
        "capped at 200m: {cores:.3} cores over {:?}, {} periods throttled, {} µs waited",
        t0.elapsed(),
        throttled1 - throttled0,
        waited1 - waited0
    );
    assert!(cores <= 0.21, "{cores:.3} cores under a 200m limit");
    assert!(
        cores >= 0.1,
        "{cores:.3} cores: the spinning shell barely ran"
    );
    assert!(
        throttled1 - throttled0 >= 10,
        "{throttled0} -> {throttled1} throttled periods"
    );
    assert!(
        waited1 > waited0,
        "throttled time {waited0} -> {waited1} µs"
    );
    // Past its memory limit: killed by the kernel, reported as a kubelet does.
    let terminated = wait_for("hungry's OOM kill", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "hungry"]);
        let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
        (!t.is_null()).then(|| t.clone())
    });
    assert_eq!(terminated["reason"], "OOMKilled", "{terminated}");
    assert_eq!(terminated["exitCode"], 137, "{terminated}");
    let events = c.kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=hungry,reason=OOMKilled",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        events.contains(&format!("limit ({} bytes)", 32 << 20)),
        "{events}"
    );
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

#[test]
fn down_stops_every_process_and_the_namespace() {
    if !can_run() {
        return;
    }
    let c = TestCluster::start(&TestOptions::default(), "down").unwrap();
    let dir = c.dir().to_path_buf();
    c.kubectl_ok(&["run", "web", "--image", "nginx"]);
    c.kubectl_ok(&["wait", "pod/web", "--for=condition=Ready", "--timeout=90s"]);
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap();
    let netns = state["netns_path"].as_str().unwrap().to_string();
    // Everything in the cluster's namespace: the components, the agents, the pods' helpers.
    let inside = archbench_cluster::process::in_netns(Path::new(&netns));
    assert!(inside.len() >= 8, "etcd, apiserver, …, nginx: {inside:?}");
    let o = output_within(
        {
            let mut h = harness();
            h.arg("down").arg(&dir);
            h
        },
        PROMPTLY,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Gone, or a zombie its new parent has yet to reap (it runs nothing).
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    };
    let left: Vec<u32> = inside.iter().copied().filter(|p| running(*p)).collect();
    let named: Vec<String> = left
        .iter()
        .map(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ")
        })
        .collect();
    assert!(left.is_empty(), "still running: {left:?} {named:?}");
    assert!(!Path::new(&netns).exists(), "{netns} removed");
    let o = output_within(
        {
            let mut h = harness();
            h.arg("status").arg(&dir);
            h.stdin(Stdio::null());
            h
        },
        PROMPTLY,
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_node_whose_heartbeats_stop_goes_not_ready_and_comes_back() {
    if !can_run() {
        return;
    }
    let c = TestCluster::start(&TestOptions::default(), "heartbeats").unwrap();
    let ready = |node: &str| {
        let n = c.get_json(&["node", node]);
        n["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(ready("aks-arm-0"), "True");
    c.fault("stop-heartbeats:aks-arm-0", true);
    // The node-lifecycle controller's grace is 20 s here; the agent notices within 10 s.
    wait_for("aks-arm-0 NotReady", PROMPTLY, || {
        (ready("aks-arm-0") == "Unknown").then_some(())
    });
    assert_eq!(
        ready("aks-intel-0"),
        "True",
        "the other node is not touched"
    );
    let n = c.get_json(&["node", "aks-arm-0"]);
    let taints = n["spec"]["taints"].to_string();
    assert!(
        taints.contains("node.kubernetes.io/unreachable"),
        "{taints}"
    );
    c.fault("stop-heartbeats:aks-arm-0", false);
    wait_for("aks-arm-0 Ready again", PROMPTLY, || {
        (ready("aks-arm-0") == "True").then_some(())
    });
}
