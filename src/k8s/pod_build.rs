//! What a pod runs on and runs, as `inspect` reads it: the type both the reading and the
//! cluster handle's cache of readings (by pod UID) hold, below both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::stats::ServerFingerprint;

/// What one variant's pod runs on and runs.
#[derive(Debug, Clone)]
pub struct ArchFingerprint {
    /// The variant's name.
    pub variant: String,
    pub pod: String,
    pub node: String,
    /// The node's `status.nodeInfo.architecture` (amd64, arm64).
    pub node_arch: String,
    pub instance_type: String,
    pub kernel: String,
    /// From the pod's /proc/cpuinfo.
    pub cpu_model: String,
    /// aarch64 only: whether the CPU has LSE atomics.
    pub lse_atomics: Option<bool>,
    pub nginx: ServerFingerprint,
}

/// Fingerprints already read, by pod UID (a pod's build and CPU do not change while it lives;
/// a new pod has a new UID). Shared by a cluster's clones.
pub type Inspected = Arc<Mutex<HashMap<String, ArchFingerprint>>>;
