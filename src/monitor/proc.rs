//! Processes from /proc: a root (by pid, or every process with a command name) and all its
//! descendants, found through /proc/PID/task/TID/children on every sample.

use std::collections::HashMap;
use std::path::Path;

use super::{MonitorError, ResourceSample, ResourceSampler};
use crate::os::schedstat_demand_ns;

pub struct ProcSampler {
    roots: Vec<u32>,
    /// Last seen (user, system) ticks of every process ever watched: a process that exits
    /// keeps its last count, so totals never run backwards.
    seen: HashMap<u32, (u64, u64)>,
    /// Demand (ns) each thread had when first seen, to tell what it wanted while watched.
    first: HashMap<u32, u64>,
    switches: SwitchCounts,
    ticks_per_s: f64,
    page_bytes: u64,
}

/// Fields of /proc/PID/stat that matter here.
struct Stat {
    user_ticks: u64,
    system_ticks: u64,
    rss_pages: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&format!("/proc/{pid}/stat"))
}

/// Demand of each thread of `pid`: (tid, nanoseconds run or waiting to run).
fn thread_demand(pid: u32, out: &mut Vec<(u32, u64)>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ns) = schedstat_demand_ns(&format!("/proc/{pid}/task/{tid}/schedstat")) {
            out.push((tid, ns));
        }
    }
}

fn parse_stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may contain spaces: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field N is f[N - 3].
    Some(Stat {
        user_ticks: f.get(11)?.parse().ok()?,
        system_ticks: f.get(12)?.parse().ok()?,
        rss_pages: f.get(21)?.parse().ok()?,
    })
}

/// Voluntary + involuntary context switches in a status file (/proc/PID/task/TID/status:
/// one thread's; the process's own file counts its main thread only).
fn context_switches(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let counts: Vec<u64> = text
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// Context switches of every thread seen, kept per thread: one that exits keeps its last
/// count, so the total never runs backwards (a thread born and gone between two readings is
/// missed).
#[derive(Default)]
pub(super) struct SwitchCounts {
    seen: HashMap<u32, u64>,
    /// Counts of threads whose id a newer thread took.
    reused: u64,
}

impl SwitchCounts {
    /// Reads every thread of `pid` now.
    pub(super) fn read_process(&mut self, pid: u32) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return;
        };
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let Some(n) = context_switches(&format!("/proc/{pid}/task/{tid}/status")) else {
                continue;
            };
            self.note(tid, n);
        }
    }

    /// One thread's count now.
    fn note(&mut self, tid: u32, n: u64) {
        if let Some(old) = self.seen.insert(tid, n).filter(|&old| old > n) {
            self.reused += old;
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.reused + self.seen.values().sum::<u64>()
    }
}

fn children(pid: u32, out: &mut Vec<u32>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
}

/// Processes whose command name (/proc/PID/comm) is `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .collect()
}

impl ProcSampler {
    pub fn for_pid(pid: u32) -> Result<ProcSampler, MonitorError> {
        if !Path::new(&format!("/proc/{pid}/stat")).exists() {
            return Err(MonitorError::NoSuchPid(pid));
        }
        Ok(ProcSampler::new(vec![pid]))
    }

    pub fn for_name(name: &str) -> Result<ProcSampler, MonitorError> {
        let pids = pids_named(name);
        if pids.is_empty() {
            return Err(MonitorError::NoSuchName(name.to_string()));
        }
        Ok(ProcSampler::new(pids))
    }

    fn new(roots: Vec<u32>) -> ProcSampler {
        // SAFETY: sysconf only reads configuration values.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        ProcSampler {
            roots,
            seen: HashMap::new(),
            first: HashMap::new(),
            switches: SwitchCounts::default(),
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            page_bytes: if page > 0 { page as u64 } else { 4096 },
        }
    }

    /// The roots and every descendant alive now.
    fn live_pids(&self) -> Vec<u32> {
        let mut all = self.roots.clone();
        let mut i = 0;
        while i < all.len() {
            let pid = all[i];
            children(pid, &mut all);
            i += 1;
        }
        all.sort_unstable();
        all.dedup();
        all
    }
}

impl ResourceSampler for ProcSampler {
    fn pids(&self) -> Vec<u32> {
        self.live_pids()
    }

    fn sample(&mut self) -> Result<ResourceSample, MonitorError> {
        let mut sample = ResourceSample::default();
        let mut rss_pages = 0;
        let mut threads = Vec::new();
        let mut processes = 0;
        for pid in self.live_pids() {
            let Some(stat) = read_stat(pid) else { continue };
            thread_demand(pid, &mut threads);
            self.seen.insert(pid, (stat.user_ticks, stat.system_ticks));
            rss_pages += stat.rss_pages;
            self.switches.read_process(pid);
            processes += 1;
        }
        sample.processes = Some(processes);
        sample.context_switches = Some(self.switches.total());
        let (user, system) = self
            .seen
            .values()
            .fold((0u64, 0u64), |(u, s), (pu, ps)| (u + pu, s + ps));
        sample.cpu_user_s = user as f64 / self.ticks_per_s;
        sample.cpu_system_s = system as f64 / self.ticks_per_s;
        sample.memory_bytes = rss_pages * self.page_bytes;
        let busiest = threads
            .iter()
            .map(|&(tid, ns)| ns - *self.first.entry(tid).or_insert(ns))
            .max();
        sample.busiest_thread_demand_s = busiest.map(|ns| ns as f64 / 1e9);
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_switches_count_every_thread_and_never_run_backwards() {
        let me = std::process::id();
        // A second thread that blocks, so this process has switches beyond its main thread's.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let waiter = std::thread::spawn(move || {
            for _ in 0..3 {
                let _ = rx.recv();
            }
        });
        for _ in 0..3 {
            tx.send(()).unwrap();
            std::thread::yield_now();
        }
        let mut counts = SwitchCounts::default();
        counts.read_process(me);
        let main_only = context_switches(&format!("/proc/{me}/status")).unwrap();
        let with_threads = counts.total();
        assert!(counts.seen.len() >= 2, "{:?}", counts.seen);
        assert!(
            with_threads >= main_only,
            "{with_threads} over threads, {main_only} for the main one"
        );
        waiter.join().unwrap();
        // The waiter is gone from /proc now; its count stays.
        let before = counts.total();
        counts.read_process(me);
        assert!(counts.total() >= before);
        // A thread id taken by a newer thread (a smaller count) keeps the old one's.
        let mut counts = SwitchCounts::default();
        counts.note(1, 100);
        counts.note(1, 120);
        assert_eq!(counts.total(), 120);
        counts.note(1, 5);
        assert_eq!(counts.total(), 125);
    }
}
