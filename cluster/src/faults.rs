//! Fault switches a test turns on and off: files under `DIR/faults/`, read by the part of the
//! cluster they break (so any process — a test, a person — can flip them).

use crate::error::{ClusterError, Result};
use crate::layout::ClusterDir;

/// The load-balancer controller assigns no addresses while it is on.
pub const WITHHOLD_LOAD_BALANCERS: &str = "withhold-load-balancers";

/// Every switch, for the command line.
pub const ALL: [&str; 1] = [WITHHOLD_LOAD_BALANCERS];

pub fn is_on(dir: &ClusterDir, name: &str) -> bool {
    dir.root.join("faults").join(name).exists()
}

pub fn set(dir: &ClusterDir, name: &str, on: bool) -> Result<()> {
    if !ALL.contains(&name) {
        return Err(ClusterError::Invalid(format!(
            "no fault named {name}; there are: {}",
            ALL.join(", ")
        )));
    }
    let path = dir.root.join("faults").join(name);
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
