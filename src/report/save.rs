//! Writing a report file where the user pointed: a regular file (or a new one) is replaced
//! atomically, so a reader never sees half a document and an interrupted write never destroys
//! an older one; a symbolic link is written through, to the file it names, the link kept; a
//! device or a pipe (`/dev/stdout`, a FIFO a reader waits on) is written to as it is, never
//! replaced by a file of the same name.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a report for `path` lands.
#[derive(Debug, PartialEq, Eq)]
enum Destination {
    /// A regular file, or none yet: written beside through a temporary file, then renamed.
    File(PathBuf),
    /// A device, a pipe or a socket: written to in place.
    Stream(PathBuf),
}

impl Destination {
    /// What `path` names, through its symbolic links.
    fn of(path: &Path) -> Destination {
        match std::fs::metadata(path) {
            // Opened by the name given: /dev/stdout's link leads to a pipe no path names.
            Ok(m) if !m.is_file() && !m.is_dir() => Destination::Stream(path.to_path_buf()),
            // A dangling link is created through, as `>` would: its target is the file.
            _ => Destination::File(std::fs::canonicalize(path).unwrap_or_else(|_| followed(path))),
        }
    }
}

/// `path` with its symbolic links followed as far as they lead (a dangling one's target).
fn followed(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // Links of links, but never a loop for ever.
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(target) => {
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                }
            }
            Err(_) => break,
        }
    }
    p
}

/// A temporary file of this process beside `path`, new: it never replaces a file of the
/// user's (`report.json.tmp` is a name someone may use).
fn create_temporary(path: &Path) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.archbench-{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes a file where `path` points (see the module). Its directory must exist: one made
/// for a mistyped path would hide the mistake.
pub fn save_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    match Destination::of(path) {
        Destination::Stream(p) => {
            let mut f = io::BufWriter::new(OpenOptions::new().write(true).open(p)?);
            write(&mut f)?;
            f.flush()
        }
        Destination::File(p) => {
            let (tmp, f) = create_temporary(&p)?;
            let written = (|| {
                let mut f = io::BufWriter::new(f);
                write(&mut f)?;
                f.flush()?;
                f.get_ref().sync_all()?;
                std::fs::rename(&tmp, &p)
            })();
            if written.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            written
        }
    }
}

/// Whether a report could be saved at `path`, asked before any load: why not, else None.
/// Nothing the user has is touched (a device or a pipe is not opened: a FIFO would wait for
/// its reader).
pub fn unwritable(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some("it is a directory; give a file name".into());
    }
    match Destination::of(path) {
        Destination::Stream(p) => {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
            // SAFETY: access reads a NUL-terminated path and changes nothing.
            let ok = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
            (!ok).then(|| format!("cannot write there: {}", io::Error::last_os_error()))
        }
        Destination::File(p) => {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.exists() {
                return Some(format!("no directory {}; create it first", dir.display()));
            }
            if !dir.is_dir() {
                return Some(format!("{} is not a directory", dir.display()));
            }
            match create_temporary(&p) {
                Ok((tmp, _)) => {
                    let _ = std::fs::remove_file(tmp);
                    None
                }
                Err(e) => Some(format!("cannot write there: {e}")),
            }
        }
    }
}

/// Whether two report paths name one file (a link to it, or the same words twice).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let target = |p: &Path| match Destination::of(p) {
        Destination::File(p) | Destination::Stream(p) => std::path::absolute(&p).unwrap_or(p),
    };
    target(a) == target(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn save(path: &Path, text: &str) -> io::Result<()> {
        save_atomic(path, |f| f.write_all(text.as_bytes()))
    }

    #[test]
    fn a_link_is_written_through_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        let link = dir.path().join("link.json");
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        save(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A dangling link: its target is made.
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        save(&dangling, "made").unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.json")).unwrap(),
            "made"
        );
        assert!(same_file(&link, &target));
        assert!(!same_file(&link, &dangling));
    }

    #[test]
    fn a_pipe_is_written_to_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(unwritable(&fifo), None);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        save(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        // A device likewise: /dev/null stays a device.
        save(Path::new("/dev/null"), "gone").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
    }

    #[test]
    fn the_temporary_file_never_takes_a_users_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keep.json");
        let users = dir.path().join("keep.json.tmp");
        std::fs::write(&users, "the user's").unwrap();
        assert_eq!(unwritable(&path), None);
        save(&path, "report").unwrap();
        assert_eq!(std::fs::read_to_string(&users).unwrap(), "the user's");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "report");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
    }
}
