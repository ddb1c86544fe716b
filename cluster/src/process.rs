//! Processes the harness starts and stops: each with its output in a log file and tied to its
//! parent (PR_SET_PDEATHSIG), so a supervisor killed outright takes every component with it;
//! and waiting for a process that is not our child (`down`, `--owner`) through a pidfd.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, watch};

use crate::components::Component;
use crate::error::{ClusterError, Result};

/// A started process: its pid and, once it has ended, how.
pub struct Handle {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    exit: watch::Receiver<Option<String>>,
}

/// Starts a component with stdout and stderr appended to `log`; its end is also sent on
/// `ended` (name, status).
pub fn spawn(
    c: &Component,
    log: &Path,
    ended: mpsc::UnboundedSender<(String, String)>,
) -> Result<Handle> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)
            .map_err(ClusterError::io(format!("create {}", dir.display())))?;
    }
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(ClusterError::io(format!("open {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(ClusterError::io(format!("open {}", log.display())))?;
    let mut cmd = tokio::process::Command::new(&c.program);
    cmd.args(&c.args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(ClusterError::io(format!("start {}", c.program.display())))?;
    let pid = child.id().unwrap_or(0);
    let (tx, rx) = watch::channel(None);
    let name = c.name.clone();
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => format!("lost: {e}"),
        };
        let _ = ended.send((name, status.clone()));
        let _ = tx.send(Some(status));
    });
    Ok(Handle {
        name: c.name.clone(),
        pid,
        log: log.to_path_buf(),
        exit: rx,
    })
}

impl Handle {
    /// How it ended, if it has.
    pub fn exited(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// A receiver that sees the exit status once it has ended.
    pub fn exit_watch(&self) -> watch::Receiver<Option<String>> {
        self.exit.clone()
    }

    /// SIGTERM, then SIGKILL once `grace` has passed; returns when it is gone.
    pub async fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        signal(self.pid, libc::SIGTERM);
        let mut exit = self.exit.clone();
        if tokio::time::timeout(grace, exit.wait_for(Option::is_some))
            .await
            .is_err()
        {
            signal(self.pid, libc::SIGKILL);
            let _ =
                tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some)).await;
        }
    }
}

pub fn signal(pid: u32, sig: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

/// Whether a process of that pid exists now.
pub fn alive(pid: u32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Every descendant of `pid` now (children, theirs, …), from each process's parent in
/// `/proc/PID/stat`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // "pid (comm) state ppid …": comm may hold spaces and parentheses.
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (child, _) in parents.iter().filter(|(_, pp)| *pp == parent) {
            if !out.contains(child) {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out
}

/// The processes whose network namespace is the one at `netns` (a `/run/netns` file or a
/// `/proc/PID/ns/net` link): same device and inode.
pub fn in_netns(netns: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(netns) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.ino() == target.ino() && m.dev() == target.dev())
        })
        .collect()
}

/// A handle that becomes readable when a process (any, not only a child) ends.
pub struct ProcessEnd {
    fd: AsyncFd<OwnedFd>,
}

impl ProcessEnd {
    /// None when the process is already gone.
    pub fn watch(pid: u32) -> Result<Option<ProcessEnd>> {
        let pid = i32::try_from(pid).map_err(|_| ClusterError::Invalid(format!("pid {pid}")))?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ESRCH) {
                return Ok(None);
            }
            return Err(ClusterError::Io {
                what: format!("watch process {pid}"),
                source: e,
            });
        }
        let Ok(fd) = i32::try_from(fd) else {
            return Err(ClusterError::Invalid(format!("pidfd {fd}")));
        };
        // SAFETY: fd is a fresh descriptor we own.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the AsyncFd owns the descriptor for its whole life.
        let fd = unsafe { AsyncFd::register(owned) }
            .map_err(|e| ClusterError::Invalid(format!("watch process {pid}: {e}")))?;
        Ok(Some(ProcessEnd { fd }))
    }

    pub async fn ended(&self) {
        // A pidfd polls readable once, when the process exits.
        let _ = self.fd.readable().await;
    }
}

/// Waits (bounded) for a process that is not our child to end.
pub async fn wait_gone(pid: u32, deadline: Duration) -> bool {
    match ProcessEnd::watch(pid) {
        Ok(None) => true,
        Ok(Some(end)) => tokio::time::timeout(deadline, end.ended()).await.is_ok(),
        Err(_) => !alive(pid),
    }
}
