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
    println!("Ctrl-C stops it (and every pod process).");
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
    if let Err(e) = rt.block_on(tokio::signal::ctrl_c()) {
        eprintln!("archbench-standin: waiting for Ctrl-C: {e}");
    }
    drop(cluster);
    ExitCode::SUCCESS
}
