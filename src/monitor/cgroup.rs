//! A cgroup's usage from its own files: v2 (`cpu.stat`, `memory.current`) or v1
//! (`cpuacct.stat`, `memory.usage_in_bytes`, looked up beside it or in the memory hierarchy).
//! Its processes are those of `cgroup.procs` in it and every group below it; their context
//! switches are read from /proc, as for a process target (a cost that grows with the
//! processes' threads: a handful of files for a server, more for a whole machine's group).

use std::path::{Path, PathBuf};

use super::proc::SwitchCounts;
use super::{MonitorError, ResourceSample, ResourceSampler};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Version {
    V2,
    V1 { memory: Option<PathBuf> },
}

pub struct CgroupSampler {
    dir: PathBuf,
    version: Version,
    ticks_per_s: f64,
    switches: SwitchCounts,
}

fn read(path: &Path) -> Result<String, MonitorError> {
    std::fs::read_to_string(path).map_err(|source| MonitorError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// `key value` lines (cpu.stat, cpuacct.stat).
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

impl CgroupSampler {
    pub fn new(dir: &Path) -> Result<CgroupSampler, MonitorError> {
        let version = if dir.join("cpu.stat").exists() && dir.join("cgroup.controllers").exists() {
            Version::V2
        } else if dir.join("cpuacct.stat").exists() {
            // v1 keeps memory in its own hierarchy: beside us, or the same path under memory/.
            let beside = dir.join("memory.usage_in_bytes");
            let sibling = dir.to_str().and_then(|d| {
                ["/cpu,cpuacct/", "/cpuacct,cpu/", "/cpuacct/"]
                    .iter()
                    .find(|c| d.contains(*c))
                    .map(|c| PathBuf::from(d.replacen(c, "/memory/", 1)))
                    .map(|p| p.join("memory.usage_in_bytes"))
            });
            let memory = [Some(beside), sibling]
                .into_iter()
                .flatten()
                .find(|p| p.exists());
            Version::V1 { memory }
        } else {
            return Err(MonitorError::NotACgroup {
                path: dir.display().to_string(),
            });
        };
        // SAFETY: sysconf only reads a configuration value.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Ok(CgroupSampler {
            dir: dir.to_path_buf(),
            version,
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            switches: SwitchCounts::default(),
        })
    }

    /// The processes in the cgroup and every group below it (a v2 pod's processes are in
    /// its containers' groups, not its own); None when its own cgroup.procs cannot be read.
    fn procs_in_tree(&self) -> Option<Vec<u32>> {
        let mut pids = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        let mut own = true;
        while let Some(dir) = dirs.pop() {
            match std::fs::read_to_string(dir.join("cgroup.procs")) {
                Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok())),
                Err(_) if own => return None,
                // A group below removed since it was listed: its processes left with it.
                Err(_) => {}
            }
            own = false;
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        pids.sort_unstable();
        pids.dedup();
        Some(pids)
    }
}

impl ResourceSampler for CgroupSampler {
    fn sample(&mut self) -> Result<ResourceSample, MonitorError> {
        let pids = self.procs_in_tree();
        for &pid in pids.iter().flatten() {
            self.switches.read_process(pid);
        }
        let mut s = ResourceSample {
            processes: pids
                .as_ref()
                .map(|p| u32::try_from(p.len()).unwrap_or(u32::MAX)),
            context_switches: pids.map(|_| self.switches.total()),
            ..ResourceSample::default()
        };
        match &self.version {
            Version::V2 => {
                let stat = read(&self.dir.join("cpu.stat"))?;
                s.cpu_user_s = field(&stat, "user_usec").unwrap_or(0) as f64 / 1e6;
                s.cpu_system_s = field(&stat, "system_usec").unwrap_or(0) as f64 / 1e6;
                s.memory_bytes = read(&self.dir.join("memory.current"))
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0);
                s.cpu_limit_cores = read(&self.dir.join("cpu.max"))
                    .ok()
                    .and_then(|t| cpu_max_cores(&t));
            }
            Version::V1 { memory } => {
                let stat = read(&self.dir.join("cpuacct.stat"))?;
                s.cpu_user_s = field(&stat, "user").unwrap_or(0) as f64 / self.ticks_per_s;
                s.cpu_system_s = field(&stat, "system").unwrap_or(0) as f64 / self.ticks_per_s;
                if let Some(m) = memory {
                    s.memory_bytes = read(m)?.trim().parse().unwrap_or(0);
                }
                let text = |f: &str| read(&self.dir.join(f)).ok();
                s.cpu_limit_cores = text("cpu.cfs_quota_us")
                    .zip(text("cpu.cfs_period_us"))
                    .and_then(|(q, p)| cpu_max_cores(&format!("{q} {p}")));
            }
        }
        Ok(s)
    }
}

/// A CPU limit as cores from "QUOTA PERIOD": cgroup v2's `cpu.max` (QUOTA "max" when
/// unlimited) or v1's CFS quota and period (QUOTA -1 when unlimited).
pub fn cpu_max_cores(text: &str) -> Option<f64> {
    let mut f = text.split_whitespace();
    let quota: f64 = f.next()?.parse().ok()?;
    let period: f64 = f.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_is_read_as_cores() {
        assert_eq!(cpu_max_cores("max 100000\n"), None);
        assert_eq!(cpu_max_cores("150000 100000\n"), Some(1.5));
        assert_eq!(cpu_max_cores("garbage"), None);
    }

    #[test]
    fn reads_a_v2_cgroup() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        std::fs::write(
            d.path().join("cpu.stat"),
            "usage_usec 3500000\nuser_usec 1250000\nsystem_usec 2250000\nnr_periods 0\n",
        )
        .unwrap();
        std::fs::write(d.path().join("memory.current"), "12582912\n").unwrap();
        // This process in the group itself, another in a container's group below it.
        let me = std::process::id();
        std::fs::write(d.path().join("cgroup.procs"), format!("{me}\n")).unwrap();
        let container = d.path().join("container-a");
        std::fs::create_dir(&container).unwrap();
        std::fs::write(container.join("cgroup.procs"), "4194303\n").unwrap();
        let s = CgroupSampler::new(d.path()).unwrap().sample().unwrap();
        assert_eq!(s.cpu_user_s, 1.25);
        assert_eq!(s.cpu_system_s, 2.25);
        assert_eq!(s.memory_bytes, 12_582_912);
        assert_eq!(s.processes, Some(2));
        // This process's threads were read (a test binary has switched by now); the one of
        // the highest pid possible exists nowhere and adds nothing.
        assert!(s.context_switches.is_some_and(|n| n > 0), "{s:?}");
        // Without a readable cgroup.procs there is no count at all, not a zero.
        std::fs::remove_dir_all(&container).unwrap();
        std::fs::remove_file(d.path().join("cgroup.procs")).unwrap();
        let s = CgroupSampler::new(d.path()).unwrap().sample().unwrap();
        assert_eq!((s.processes, s.context_switches), (None, None));
    }

    #[test]
    fn reads_a_v1_cgroup_with_memory_in_its_own_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let cpu = root.path().join("cpu,cpuacct/kubepods/pod1");
        let mem = root.path().join("memory/kubepods/pod1");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::write(cpu.join("cpuacct.stat"), "user 250\nsystem 50\n").unwrap();
        std::fs::write(mem.join("memory.usage_in_bytes"), "4096\n").unwrap();
        let mut sampler = CgroupSampler::new(&cpu).unwrap();
        let s = sampler.sample().unwrap();
        let ticks = sampler.ticks_per_s;
        assert!((s.cpu_user_s - 250.0 / ticks).abs() < 1e-9);
        assert!((s.cpu_system_s - 50.0 / ticks).abs() < 1e-9);
        assert_eq!(s.memory_bytes, 4096);
    }

    #[test]
    fn refuses_a_directory_that_is_not_a_cgroup() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            CgroupSampler::new(d.path()),
            Err(MonitorError::NotACgroup { .. })
        ));
    }
}
