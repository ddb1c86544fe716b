//! Runs the stand-in cluster until Ctrl-C, printing its kubeconfig path (for poking it with
//! kubectl by hand).

use std::process::ExitCode;

fn main() -> ExitCode {
    let cluster = match archbench_standin::Cluster::start(Default::default()) {
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
