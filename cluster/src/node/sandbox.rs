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
    pub hostname: String,
    pub mounts: Vec<Mount>,
    /// `cgroup.procs` files to join before anything else.
    pub cgroup_procs: Vec<PathBuf>,
    /// The pod's network namespace (its pause process's), joined before the others are made.
    pub netns: Option<PathBuf>,
    pub workdir: PathBuf,
    /// An image of another architecture: its own root filesystem, run by the emulator.
    pub emulated: Option<EmulatedRoot>,
}

/// A container whose root is an image's root filesystem of another architecture, its
/// executables handed to qemu-user by the binfmt_misc registration of the user namespace it
/// joins (see `emulation`). Its root is an overlay: the image read-only below, a tmpfs of
/// its own above (a container's writes are its own and go with it, as a runtime's writable
/// layer does); the mounts are made inside it, then it becomes the root (pivot_root).
#[derive(Debug, Clone)]
pub struct EmulatedRoot {
    pub image: PathBuf,
    /// An empty directory of the pod's: the writable layer's tmpfs is mounted on it.
    pub scratch: PathBuf,
    /// The emulator's user namespace (`/proc/PID/ns/user`).
    pub user_ns: PathBuf,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NUL in path {}", p.display()),
        )
    })
}

fn literal(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a literal"))
}

enum Op {
    Bind(CString, CString, bool),
    Tmpfs(CString),
    Symlink(CString, CString),
    /// Each prefix of the path, shortest first.
    Dir(Vec<CString>),
    /// A mount point made where an image's root has none: its directories (each prefix,
    /// shortest first), and an empty file last when what is mounted there is a file.
    MountPoint(Vec<CString>, Option<CString>),
}

/// Each prefix of `p` below `/`, shortest first.
fn prefixes(p: &Path) -> io::Result<Vec<CString>> {
    p.ancestors()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .filter(|p| p.parent().is_some())
        .map(cstr)
        .collect()
}

/// `dst` (a path in the container) under `root`.
fn under(root: &Path, dst: &Path) -> PathBuf {
    root.join(dst.strip_prefix("/").unwrap_or(dst))
}

/// The ops of `mounts` inside an image's root mounted at `root`: every path moved under it,
/// and a mount point made before each mount.
fn rooted_ops(root: &Path, mounts: &[Mount]) -> io::Result<Vec<Op>> {
    let mut ops = Vec::new();
    for m in mounts {
        let moved = match m {
            Mount::Bind {
                src,
                dst,
                read_only,
            } => {
                let dst = under(root, dst);
                let file = !src.is_dir();
                let dirs = if file {
                    dst.parent().map(prefixes).transpose()?.unwrap_or_default()
                } else {
                    prefixes(&dst)?
                };
                ops.push(Op::MountPoint(dirs, file.then(|| cstr(&dst)).transpose()?));
                Mount::Bind {
                    src: src.clone(),
                    dst,
                    read_only: *read_only,
                }
            }
            Mount::Tmpfs { dst } => {
                let dst = under(root, dst);
                ops.push(Op::MountPoint(prefixes(&dst)?, None));
                Mount::Tmpfs { dst }
            }
            Mount::Symlink { target, link } => Mount::Symlink {
                target: target.clone(),
                link: under(root, link),
            },
            Mount::Dir { dst } => Mount::Dir {
                dst: under(root, dst),
            },
        };
        ops.push(Op::of(&moved)?);
    }
    Ok(ops)
}

/// What PID 1 makes of an image's root before the other mounts, and how it becomes the root.
struct RootOps {
    scratch: CString,
    upper: CString,
    work: CString,
    merged: CString,
    overlay_options: CString,
    proc_dir: CString,
    dev: CString,
    host_dev: CString,
    old_root: CString,
    old_root_inside: CString,
    overlay: CString,
}

impl RootOps {
    fn new(e: &EmulatedRoot) -> io::Result<RootOps> {
        let merged = e.scratch.join("root");
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            e.image.display(),
            e.scratch.join("upper").display(),
            e.scratch.join("work").display()
        );
        Ok(RootOps {
            scratch: cstr(&e.scratch)?,
            upper: cstr(&e.scratch.join("upper"))?,
            work: cstr(&e.scratch.join("work"))?,
            merged: cstr(&merged)?,
            overlay_options: literal(&options)?,
            proc_dir: cstr(&merged.join("proc"))?,
            dev: cstr(&merged.join("dev"))?,
            host_dev: literal("/dev")?,
            old_root: cstr(&merged.join(".oldroot"))?,
            old_root_inside: literal("/.oldroot")?,
            overlay: literal("overlay")?,
        })
    }
}

impl Op {
    fn of(m: &Mount) -> io::Result<Op> {
        Ok(match m {
            Mount::Bind {
                src,
                dst,
                read_only,
            } => Op::Bind(cstr(src)?, cstr(dst)?, *read_only),
            Mount::Tmpfs { dst } => Op::Tmpfs(cstr(dst)?),
            Mount::Symlink { target, link } => Op::Symlink(cstr(target)?, cstr(link)?),
            Mount::Dir { dst } => Op::Dir(prefixes(dst)?),
        })
    }
}

/// Everything the forked child uses, made before the fork: the child of a multithreaded
/// process may only make async-signal-safe calls (raw syscalls, no allocation).
struct Child {
    cgroup_fds: Vec<i32>,
    net_fd: Option<i32>,
    /// The emulator's user namespace, joined after the network.
    user_fd: Option<i32>,
    /// `net.ipv4.ip_unprivileged_port_start` of the pod's network: set to 0 for a container
    /// in a user namespace, which has no capability in the network's own (as Docker does).
    ports_sysctl: CString,
    rooted: Option<RootOps>,
    ops: Vec<Op>,
    hostname: Vec<u8>,
    workdir: CString,
    root: CString,
    proc_fs: CString,
    proc_dir: CString,
    tmpfs: CString,
    tmpfs_opts: CString,
}

fn last_error<T>() -> io::Result<T> {
    Err(io::Error::last_os_error())
}

impl Child {
    /// In the forked child: cgroups, the pod's network, new namespaces, the fork into PID 1
    /// (this process stays as the middle one, reporting PID 1's end), then PID 1's view.
    ///
    /// # Safety
    /// Called only between fork and exec (`pre_exec`).
    unsafe fn run(&self) -> io::Result<()> {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        for fd in &self.cgroup_fds {
            libc::write(*fd, b"0".as_ptr().cast(), 1);
        }
        if let Some(fd) = self.net_fd {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return last_error();
            }
        }
        if let Some(fd) = self.user_fd {
            // /proc/sys/net is the opener's network's: the pod's, joined above.
            let f = libc::open(self.ports_sysctl.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if f < 0 || libc::write(f, b"0".as_ptr().cast(), 1) != 1 {
                return last_error();
            }
            libc::close(f);
            if libc::setns(fd, libc::CLONE_NEWUSER) != 0 {
                return last_error();
            }
        }
        if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWPID) != 0 {
            return last_error();
        }
        let pid = libc::fork();
        if pid < 0 {
            return last_error();
        }
        if pid > 0 {
            Child::stand_for(pid);
        }
        // PID 1 of the pod
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        self.mount_view()?;
        if libc::sethostname(self.hostname.as_ptr().cast(), self.hostname.len()) != 0 {
            return last_error();
        }
        if libc::chdir(self.workdir.as_ptr()) != 0 {
            return last_error();
        }
        Ok(())
    }

    /// The middle process: keeps no descriptor but stdio (std's exec-error pipe among them,
    /// so the parent's spawn returns once PID 1 has exec'd), then reports PID 1's end as its
    /// own (128 + signal when killed).
    unsafe fn stand_for(pid: libc::pid_t) -> ! {
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
        libc::_exit(127)
    }

    /// PID 1's filesystem: mounts private, a fresh /proc, then the mounts in order.
    unsafe fn mount_view(&self) -> io::Result<()> {
        let null = std::ptr::null();
        if libc::mount(
            null,
            self.root.as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            null.cast(),
        ) != 0
        {
            return last_error();
        }
        if let Some(r) = &self.rooted {
            self.image_root(r)?;
        }
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        let proc_fs = self.proc_fs.as_ptr();
        let proc_dir = self.rooted.as_ref().map_or(&self.proc_dir, |r| &r.proc_dir);
        if libc::mount(proc_fs, proc_dir.as_ptr(), proc_fs, flags, null.cast()) != 0 {
            return last_error();
        }
        for op in &self.ops {
            if self.apply(op) != 0 {
                return last_error();
            }
        }
        if let Some(r) = &self.rooted {
            Child::become_root(r)?;
        }
        Ok(())
    }

    /// An image's root: the overlay of the image under a tmpfs of the container's own, with
    /// /proc and the machine's /dev as mount points in it.
    unsafe fn image_root(&self, r: &RootOps) -> io::Result<()> {
        let null = std::ptr::null();
        let tmpfs = self.tmpfs.as_ptr();
        if libc::mount(
            tmpfs,
            r.scratch.as_ptr(),
            tmpfs,
            0,
            self.tmpfs_opts.as_ptr().cast(),
        ) != 0
        {
            return last_error();
        }
        for d in [&r.upper, &r.work, &r.merged] {
            if libc::mkdir(d.as_ptr(), 0o755) != 0 {
                return last_error();
            }
        }
        let overlay = r.overlay.as_ptr();
        let options = r.overlay_options.as_ptr().cast();
        if libc::mount(overlay, r.merged.as_ptr(), overlay, 0, options) != 0 {
            return last_error();
        }
        for d in [&r.proc_dir, &r.dev] {
            if libc::mkdir(d.as_ptr(), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
                return last_error();
            }
        }
        let rbind = libc::MS_BIND | libc::MS_REC;
        if libc::mount(
            r.host_dev.as_ptr(),
            r.dev.as_ptr(),
            null,
            rbind,
            null.cast(),
        ) != 0
        {
            return last_error();
        }
        Ok(())
    }

    /// The image's root becomes the container's: pivot_root, the old root detached.
    unsafe fn become_root(r: &RootOps) -> io::Result<()> {
        if libc::mkdir(r.old_root.as_ptr(), 0o700) != 0 {
            return last_error();
        }
        if libc::syscall(libc::SYS_pivot_root, r.merged.as_ptr(), r.old_root.as_ptr()) != 0 {
            return last_error();
        }
        let root = b"/\0";
        if libc::chdir(root.as_ptr().cast()) != 0
            || libc::umount2(r.old_root_inside.as_ptr(), libc::MNT_DETACH) != 0
            || libc::rmdir(r.old_root_inside.as_ptr()) != 0
        {
            return last_error();
        }
        Ok(())
    }

    unsafe fn apply(&self, op: &Op) -> i32 {
        let null = std::ptr::null();
        match op {
            Op::Bind(src, dst, ro) => {
                let r = libc::mount(src.as_ptr(), dst.as_ptr(), null, libc::MS_BIND, null.cast());
                if r != 0 || !*ro {
                    return r;
                }
                let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                libc::mount(null, dst.as_ptr(), null, flags, null.cast())
            }
            Op::Tmpfs(dst) => libc::mount(
                self.tmpfs.as_ptr(),
                dst.as_ptr(),
                self.tmpfs.as_ptr(),
                0,
                self.tmpfs_opts.as_ptr().cast(),
            ),
            Op::Symlink(target, link) => libc::symlink(target.as_ptr(), link.as_ptr()),
            Op::Dir(prefixes) => {
                for p in prefixes {
                    if libc::mkdir(p.as_ptr(), 0o755) != 0
                        && *libc::__errno_location() != libc::EEXIST
                    {
                        return -1;
                    }
                }
                0
            }
            Op::MountPoint(dirs, file) => {
                // what exists already is the mount point; a failure shows at the mount
                for d in dirs {
                    libc::mkdir(d.as_ptr(), 0o755);
                }
                if let Some(f) = file {
                    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
                    let fd = libc::open(f.as_ptr(), flags, 0o644);
                    if fd >= 0 {
                        libc::close(fd);
                    }
                }
                0
            }
        }
    }
}

/// Sets up `cmd` to start inside the isolation. The returned guard holds the opened cgroup
/// and namespace files until the process is spawned.
pub fn prepare(
    cmd: &mut tokio::process::Command,
    iso: &Isolation,
) -> io::Result<Vec<std::fs::File>> {
    // A pod outside its cgroup would be unaccounted for (metrics, `top`, the wait at
    // deletion): a cgroup that cannot be joined fails the start.
    let mut held: Vec<std::fs::File> = iso
        .cgroup_procs
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| io::Error::new(e.kind(), format!("join cgroup {}: {e}", p.display())))
        })
        .collect::<io::Result<_>>()?;
    let cgroup_fds = held.iter().map(|f| f.as_raw_fd()).collect();
    let net_fd = match &iso.netns {
        Some(p) => {
            let f = std::fs::File::open(p)?;
            let fd = f.as_raw_fd();
            held.push(f);
            Some(fd)
        }
        None => None,
    };
    let user_fd = match &iso.emulated {
        Some(e) => {
            let f = std::fs::File::open(&e.user_ns).map_err(|err| {
                io::Error::new(err.kind(), format!("the emulator's user namespace: {err}"))
            })?;
            let fd = f.as_raw_fd();
            held.push(f);
            Some(fd)
        }
        None => None,
    };
    let (ops, rooted) = match &iso.emulated {
        Some(e) => {
            std::fs::create_dir_all(&e.scratch)?;
            (
                rooted_ops(&e.scratch.join("root"), &iso.mounts)?,
                Some(RootOps::new(e)?),
            )
        }
        None => (
            iso.mounts.iter().map(Op::of).collect::<io::Result<_>>()?,
            None,
        ),
    };
    let child = Child {
        cgroup_fds,
        net_fd,
        user_fd,
        ports_sysctl: literal("/proc/sys/net/ipv4/ip_unprivileged_port_start")?,
        rooted,
        ops,
        hostname: iso.hostname.clone().into_bytes(),
        workdir: cstr(&iso.workdir)?,
        root: literal("/")?,
        proc_fs: literal("proc")?,
        proc_dir: literal("/proc")?,
        tmpfs: literal("tmpfs")?,
        tmpfs_opts: literal("mode=755")?,
    };
    cmd.process_group(0);
    // SAFETY: `Child::run` makes raw syscalls only (prctl, write, setns, unshare, fork,
    // waitpid, close_range, _exit, mount, symlink, mkdir, sethostname, chdir) on data it
    // holds, made above.
    unsafe {
        cmd.pre_exec(move || child.run());
    }
    Ok(held)
}

/// The host PID of the pod's PID 1: the only child of the middle process. None when it has
/// already gone.
pub fn init_pid(middle: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{middle}/task/{middle}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}
