//! `archbench k8s …`: the command line of the Kubernetes workflow, mapped onto `crate::k8s`.
//! The async API calls run on a small tokio runtime owned here; loads run on the engine's own
//! threads as everywhere else.

use anyhow::Context as _;

use super::args::{K8sArgs, K8sCommand, K8sSetupArgs};
use super::{write_stdout, StopSignals};
use crate::k8s::{self, Cluster, ClusterOptions, K8sError, NginxConfig, Setup};

pub fn cmd_k8s(a: &K8sArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if let K8sCommand::Manifests(s) = &a.command {
        // No cluster needed: the YAML `up` would apply.
        let setup = setup(s, &a.namespace)?;
        write_stdout(|out| k8s::write_yaml(&k8s::manifests(&setup), out))?;
        return Ok(0);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let opts = ClusterOptions {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
    };
    let stop = signals.stop.clone();
    runtime.block_on(async move {
        let cluster = Cluster::connect(&opts).await?;
        match &a.command {
            K8sCommand::Manifests(_) => Ok(0),
            K8sCommand::Up(s) => {
                let setup = setup(s, &a.namespace)?;
                let mut line = super::ProgressLine::new(true);
                let report = k8s::up(&cluster, &setup, &mut |l| line.message(l), &stop).await;
                line.finish();
                let report = report?;
                write_stdout(|out| {
                    for (what, change) in &report.changes {
                        writeln!(out, "{what}: {}", change.as_str())?;
                    }
                    if report.changed_nothing() {
                        writeln!(out, "nothing changed: the cluster already runs this setup")?;
                    }
                    writeln!(out)?;
                    k8s::write_status(&report.rows, out)
                })?;
                Ok(0)
            }
            K8sCommand::Status => {
                let rows = k8s::status(&cluster).await?;
                write_stdout(|out| k8s::write_status(&rows, out))?;
                Ok(0)
            }
            K8sCommand::Down(d) => {
                let deleted = k8s::down(&cluster, d.keep_namespace, d.wait_timeout, &stop).await?;
                write_stdout(|out| {
                    for what in &deleted {
                        writeln!(out, "{what}: deleted")?;
                    }
                    if deleted.is_empty() {
                        writeln!(
                            out,
                            "nothing of archbench's in namespace {}",
                            cluster.namespace
                        )?;
                    }
                    Ok(())
                })?;
                Ok(0)
            }
        }
    })
}

/// The validated setup of `up` and `manifests`.
fn setup(s: &K8sSetupArgs, namespace: &str) -> Result<Setup, K8sError> {
    let config = match s.config.as_str() {
        "tuned" => NginxConfig::Tuned,
        "stock" => NginxConfig::Stock,
        path => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                K8sError::Usage(format!(
                    "--config {path}: {e}; give tuned, stock or the path of an nginx.conf"
                ))
            })?;
            NginxConfig::File {
                path: path.into(),
                text,
            }
        }
    };
    let mut archs = s.arch.clone();
    archs.dedup();
    if archs.is_empty() {
        return Err(K8sError::Usage(
            "--arch needs at least one of intel, arm, amd".into(),
        ));
    }
    if s.image.trim().is_empty() {
        return Err(K8sError::Usage(
            "--image is empty; use e.g. nginx:latest".into(),
        ));
    }
    if s.wait_timeout.is_zero() {
        return Err(K8sError::Usage(
            "--wait-timeout must be above zero; use e.g. 5m".into(),
        ));
    }
    Ok(Setup {
        namespace: namespace.to_string(),
        archs,
        image: s.image.clone(),
        config,
        service_type: s.service_type,
        pools: s.pools_by,
        wait_timeout: s.wait_timeout,
    })
}
