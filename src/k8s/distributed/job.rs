//! The Indexed Job of a target's load workers: one pod per worker, each running
//! `archbench agent` on its part of the load, placed off nginx's nodes, bounded in time even
//! if archbench dies.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, Pod,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use super::{AgentOrders, InCluster, WholeLoad, JOB_LABEL};
use crate::agent_protocol::{CONTROL_PORT, TOKEN_ENV};
use crate::k8s::load::LoadTarget;
use crate::k8s::tls;
use crate::k8s::{APP, MANAGED_BY};

/// Time for a worker to print its result and end after its run's last timeout.
pub(super) const FINISH_GRACE: Duration = Duration::from_secs(30);

/// How long a load Job may live at most: the wait for its workers, the start, the run and
/// the finish, with a minute to spare.
pub(super) fn job_deadline(how: &InCluster, load: &WholeLoad) -> Duration {
    how.ready_timeout
        .saturating_add(start_ahead(how.workers))
        .saturating_add(load.duration)
        .saturating_add(load.timeout)
        .saturating_add(FINISH_GRACE)
        .saturating_add(Duration::from_secs(60))
}

/// How far ahead of "all ready" the common start instant is set: room for the start to reach
/// every worker through the API server, one request each.
pub(super) fn start_ahead(workers: u32) -> Duration {
    (Duration::from_secs(2) + Duration::from_millis(20) * workers).min(Duration::from_secs(60))
}

fn labels(job: &str, target: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (
            "app.kubernetes.io/name".to_string(),
            "archbench-load".to_string(),
        ),
        (JOB_LABEL.to_string(), job.to_string()),
        ("archbench.dev/target".to_string(), target.to_string()),
    ])
}

/// The Indexed Job of `target`'s workers.
pub fn job(
    target: &LoadTarget,
    namespace: &str,
    name: &str,
    how: &InCluster,
    load: &WholeLoad,
    token: &str,
) -> Job {
    let (node_selector, affinity) = placement(how);
    let labels = labels(name, &target.name);
    Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(how.workers as i32),
            parallelism: Some(how.workers as i32),
            // A failed worker's share is reported lost, not retried (a replacement would never
            // get the start instant), and its failure leaves the other indexes running.
            backoff_limit_per_index: Some(0),
            max_failed_indexes: Some(how.workers as i32),
            // Bounded even if archbench is killed before it deletes the Job.
            active_deadline_seconds: Some(
                i64::try_from(job_deadline(how, load).as_secs()).unwrap_or(i64::MAX),
            ),
            ttl_seconds_after_finished: Some(600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    node_selector,
                    affinity,
                    containers: vec![worker_container(target, how, load, token)],
                    volumes: load.tls.then(|| {
                        vec![Volume {
                            name: tls::SECRET.into(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(tls::SECRET.into()),
                                ..SecretVolumeSource::default()
                            }),
                            ..Volume::default()
                        }]
                    }),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The worker's command line: its part of the whole load, its control endpoint, and a start
/// wait that outlives the wait for every worker.
fn agent_orders(target: &LoadTarget, how: &InCluster, load: &WholeLoad) -> AgentOrders {
    // The ClusterIP itself, with the service's name as Host: the static image has no
    // resolver libraries, and nothing depends on the cluster's DNS mid-run.
    let scheme = if load.tls { "https" } else { "http" };
    let (url, host) = match target.cluster_address {
        Some(addr) => (
            format!("{scheme}://{addr}/"),
            crate::http::Target::parse(&target.url)
                .ok()
                .map(|t| t.host_header),
        ),
        None => (target.url.clone(), None),
    };
    AgentOrders {
        url,
        connections: load.connections,
        threads: load.threads,
        duration: load.duration,
        timeout: load.timeout,
        // Kubernetes expands $(VAR) in args from the container's environment.
        part: format!("$(JOB_COMPLETION_INDEX)/{}", how.workers),
        // The pod's own address: pods that share a network (hostNetwork) cannot all bind
        // 0.0.0.0 at one port.
        control: format!("$(POD_IP):{CONTROL_PORT}"),
        // Outlives the wait for every worker, so an early one is still there at the start.
        start_timeout: Duration::from_secs(
            (how.ready_timeout + start_ahead(how.workers)).as_secs() + 60,
        ),
        rate: load.rate,
        stages: load.stages.as_ref().map(ToString::to_string),
        http2_streams: load.http2_streams,
        http3_streams: load.http3_streams,
        zero_rtt: load.zero_rtt,
        host,
        // The Secret's certificate, mounted: the one nginx serves, and no other.
        pinned_cert: load.tls.then(|| format!("{}/tls.crt", tls::WORKER_MOUNT)),
    }
}

/// Where the workers may run: the user's node selector, or else anywhere but a node that
/// runs nginx (a load generator beside the server measures the two fighting for the cores).
fn placement(how: &InCluster) -> (Option<BTreeMap<String, String>>, Option<Affinity>) {
    if let Some((k, v)) = &how.node_selector {
        return (Some(BTreeMap::from([(k.clone(), v.clone())])), None);
    }
    let off_nginx = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(APP.0.to_string(), APP.1.to_string())])),
            ..LabelSelector::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..PodAffinityTerm::default()
    };
    let affinity = Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![off_nginx]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    };
    (None, Some(affinity))
}

fn worker_container(
    target: &LoadTarget,
    how: &InCluster,
    load: &WholeLoad,
    token: &str,
) -> Container {
    let pod_ip = EnvVar {
        name: "POD_IP".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    // Only who knows it (through the API server) starts or stops a worker; other pods of the
    // cluster can reach its port too.
    let token = EnvVar {
        name: TOKEN_ENV.into(),
        value: Some(token.to_string()),
        ..EnvVar::default()
    };
    Container {
        name: "archbench".into(),
        image: Some(how.image.clone()),
        args: Some((how.spell)(&agent_orders(target, how, load))),
        env: Some(vec![pod_ip, token]),
        volume_mounts: load.tls.then(|| {
            vec![VolumeMount {
                name: tls::SECRET.into(),
                mount_path: tls::WORKER_MOUNT.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]
        }),
        // Requested, so the scheduler spreads the workers by the CPU they use rather than
        // packing them onto one node.
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity(load.threads.to_string())),
                ("memory".to_string(), Quantity("64Mi".into())),
            ])),
            ..ResourceRequirements::default()
        }),
        ports: Some(vec![ContainerPort {
            container_port: i32::from(CONTROL_PORT),
            name: Some("control".into()),
            ..ContainerPort::default()
        }]),
        ..Container::default()
    }
}

/// A worker pod's completion index (which part of the load it runs).
pub(super) fn index_of(p: &Pod) -> Option<u32> {
    p.annotations()
        .get("batch.kubernetes.io/job-completion-index")
        .and_then(|i| i.parse().ok())
}

/// The Jobs `load --in-cluster` would create for each architecture's service of `setup`
/// (`k8s manifests --load-job`), with the whole load's defaults of `k8s load`, addressed by
/// the services' DNS names (their ClusterIPs exist only once applied).
pub fn preview_jobs(setup: &crate::k8s::Setup, how: &InCluster) -> Vec<Job> {
    let load = WholeLoad {
        connections: 50.max(u64::from(how.workers)),
        threads: 1,
        duration: Duration::from_secs(30),
        rate: None,
        timeout: Duration::from_secs(10),
        http2_streams: None,
        http3_streams: None,
        zero_rtt: false,
        tls: false,
        stages: None,
    };
    setup
        .variants
        .iter()
        .map(|v| {
            let target = LoadTarget {
                name: v.name.clone(),
                variant: Some(v.name.clone()),
                service: v.service(),
                url: format!(
                    "http://{}.{}.svc.cluster.local/",
                    v.service(),
                    setup.namespace
                ),
                cluster_address: None,
                watch: Vec::new(),
            };
            let name = format!("archbench-load-{}", v.name);
            job(
                &target,
                &setup.namespace,
                &name,
                how,
                &load,
                // A token of this printing's own, not one everybody who reads this code knows:
                // a Job applied from this output answers only whoever holds the output.
                &new_token(),
            )
        })
        .collect()
}

/// A control token nobody can guess: 128 bits from the kernel.
pub(super) fn new_token() -> String {
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if random.is_err() {
        // No /dev/urandom: the time and the process, which at least differ per run.
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Jobs as YAML documents, as `k8s manifests` prints.
pub fn write_jobs_yaml(jobs: &[Job], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for j in jobs {
        crate::k8s::manifests::write_doc(&format!("Job {}", j.name_any()), j, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> LoadTarget {
        LoadTarget {
            name: "arm".into(),
            variant: Some("arm".into()),
            service: "nginx-arm-svc".into(),
            url: "http://nginx-arm-svc.nginx.svc.cluster.local/".into(),
            cluster_address: Some("10.0.4.7:80".parse().unwrap()),
            watch: Vec::new(),
        }
    }

    fn how(node_selector: Option<(String, String)>) -> InCluster {
        InCluster {
            workers: 4,
            image: "registry.example/archbench:1".into(),
            node_selector,
            ready_timeout: Duration::from_secs(60),
            spell: crate::cli::argv::agent_args,
        }
    }

    const LOAD: WholeLoad = WholeLoad {
        connections: 10,
        threads: 2,
        duration: Duration::from_secs(30),
        rate: Some(1000.0),
        timeout: Duration::from_secs(2),
        http2_streams: None,
        http3_streams: None,
        zero_rtt: false,
        tls: false,
        stages: None,
    };

    #[test]
    fn the_job_is_indexed_each_worker_takes_its_part_and_stays_off_nginx_nodes() {
        let job =
            serde_json::to_value(job(&target(), "nginx", "j", &how(None), &LOAD, "t0k")).unwrap();
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        // A failed worker is not replaced, and the Job ends by itself even if archbench dies.
        assert_eq!(spec["backoffLimitPerIndex"], 0);
        assert_eq!(spec["maxFailedIndexes"], 4);
        let deadline = spec["activeDeadlineSeconds"].as_u64().unwrap();
        assert!(
            (60 + 30 + 2..60 + 30 + 2 + 200).contains(&deadline),
            "{deadline}"
        );
        assert_eq!(spec["completions"], 4);
        assert_eq!(spec["parallelism"], 4);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "registry.example/archbench:1");
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let joined = args.join(" ");
        assert!(
            joined.starts_with("agent http://10.0.4.7:80/ -c 10 -t 2 -d 30000ms"),
            "{joined}"
        );
        assert!(
            joined.ends_with("-H Host: nginx-arm-svc.nginx.svc.cluster.local"),
            "{joined}"
        );
        assert!(
            joined.contains("--part $(JOB_COMPLETION_INDEX)/4"),
            "{joined}"
        );
        assert!(joined.contains("--control $(POD_IP):9090"), "{joined}");
        assert!(joined.contains("--rate 1000"), "{joined}");
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "status.podIP"
        );
        assert_eq!(c["env"][1]["name"], TOKEN_ENV);
        assert_eq!(c["env"][1]["value"], "t0k");
        assert_eq!(c["resources"]["requests"]["cpu"], "2");
        let term = &pod["affinity"]["podAntiAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            term["labelSelector"]["matchLabels"]["app"],
            "nginx-multiarch"
        );
        assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
        assert!(pod.get("nodeSelector").is_none());
        assert_eq!(job["metadata"]["labels"][JOB_LABEL], "j");
        assert_eq!(
            job["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "archbench"
        );
    }

    #[test]
    fn a_node_selector_replaces_the_anti_affinity() {
        let sel = Some(("agentpool".to_string(), "load".to_string()));
        let job =
            serde_json::to_value(job(&target(), "nginx", "j", &how(sel), &LOAD, "t0k")).unwrap();
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["agentpool"], "load");
        assert!(pod.get("affinity").is_none());
    }

    #[test]
    fn the_start_is_set_further_ahead_for_more_workers_within_a_minute() {
        assert_eq!(start_ahead(1), Duration::from_millis(2_020));
        assert_eq!(start_ahead(100), Duration::from_secs(4));
        assert_eq!(start_ahead(1_000), Duration::from_secs(22));
        assert_eq!(start_ahead(u32::MAX), Duration::from_secs(60));
    }
}
