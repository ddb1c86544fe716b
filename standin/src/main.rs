//! Runs the stand-in cluster until Ctrl-C, printing its kubeconfig path (for poking it with
//! kubectl by hand).

fn main() {}
