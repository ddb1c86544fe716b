//! archbench's test cluster: Kubernetes' own components (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kube-proxy, metrics-server — built from the Go
//! module proxy by `tools/kube/build`) in a network namespace of their own with no default
//! route, and a node agent of ours that registers each Node and runs the pods bound to it as
//! real local processes (see `node`).
//!
//! People use it through `tools/cluster up|exec|down DIR`; tests through [`TestCluster`],
//! which starts one per test process and stops it when that process ends.

pub mod aggregation;
pub mod components;
pub mod error;
pub mod faults;
pub mod laptop;
pub mod layout;
pub mod lb;
pub mod lifecycle;
pub mod netns;
pub mod node;
pub mod pki;
pub mod probe;
pub mod process;
pub mod readiness;
pub mod skips;
pub mod supervisor;
pub mod testing;
pub mod topology;

pub use error::ClusterError;
pub use testing::{TestCluster, TestOptions};
