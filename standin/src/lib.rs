//! A stand-in Kubernetes API server for archbench's tests (no real API server can be installed
//! on these machines): real HTTP on 127.0.0.1, so the real `kube::Client` and the real `kubectl`
//! are exercised.
//!
//! ```no_run
//! let cluster = archbench_standin::Cluster::start(Default::default())?;
//! // KUBECONFIG=cluster.kubeconfig() kubectl apply --server-side -f …
//! println!("{}", cluster.url());
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! What it models and what it does not: see the crate's README.md.

mod admission;
mod alloc;
mod apply;
mod clock;
mod cluster;
mod controllers;
mod error;
mod exec;
mod faults;
mod ids;
mod kubelet;
mod logs;
mod metrics;
mod net;
mod ops;
mod options;
mod patch;
mod proxy;
mod reply;
mod resources;
mod route;
mod selector;
mod server;
mod state;
mod store;
mod table;
mod watch;

pub use cluster::{Cluster, TOKEN};
pub use faults::Faults;
pub use options::{CgroupView, NodeSpec, Options};
pub use state::RecordedRequest;
