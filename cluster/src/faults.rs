//! Fault switches a test turns on and off: files under `DIR/faults/`, read by the part of the
//! cluster they break (so any process — a test, a person — can flip them).

use crate::error::{ClusterError, Result};
use crate::layout::ClusterDir;

/// What can be broken on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The load-balancer controller assigns no addresses (a cloud out of public IPs).
    WithholdLoadBalancers,
    /// A node's agent stops renewing its Lease and reporting status, as a node that lost its
    /// network or its kubelet would: the node-lifecycle controller marks it NotReady. Its pods
    /// keep running.
    StopHeartbeats(String),
}

/// The names the command line takes.
pub const NAMES: &str = "withhold-load-balancers, stop-heartbeats:NODE";

impl Fault {
    pub fn parse(name: &str) -> Result<Fault> {
        match name.split_once(':') {
            None if name == "withhold-load-balancers" => Ok(Fault::WithholdLoadBalancers),
            Some(("stop-heartbeats", node)) if !node.is_empty() && !node.contains('/') => {
                Ok(Fault::StopHeartbeats(node.to_string()))
            }
            _ => Err(ClusterError::Invalid(format!(
                "no fault named {name:?}; there are: {NAMES}"
            ))),
        }
    }

    fn file(&self) -> String {
        match self {
            Fault::WithholdLoadBalancers => "withhold-load-balancers".into(),
            Fault::StopHeartbeats(node) => format!("stop-heartbeats-{node}"),
        }
    }
}

pub fn is_on(dir: &ClusterDir, fault: &Fault) -> bool {
    dir.root.join("faults").join(fault.file()).exists()
}

pub fn set(dir: &ClusterDir, fault: &Fault, on: bool) -> Result<()> {
    let path = dir.root.join("faults").join(fault.file());
    if on {
        crate::pki::write_file(&path, "on\n", false)
    } else {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ClusterError::Io {
                what: format!("remove {}", path.display()),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_by_name() {
        assert_eq!(
            Fault::parse("withhold-load-balancers").unwrap(),
            Fault::WithholdLoadBalancers
        );
        assert_eq!(
            Fault::parse("stop-heartbeats:aks-arm-0").unwrap(),
            Fault::StopHeartbeats("aks-arm-0".into())
        );
        for bad in ["", "stop-heartbeats:", "stop-heartbeats:../x", "melt"] {
            assert!(Fault::parse(bad).is_err(), "{bad}");
        }
    }
}
