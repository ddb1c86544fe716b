//! Per-pod cgroups: the pod's resource limits enforced as a kubelet's are (see `resources`),
//! and its usage for `k8s top` (through exec) and the resource metrics metrics-server scrapes.
//!
//! Each pod's processes join a cgroup of the pod's own, nested under the node agent's
//! cgroups (so limits that apply to the test still apply). What the pod sees at
//! /sys/fs/cgroup:
//! - on a cgroup v2 host, its real cgroup directory (exactly what a container sees);
//! - on a cgroup v1 host (this VM), a directory of v2-named files that the agent rewrites
//!   from the real v1 counters once a second and right before every exec: `cpu.stat`
//!   (`usage_usec` = cpuacct.usage / 1000, `user_usec`/`system_usec` from cpuacct.stat ticks,
//!   the throttling counters from the cpu controller's cpu.stat), `memory.current`
//!   (memory.usage_in_bytes), `memory.max` and `cpu.max` (the limits it enforces),
//!   `cpu.weight`, `memory.stat`.
//!
//! Everything it makes is under the agent's own cgroups, and removed by it; nothing else of
//! the machine's is changed.

use std::io;
use std::path::{Path, PathBuf};

use super::resources::{PodLimits, CFS_PERIOD_US};

/// Where this cluster's pod cgroups live.
#[derive(Debug, Clone)]
pub enum CgroupRoot {
    /// `cpu` may be `cpuacct` (a host that mounts them together).
    V1 {
        cpuacct: PathBuf,
        memory: PathBuf,
        cpu: PathBuf,
    },
    V2 {
        base: PathBuf,
    },
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
    /// CFS periods with the quota in force, those that ran out of it, and the time its
    /// processes waited for the next period.
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_usec: u64,
}

#[derive(Debug, Clone)]
pub struct PodCgroup {
    root: CgroupRoot,
    /// v1: (cpuacct dir, memory dir); v2: (dir, dir).
    dirs: (PathBuf, PathBuf),
    /// v1: the cpu controller's dir; v2: the dir.
    cpu: PathBuf,
    limits: PodLimits,
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
        let (cpuacct, memory, cpu) = (find("cpuacct")?, find("memory")?, find("cpu")?);
        let root = CgroupRoot::V1 {
            cpuacct,
            memory,
            cpu,
        };
        if root
            .dirs()
            .iter()
            .any(|d| std::fs::create_dir_all(d).is_err())
        {
            root.remove();
            return None;
        }
        Some(root)
    }

    /// Its directories, each once.
    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = match self {
            CgroupRoot::V1 {
                cpuacct,
                memory,
                cpu,
            } => vec![cpuacct.clone(), memory.clone(), cpu.clone()],
            CgroupRoot::V2 { base } => vec![base.clone()],
        };
        dirs.sort();
        dirs.dedup();
        dirs
    }

    pub fn is_v2(&self) -> bool {
        matches!(self, CgroupRoot::V2 { .. })
    }

    /// Makes pod `id`'s cgroup with `limits` in force; an error names the file that could not
    /// be written (the pod must not run unlimited while its spec says otherwise).
    pub fn pod(&self, id: &str, limits: PodLimits) -> io::Result<PodCgroup> {
        let pod = self.pod_at(id, limits);
        for d in pod.all_dirs() {
            std::fs::create_dir_all(&d)?;
        }
        pod.enforce().inspect_err(|_| pod.remove())?;
        Ok(pod)
    }

    fn pod_at(&self, id: &str, limits: PodLimits) -> PodCgroup {
        let (dirs, cpu) = match self {
            CgroupRoot::V1 {
                cpuacct,
                memory,
                cpu,
            } => ((cpuacct.join(id), memory.join(id)), cpu.join(id)),
            CgroupRoot::V2 { base } => ((base.join(id), base.join(id)), base.join(id)),
        };
        PodCgroup {
            root: self.clone(),
            dirs,
            cpu,
            limits,
        }
    }

    /// Readings of the node's cgroup: all its pods, the ended ones included (a cumulative
    /// CPU counter that never goes back).
    pub fn usage(&self) -> io::Result<Usage> {
        self.pod_at("", PodLimits::default()).usage()
    }

    /// Removes the cluster's cgroup directories (containers' first, then pods').
    pub fn remove(&self) {
        for d in self.dirs() {
            remove_tree(&d);
        }
    }
}

/// Removes a cgroup directory and the ones below it, deepest first (a cgroup directory goes
/// with rmdir, its files with it, once it has no processes).
fn remove_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Writes `text` to a cgroup file, the error naming it.
fn write(dir: &Path, file: &str, text: &str) -> io::Result<()> {
    let path = dir.join(file);
    std::fs::write(&path, text).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {text:?} to {}: {e}", path.display()),
        )
    })
}

/// A counter the reading cannot do without: its absence is an error, never a zero.
fn required_u64(p: &Path) -> io::Result<u64> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", p.display())))?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} holds no number", p.display()),
        )
    })
}

/// A `key value` field a reading cannot do without.
fn required_field(p: &Path, key: &str) -> io::Result<u64> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", p.display())))?;
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} has no {key}", p.display()),
            )
        })
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

/// The readings of a cgroup: v1 (cpuacct, memory, cpu controller directories) or v2 (one
/// directory three times). The CPU and memory counters are required; throttling is read
/// where the cpu controller keeps it.
fn read_usage(root: &CgroupRoot, acct: &Path, mem: &Path, cpu: &Path) -> io::Result<Usage> {
    match root {
        CgroupRoot::V2 { .. } => {
            let stat = acct.join("cpu.stat");
            let memory = required_u64(&mem.join("memory.current"))?;
            let inactive = stat_field(&mem.join("memory.stat"), "inactive_file");
            Ok(Usage {
                usage_usec: required_field(&stat, "usage_usec")?,
                user_usec: stat_field(&stat, "user_usec"),
                system_usec: stat_field(&stat, "system_usec"),
                memory_bytes: memory,
                working_set_bytes: memory.saturating_sub(inactive),
                nr_periods: stat_field(&stat, "nr_periods"),
                nr_throttled: stat_field(&stat, "nr_throttled"),
                throttled_usec: stat_field(&stat, "throttled_usec"),
            })
        }
        CgroupRoot::V1 { .. } => {
            let tick_usec = 1_000_000 / user_hz();
            let memory = required_u64(&mem.join("memory.usage_in_bytes"))?;
            let inactive = stat_field(&mem.join("memory.stat"), "total_inactive_file");
            let throttling = cpu.join("cpu.stat");
            Ok(Usage {
                usage_usec: required_u64(&acct.join("cpuacct.usage"))? / 1000,
                user_usec: stat_field(&acct.join("cpuacct.stat"), "user") * tick_usec,
                system_usec: stat_field(&acct.join("cpuacct.stat"), "system") * tick_usec,
                memory_bytes: memory,
                working_set_bytes: memory.saturating_sub(inactive),
                nr_periods: stat_field(&throttling, "nr_periods"),
                nr_throttled: stat_field(&throttling, "nr_throttled"),
                throttled_usec: stat_field(&throttling, "throttled_time") / 1000,
            })
        }
    }
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
    /// Its directories, each once.
    fn all_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.dirs.0.clone(), self.dirs.1.clone(), self.cpu.clone()];
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Puts its limits in force: the CFS quota and shares (v2: cpu.max, cpu.weight), the
    /// memory limit. What the spec leaves unlimited is left as the kernel made it.
    fn enforce(&self) -> io::Result<()> {
        let l = &self.limits;
        match &self.root {
            CgroupRoot::V1 { .. } => {
                if let Some(q) = l.cpu_quota_us {
                    write(&self.cpu, "cpu.cfs_period_us", &CFS_PERIOD_US.to_string())?;
                    write(&self.cpu, "cpu.cfs_quota_us", &q.to_string())?;
                }
                write(&self.cpu, "cpu.shares", &l.cpu_shares.to_string())?;
                if let Some(b) = l.memory_bytes {
                    write(&self.dirs.1, "memory.limit_in_bytes", &b.to_string())?;
                }
            }
            CgroupRoot::V2 { .. } => {
                if l.cpu_quota_us.is_some() {
                    write(&self.cpu, "cpu.max", &l.cpu_max())?;
                }
                if l.cpu_shares > 2 {
                    write(&self.cpu, "cpu.weight", &l.cpu_weight().to_string())?;
                }
                if l.memory_bytes.is_some() {
                    write(&self.dirs.1, "memory.max", &l.memory_max())?;
                    // One OOM kill ends the whole container, as the kubelet sets it.
                    write(&self.dirs.1, "memory.oom.group", "1")?;
                }
            }
        }
        Ok(())
    }

    /// How many of its processes the kernel's OOM killer has killed. On v1 a kill is
    /// counted in the killed process's own cgroup only (a container's), so the pod's and
    /// its containers' counts are added; v2's memory.events counts the subtree.
    pub fn oom_kills(&self) -> u64 {
        match &self.root {
            CgroupRoot::V1 { .. } => std::iter::once(self.dirs.1.clone())
                .chain(subdirs(&self.dirs.1))
                .map(|d| stat_field(&d.join("memory.oom_control"), "oom_kill"))
                .sum(),
            CgroupRoot::V2 { .. } => stat_field(&self.dirs.1.join("memory.events"), "oom_kill"),
        }
    }

    /// Container `name`'s cgroup in this pod (not made here: see `ContainerCgroup::create`).
    pub fn container(&self, name: &str) -> ContainerCgroup {
        ContainerCgroup {
            root: self.root.clone(),
            acct: self.dirs.0.join(name),
            memory: self.dirs.1.join(name),
            cpu: self.cpu.join(name),
        }
    }

    /// Its memory limit, in bytes, when it has one.
    pub fn memory_limit(&self) -> Option<u64> {
        self.limits.memory_bytes
    }

    /// The real v2 directory, on a v2 host (bind-mounted as the pod's /sys/fs/cgroup).
    pub fn v2_dir(&self) -> Option<&Path> {
        self.root.is_v2().then_some(self.dirs.0.as_path())
    }

    /// Every process in the pod's cgroup and its containers'.
    pub fn pids(&self) -> Vec<i32> {
        std::iter::once(self.dirs.0.clone())
            .chain(subdirs(&self.dirs.0))
            .flat_map(|d| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    }

    /// Its readings (every container's, added up by the kernel); an error when a counter
    /// cannot be read (the cgroup is gone, or was never made whole).
    pub fn usage(&self) -> io::Result<Usage> {
        read_usage(&self.root, &self.dirs.0, &self.dirs.1, &self.cpu)
    }

    /// Rewrites the files the pod sees (v1 hosts), atomically per file.
    pub fn write_view(&self, view: &Path) -> io::Result<Usage> {
        let u = self.usage()?;
        let page_cache = u.memory_bytes - u.working_set_bytes;
        let files: Vec<(PathBuf, String)> = vec![
            (
                view.join("cpu.stat"),
                format!(
                    "usage_usec {}\nuser_usec {}\nsystem_usec {}\nnr_periods {}\nnr_throttled {}\nthrottled_usec {}\nnr_bursts 0\nburst_usec 0\n",
                    u.usage_usec, u.user_usec, u.system_usec, u.nr_periods, u.nr_throttled, u.throttled_usec
                ),
            ),
            (view.join("memory.current"), format!("{}\n", u.memory_bytes)),
            (view.join("memory.max"), format!("{}\n", self.limits.memory_max())),
            (view.join("cpu.max"), format!("{}\n", self.limits.cpu_max())),
            (view.join("cpu.weight"), format!("{}\n", self.limits.cpu_weight())),
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

    /// Removes the pod's cgroup directories and its containers' (possible once its
    /// processes are gone).
    pub fn remove(&self) {
        for d in self.all_dirs() {
            remove_tree(&d);
        }
    }
}

/// The directories right below `dir` (a pod's containers).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// One container's cgroup inside its pod's, as the kubelet makes one: its processes (and
/// what is exec'd in it) join it, so its CPU and memory are its own; the pod's limits, one
/// level up, hold it with its siblings.
#[derive(Debug, Clone)]
pub struct ContainerCgroup {
    root: CgroupRoot,
    acct: PathBuf,
    memory: PathBuf,
    cpu: PathBuf,
}

impl ContainerCgroup {
    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.acct.clone(), self.memory.clone(), self.cpu.clone()];
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Makes it (a v2 pod first hands its controllers down).
    pub fn create(&self) -> io::Result<()> {
        if let (CgroupRoot::V2 { .. }, Some(pod)) = (&self.root, self.acct.parent()) {
            write(pod, "cgroup.subtree_control", "+cpu +memory")?;
        }
        for d in self.dirs() {
            std::fs::create_dir_all(&d)
                .map_err(|e| io::Error::new(e.kind(), format!("making {}: {e}", d.display())))?;
        }
        Ok(())
    }

    /// The `cgroup.procs` files a process joins.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Its CPU and memory (throttling is the pod's: the quota is set there).
    pub fn usage(&self) -> io::Result<Usage> {
        read_usage(&self.root, &self.acct, &self.memory, &self.cpu)
    }
}
