//! An arm64 node on an x86 machine: its pods' arm64 programs run under qemu-user, as on a
//! machine whose kernel hands aarch64 executables to qemu through binfmt_misc (Docker's
//! multi-architecture set-up). The registration is not the machine's: binfmt_misc has an
//! instance per user namespace (Linux 6.7), so the node agent starts one holder process in a
//! user namespace of its own — every uid and gid mapped to itself, so root stays root for
//! every file — with qemu-aarch64-static registered in it as Debian's qemu-user-binfmt
//! registers it (flag F: the interpreter is opened at registration, so containers need not
//! see it; P: argv[0] preserved), and the containers of arm64 images join
//! that user namespace. Nothing of the machine's changes; the registration goes with the
//! holder, which dies with the agent.
//!
//! The holder is `archbench-cluster emulator` (a process of its own: unsharing a user
//! namespace needs a single thread), told over its stdin when its maps are written.

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// qemu-user's aarch64 ELF magic and mask, as Debian's qemu-user-binfmt registers them.
const AARCH64_MAGIC: &str =
    r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00";
const AARCH64_MASK: &str =
    r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff";

/// Where Debian's qemu-user-static puts the interpreter.
pub const QEMU_AARCH64: &str = "/usr/bin/qemu-aarch64-static";
/// The same interpreter under the name Debian registers it by: qemu named `…-binfmt-P` knows
/// the kernel preserved the program's argv[0] (flag P), which busybox's applets need (it
/// re-executes itself as `cat`, `head`, …).
pub const QEMU_AARCH64_BINFMT: &str = "/usr/libexec/qemu-binfmt/aarch64-binfmt-P";

/// How long the holder may take to say it is unshared, then registered.
const HOLDER_STEP: Duration = Duration::from_secs(10);

/// A running holder: the user namespace emulated containers join.
#[derive(Debug)]
pub struct Emulator {
    holder: Child,
    /// Kept open: the holder waits for it to close (the agent's end).
    _stdin: ChildStdin,
    user_ns: PathBuf,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

fn fail(what: &str) -> io::Error {
    io::Error::other(format!("the arm64 emulation: {what}"))
}

impl Emulator {
    /// Starts the holder (`program emulator DIR QEMU`), maps its ids, waits for its
    /// registration. `dir` is an empty directory the holder mounts its binfmt_misc on.
    pub fn start(program: &Path, dir: &Path, qemu: &Path) -> io::Result<Emulator> {
        if !qemu.is_file() {
            return Err(fail(&format!(
                "{} is missing (apt-get install qemu-user-static)",
                qemu.display()
            )));
        }
        std::fs::create_dir_all(dir)?;
        let mut holder = Command::new(program)
            .arg("emulator")
            .arg(dir)
            .arg(qemu)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let pid = holder.id();
        let (Some(mut stdin), Some(stdout)) = (holder.stdin.take(), holder.stdout.take()) else {
            let _ = holder.kill();
            return Err(fail("the holder has no pipes"));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let expect = |want: &str| match lines.recv_timeout(HOLDER_STEP) {
            Ok(Ok(line)) if line == want => Ok(()),
            Ok(Ok(line)) => Err(fail(&format!("the holder said {line:?}"))),
            _ => Err(fail(&format!(
                "the holder did not say {want:?} within {HOLDER_STEP:?}"
            ))),
        };
        let started = expect("unshared").and_then(|()| {
            // Every id to itself: a process of the namespace is who it is outside it.
            std::fs::write(format!("/proc/{pid}/uid_map"), "0 0 4294967295")?;
            std::fs::write(format!("/proc/{pid}/gid_map"), "0 0 4294967295")?;
            stdin.write_all(b"mapped\n")?;
            expect("registered")
        });
        if let Err(e) = started {
            let _ = holder.kill();
            let _ = holder.wait();
            return Err(e);
        }
        Ok(Emulator {
            holder,
            _stdin: stdin,
            user_ns: PathBuf::from(format!("/proc/{pid}/ns/user")),
        })
    }

    /// The user namespace file emulated containers join.
    pub fn user_ns(&self) -> &Path {
        &self.user_ns
    }
}

/// The holder: unshares a user and a mount namespace, waits for its maps, mounts binfmt_misc
/// on `dir` (privately), registers `qemu` for aarch64 executables, then lives until its stdin
/// closes. Must run before any second thread exists.
pub fn holder_main(dir: &Path, qemu: &Path) -> io::Result<()> {
    // SAFETY: prctl and unshare with constant arguments; this process has one thread.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let mut out = io::stdout();
    writeln!(out, "unshared")?;
    out.flush()?;
    let mut stdin = io::stdin().lock();
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    if line.trim() != "mapped" {
        return Err(fail("the agent did not map the holder's ids"));
    }
    mount_binfmt(dir)?;
    // Debian's own registration (/usr/lib/binfmt.d/qemu-aarch64.conf): O the binary passed
    // open, P its argv[0] preserved, F the interpreter opened now.
    let rule = format!(
        ":qemu-aarch64:M::{AARCH64_MAGIC}:{AARCH64_MASK}:{}:OPF",
        qemu.display()
    );
    std::fs::write(dir.join("register"), rule)
        .map_err(|e| fail(&format!("registering {}: {e}", qemu.display())))?;
    writeln!(out, "registered")?;
    out.flush()?;
    // Until the agent's end of the pipe closes.
    while stdin.read_line(&mut line)? > 0 {}
    Ok(())
}

fn mount_binfmt(dir: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |s: &[u8]| CString::new(s).map_err(|_| fail("a NUL in a path"));
    let (root, target, fs) = (c(b"/")?, c(dir.as_os_str().as_bytes())?, c(b"binfmt_misc")?);
    let null = std::ptr::null();
    // SAFETY: mount(2) with NUL-terminated strings that outlive the calls.
    unsafe {
        // Private first: nothing mounted here may reach the machine's mount namespace.
        if libc::mount(
            null,
            root.as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            null.cast(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::mount(fs.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, null.cast()) != 0 {
            let e = io::Error::last_os_error();
            return Err(fail(&format!(
                "mounting binfmt_misc in a user namespace: {e} (this needs Linux 6.7 or later)"
            )));
        }
    }
    Ok(())
}
