//! Runs the stand-in cluster until Ctrl-C, printing its kubeconfig path (for poking it with
//! kubectl by hand).

use std::process::ExitCode;

fn main() -> ExitCode {
    // ARCHBENCH_BINARY=PATH: archbench images run it, and a third node (agentpool=load)
    // takes `k8s load --in-cluster` workers.
    let mut opts = archbench_standin::Options::default();
    if let Some(bin) = std::env::var_os("ARCHBENCH_BINARY") {
        opts.archbench_binary = Some(bin.into());
        opts.nodes.push(archbench_standin::NodeSpec::new(
            "aks-load-0",
            "amd64",
            "load",
            "Standard_D8s_v5",
        ));
    }
    let cluster = match archbench_standin::Cluster::start(opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("archbench-standin: cannot start the cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("stand-in cluster at {}", cluster.url());
    println!(
        "export KUBECONFIG={} KUBECACHEDIR=$(mktemp -d)",
        cluster.kubeconfig().display()
    );
    println!("Ctrl-C (or SIGTERM) stops it and every pod process.");
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("archbench-standin: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stopped = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    });
    if let Err(e) = stopped {
        eprintln!("archbench-standin: waiting for Ctrl-C: {e}");
    }
    drop(cluster);
    ExitCode::SUCCESS
}
