//! `archbench k8s …`: the Kubernetes workflow, in an executable of its own so the load
//! generator (`archbench`) does not carry the Kubernetes client. `archbench k8s` runs this.

fn main() {
    // Its arguments as `archbench k8s` received them, whether it was called through it or
    // directly.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "k8s") {
        args.remove(1);
    }
    std::process::exit(archbench::cli::k8s_main(args));
}
