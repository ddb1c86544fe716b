//! Per-pod cgroups, for `k8s top` (through exec) and the resource metrics metrics-server
//! scrapes.
//!
//! Each pod's processes join a cgroup of the pod's own, nested under the node agent's
//! cgroups (so limits that apply to the test still apply). What the pod sees at
//! /sys/fs/cgroup:
//! - on a cgroup v2 host, its real cgroup directory (exactly what a container sees);
//! - on a cgroup v1 host (this VM), a directory of v2-named files that the agent rewrites
//!   from the real v1 counters once a second and right before every exec: `cpu.stat`
//!   (`usage_usec` = cpuacct.usage / 1000, `user_usec`/`system_usec` from cpuacct.stat ticks),
//!   `memory.current` (memory.usage_in_bytes), `memory.max`, `cpu.max`, `memory.stat`.

use std::io;
use std::path::{Path, PathBuf};

/// Where this cluster's pod cgroups live.
#[derive(Debug, Clone)]
pub enum CgroupRoot {
    V1 { cpuacct: PathBuf, memory: PathBuf },
    V2 { base: PathBuf },
}

/// Readings of one pod's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
    pub memory_bytes: u64,
    /// memory minus inactive file pages (what `kubectl top` calls memory).
    pub working_set_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct PodCgroup {
    root: CgroupRoot,
    /// v1: (cpuacct dir, memory dir); v2: (dir, dir).
    dirs: (PathBuf, PathBuf),
}

/// Mount points of cgroup hierarchies: (fstype, super options, mount point).
fn mounts() -> Vec<(String, String, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mount_point = pre.split_whitespace().nth(4)?;
            let mut post = post.split_whitespace();
            let fstype = post.next()?.to_string();
            let _source = post.next()?;
            let opts = post.next().unwrap_or("").to_string();
            Some((fstype, opts, PathBuf::from(mount_point)))
        })
        .collect()
}

/// This process's cgroup path in the v1 hierarchy holding `controller` (or v2's, with "").
fn own_path(controller: &str) -> String {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        if (controller.is_empty() && ctrls.is_empty()) || ctrls.split(',').any(|c| c == controller)
        {
            return path.to_string();
        }
    }
    "/".into()
}

fn join(mount: &Path, cg: &str) -> PathBuf {
    mount.join(cg.trim_start_matches('/'))
}

impl CgroupRoot {
    /// Creates `<own cgroup>/<name>` in the hierarchies the agent reads; None when this
    /// process may not (then pods run without a cgroup of their own, and report zero usage).
    pub fn create(name: &str) -> Option<CgroupRoot> {
        let ms = mounts();
        if let Some((_, _, mp)) = ms
            .iter()
            .find(|(t, _, mp)| t == "cgroup2" && mp == Path::new("/sys/fs/cgroup"))
        {
            let own = join(mp, &own_path(""));
            // controllers must be enabled for children (fails in a cgroup with processes
            // unless it is the root; then memory.current stays absent and reads as 0)
            let _ = std::fs::write(own.join("cgroup.subtree_control"), "+cpu +memory");
            let base = own.join(name);
            std::fs::create_dir_all(&base).ok()?;
            let _ = std::fs::write(base.join("cgroup.subtree_control"), "+cpu +memory");
            return Some(CgroupRoot::V2 { base });
        }
        let find = |c: &str| {
            ms.iter()
                .find(|(t, o, _)| t == "cgroup" && o.split(',').any(|x| x == c))
                .map(|(_, _, mp)| join(mp, &own_path(c)).join(name))
        };
        let (cpuacct, memory) = (find("cpuacct")?, find("memory")?);
        std::fs::create_dir_all(&cpuacct).ok()?;
        if std::fs::create_dir_all(&memory).is_err() {
            let _ = std::fs::remove_dir(&cpuacct);
            return None;
        }
        Some(CgroupRoot::V1 { cpuacct, memory })
    }

    pub fn is_v2(&self) -> bool {
        matches!(self, CgroupRoot::V2 { .. })
    }

    pub fn pod(&self, id: &str) -> io::Result<PodCgroup> {
        let dirs = match self {
            CgroupRoot::V1 { cpuacct, memory } => (cpuacct.join(id), memory.join(id)),
            CgroupRoot::V2 { base } => (base.join(id), base.join(id)),
        };
        std::fs::create_dir_all(&dirs.0)?;
        std::fs::create_dir_all(&dirs.1)?;
        Ok(PodCgroup {
            root: self.clone(),
            dirs,
        })
    }

    /// Readings of the node's cgroup: all its pods, the ended ones included (a cumulative
    /// CPU counter that never goes back).
    pub fn usage(&self) -> Usage {
        let dirs = match self {
            CgroupRoot::V1 { cpuacct, memory } => (cpuacct.clone(), memory.clone()),
            CgroupRoot::V2 { base } => (base.clone(), base.clone()),
        };
        PodCgroup {
            root: self.clone(),
            dirs,
        }
        .usage()
    }

    /// Removes the cluster's cgroup directories (pods' first).
    pub fn remove(&self) {
        let dirs: Vec<&PathBuf> = match self {
            CgroupRoot::V1 { cpuacct, memory } => vec![cpuacct, memory],
            CgroupRoot::V2 { base } => vec![base],
        };
        for d in dirs {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    if e.path().is_dir() {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn read_u64(p: &Path) -> u64 {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn stat_field(p: &Path, key: &str) -> u64 {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// Clock ticks per second for cpuacct.stat (USER_HZ).
fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

impl PodCgroup {
    /// The `cgroup.procs` files a process joins.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        if self.dirs.0 == self.dirs.1 {
            vec![self.dirs.0.join("cgroup.procs")]
        } else {
            vec![
                self.dirs.0.join("cgroup.procs"),
                self.dirs.1.join("cgroup.procs"),
            ]
        }
    }

    /// The real v2 directory, on a v2 host (bind-mounted as the pod's /sys/fs/cgroup).
    pub fn v2_dir(&self) -> Option<&Path> {
        self.root.is_v2().then_some(self.dirs.0.as_path())
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dirs.0.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn usage(&self) -> Usage {
        match &self.root {
            CgroupRoot::V2 { .. } => {
                let d = &self.dirs.0;
                let cpu = d.join("cpu.stat");
                let mem = read_u64(&d.join("memory.current"));
                let inactive = stat_field(&d.join("memory.stat"), "inactive_file");
                Usage {
                    usage_usec: stat_field(&cpu, "usage_usec"),
                    user_usec: stat_field(&cpu, "user_usec"),
                    system_usec: stat_field(&cpu, "system_usec"),
                    memory_bytes: mem,
                    working_set_bytes: mem.saturating_sub(inactive),
                }
            }
            CgroupRoot::V1 { .. } => {
                let (cpu, mem) = (&self.dirs.0, &self.dirs.1);
                let tick_usec = 1_000_000 / user_hz();
                let memory = read_u64(&mem.join("memory.usage_in_bytes"));
                let inactive = stat_field(&mem.join("memory.stat"), "total_inactive_file");
                Usage {
                    usage_usec: read_u64(&cpu.join("cpuacct.usage")) / 1000,
                    user_usec: stat_field(&cpu.join("cpuacct.stat"), "user") * tick_usec,
                    system_usec: stat_field(&cpu.join("cpuacct.stat"), "system") * tick_usec,
                    memory_bytes: memory,
                    working_set_bytes: memory.saturating_sub(inactive),
                }
            }
        }
    }

    /// Rewrites the files the pod sees (v1 hosts), atomically per file.
    pub fn write_view(&self, view: &Path) -> io::Result<Usage> {
        let u = self.usage();
        let page_cache = u.memory_bytes - u.working_set_bytes;
        let files: Vec<(PathBuf, String)> = vec![
            (
                view.join("cpu.stat"),
                format!(
                    "usage_usec {}\nuser_usec {}\nsystem_usec {}\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n",
                    u.usage_usec, u.user_usec, u.system_usec
                ),
            ),
            (view.join("memory.current"), format!("{}\n", u.memory_bytes)),
            (view.join("memory.max"), "max\n".into()),
            (view.join("cpu.max"), "max 100000\n".into()),
            (
                view.join("memory.stat"),
                format!(
                    "anon {}\nfile {page_cache}\ninactive_file {page_cache}\n",
                    u.working_set_bytes
                ),
            ),
        ];
        for (path, text) in files {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = path.with_file_name(format!(".{name}.tmp"));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &path)?;
        }
        Ok(u)
    }

    /// Removes the pod's cgroup directories (possible once its processes are gone).
    pub fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dirs.0);
        if self.dirs.1 != self.dirs.0 {
            let _ = std::fs::remove_dir(&self.dirs.1);
        }
    }
}
