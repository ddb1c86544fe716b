//! Starting a container's process in the pod's network namespace and its own mount, UTS and
//! PID namespaces (root only).
//!
//! `Command::pre_exec` runs in the forked child: it joins the pod's cgroups and network
//! namespace, unshares the others and forks once more, because a new PID namespace only applies to children. The
//! middle process waits for the grandchild (PID 1 of the pod) and exits with its status
//! (128 + signal when killed), so the kubelet's `Child` reports the container's exit. The
//! grandchild mounts the pod's view of the filesystem (a fresh /proc, binds, tmpfs), sets the
//! hostname and execs the program. Both die with their parent (PR_SET_PDEATHSIG), and the
//! kernel kills everything in the PID namespace when its PID 1 dies, so no process outlives
//! its container, the cluster, or the test process.
//!
//! Everything the child uses is prepared before the fork (the child of a multithreaded
//! process may only make async-signal-safe calls: raw syscalls, no allocation).

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A mount in the container's mount namespace, done in order.
#[derive(Debug, Clone)]
pub enum Mount {
    /// Bind `src` over `dst` (file or directory), read-only when asked.
    Bind {
        src: PathBuf,
        dst: PathBuf,
        read_only: bool,
    },
    /// An empty tmpfs over `dst`.
    Tmpfs { dst: PathBuf },
    /// A symlink created after the mounts before it (inside a tmpfs).
    Symlink { target: PathBuf, link: PathBuf },
    /// A directory (and its parents) made inside a tmpfs mounted before it: mount points that
    /// do not exist on the host, such as the service-account token's under /run.
    Dir { dst: PathBuf },
}

/// How to isolate a container's process.
#[derive(Debug, Clone, Default)]
pub struct Isolation {
    /// New mount/UTS/PID namespaces (needs root); false runs the process as a plain child.
    pub namespaces: bool,
    pub hostname: String,
    pub mounts: Vec<Mount>,
    /// `cgroup.procs` files to join before anything else.
    pub cgroup_procs: Vec<PathBuf>,
    /// The pod's network namespace (its pause process's), joined before the others are made.
    pub netns: Option<PathBuf>,
    pub workdir: PathBuf,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NUL in path {}", p.display()),
        )
    })
}

enum Op {
    Bind(CString, CString, bool),
    Tmpfs(CString),
    Symlink(CString, CString),
    /// Each prefix of the path, shortest first.
    Dir(Vec<CString>),
}

/// Sets up `cmd` to start inside the isolation. The returned guard holds the opened cgroup
/// and namespace files until the process is spawned.
pub fn prepare(
    cmd: &mut tokio::process::Command,
    iso: &Isolation,
) -> io::Result<Vec<std::fs::File>> {
    let cgroup_files: Vec<std::fs::File> = iso
        .cgroup_procs
        .iter()
        .filter_map(|p| std::fs::OpenOptions::new().write(true).open(p).ok())
        .collect();
    let cg_fds: Vec<i32> = cgroup_files.iter().map(|f| f.as_raw_fd()).collect();
    let mut held = cgroup_files;
    let net_fd = match &iso.netns {
        Some(p) => {
            let f = std::fs::File::open(p)?;
            let fd = f.as_raw_fd();
            held.push(f);
            Some(fd)
        }
        None => None,
    };
    cmd.process_group(0);
    if !iso.namespaces {
        let workdir = cstr(&iso.workdir)?;
        // SAFETY: only async-signal-safe calls (prctl, write, setns, chdir) on data prepared
        // above.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                for fd in &cg_fds {
                    libc::write(*fd, b"0".as_ptr().cast(), 1);
                }
                if let Some(fd) = net_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                libc::chdir(workdir.as_ptr());
                Ok(())
            });
        }
        return Ok(held);
    }
    let mut ops = Vec::new();
    for m in &iso.mounts {
        ops.push(match m {
            Mount::Bind {
                src,
                dst,
                read_only,
            } => Op::Bind(cstr(src)?, cstr(dst)?, *read_only),
            Mount::Tmpfs { dst } => Op::Tmpfs(cstr(dst)?),
            Mount::Symlink { target, link } => Op::Symlink(cstr(target)?, cstr(link)?),
            Mount::Dir { dst } => Op::Dir(
                dst.ancestors()
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .filter(|p| p.parent().is_some())
                    .map(cstr)
                    .collect::<io::Result<Vec<_>>>()?,
            ),
        });
    }
    let hostname = iso.hostname.clone().into_bytes();
    let workdir = cstr(&iso.workdir)?;
    let root = CString::new("/").expect("no NUL");
    let proc_src = CString::new("proc").expect("no NUL");
    let proc_dst = CString::new("/proc").expect("no NUL");
    let tmpfs = CString::new("tmpfs").expect("no NUL");
    let tmpfs_opts = CString::new("mode=755").expect("no NUL");
    // SAFETY: the closure makes raw syscalls only (prctl, write, setns, unshare, fork,
    // waitpid, close_range, _exit, mount, symlink, mkdir, sethostname, chdir) on data
    // prepared above.
    unsafe {
        cmd.pre_exec(move || {
            let fail = || Err(io::Error::last_os_error());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            for fd in &cg_fds {
                libc::write(*fd, b"0".as_ptr().cast(), 1);
            }
            if let Some(fd) = net_fd {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return fail();
                }
            }
            if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWPID) != 0 {
                return fail();
            }
            let pid = libc::fork();
            if pid < 0 {
                return fail();
            }
            if pid > 0 {
                // The middle process: keep no descriptor but stdio (std's exec-error pipe
                // among them, so the parent's spawn returns once PID 1 has exec'd), then
                // report PID 1's end as our own.
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
                let mut status = 0;
                loop {
                    let r = libc::waitpid(pid, &mut status, 0);
                    if r == pid {
                        break;
                    }
                    if r < 0 && *libc::__errno_location() != libc::EINTR {
                        libc::_exit(127);
                    }
                }
                if libc::WIFEXITED(status) {
                    libc::_exit(libc::WEXITSTATUS(status));
                }
                if libc::WIFSIGNALED(status) {
                    libc::_exit(128 + libc::WTERMSIG(status));
                }
                libc::_exit(127);
            }
            // PID 1 of the pod
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            if libc::mount(
                proc_src.as_ptr(),
                proc_dst.as_ptr(),
                proc_src.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            for op in &ops {
                let r = match op {
                    Op::Bind(src, dst, ro) => {
                        let r = libc::mount(
                            src.as_ptr(),
                            dst.as_ptr(),
                            std::ptr::null(),
                            libc::MS_BIND,
                            std::ptr::null(),
                        );
                        if r == 0 && *ro {
                            libc::mount(
                                std::ptr::null(),
                                dst.as_ptr(),
                                std::ptr::null(),
                                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                                std::ptr::null(),
                            )
                        } else {
                            r
                        }
                    }
                    Op::Tmpfs(dst) => libc::mount(
                        tmpfs.as_ptr(),
                        dst.as_ptr(),
                        tmpfs.as_ptr(),
                        0,
                        tmpfs_opts.as_ptr().cast(),
                    ),
                    Op::Symlink(target, link) => libc::symlink(target.as_ptr(), link.as_ptr()),
                    Op::Dir(prefixes) => {
                        let mut r = 0;
                        for p in prefixes {
                            if libc::mkdir(p.as_ptr(), 0o755) != 0
                                && *libc::__errno_location() != libc::EEXIST
                            {
                                r = -1;
                                break;
                            }
                        }
                        r
                    }
                };
                if r != 0 {
                    return fail();
                }
            }
            if libc::sethostname(hostname.as_ptr().cast(), hostname.len()) != 0 {
                return fail();
            }
            if libc::chdir(workdir.as_ptr()) != 0 {
                return fail();
            }
            Ok(())
        });
    }
    Ok(held)
}

/// The host PID of the pod's PID 1: the only child of the middle process. None when it has
/// already gone or the process runs without namespaces (then the middle is the container).
pub fn init_pid(middle: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{middle}/task/{middle}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}
