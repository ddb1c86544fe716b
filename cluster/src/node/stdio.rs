//! A container run's standard streams as attach sees them: its output as it is written
//! (each chunk to every attached client, beside the log file), the end of the run, and —
//! for a container with `stdin: true` — the pipe to its stdin, which the node keeps open
//! for attach to write to (`stdinOnce`: closed when the first attach with stdin ends).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{broadcast, watch};

/// Output chunks kept for an attached client that falls behind; past that it loses some
/// (a client that slow loses output, never slows the container).
const BACKLOG: usize = 1024;

/// Channel numbers of the streaming protocol (stdout, stderr).
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;

pub struct RunIo {
    out: broadcast::Sender<(u8, Bytes)>,
    ended: watch::Sender<bool>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pub has_stdin: bool,
    stdin_once: bool,
    /// An attach with stdin has begun (stdinOnce closes stdin when it ends).
    stdin_used: AtomicBool,
}

impl std::fmt::Debug for RunIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunIo")
            .field("has_stdin", &self.has_stdin)
            .field("ended", &*self.ended.borrow())
            .finish()
    }
}

/// What one attached client receives.
pub struct Attached {
    pub output: broadcast::Receiver<(u8, Bytes)>,
    /// Set once the run is over (see `wait_true`).
    pub ended: watch::Receiver<bool>,
}

/// Waits for a flag to be set (or its sender to go, which ends what it flagged too).
pub async fn wait_true(flag: &mut watch::Receiver<bool>) {
    // the borrow is released before each wait, so the future stays Send
    while !*flag.borrow_and_update() {
        if flag.changed().await.is_err() {
            return;
        }
    }
}

impl RunIo {
    pub fn new(stdin: Option<ChildStdin>, stdin_once: bool) -> Arc<RunIo> {
        Arc::new(RunIo {
            out: broadcast::channel(BACKLOG).0,
            ended: watch::channel(false).0,
            has_stdin: stdin.is_some(),
            stdin: tokio::sync::Mutex::new(stdin),
            stdin_once,
            stdin_used: AtomicBool::new(false),
        })
    }

    /// A chunk the container wrote on `channel`.
    pub fn output(&self, channel: u8, bytes: &[u8]) {
        // no receiver (nobody attached) is the common case, not an error
        let _ = self.out.send((channel, Bytes::copy_from_slice(bytes)));
    }

    /// The run is over and its output drained.
    pub fn end(&self) {
        self.ended.send_replace(true);
    }

    /// Output from now on, and the end of the run.
    pub fn attach(&self) -> Attached {
        Attached {
            output: self.out.subscribe(),
            ended: self.ended.subscribe(),
        }
    }

    /// Writes to the container's stdin; false when it has none (any more).
    pub async fn write_stdin(&self, bytes: &[u8]) -> bool {
        let mut pipe = self.stdin.lock().await;
        let Some(p) = pipe.as_mut() else {
            return false;
        };
        if p.write_all(bytes).await.is_err() {
            *pipe = None;
            return false;
        }
        true
    }

    /// An attach with stdin begins.
    pub fn stdin_attached(&self) {
        self.stdin_used.store(true, Ordering::Relaxed);
    }

    /// An attach that used stdin is over: with `stdinOnce` the container's stdin closes (it
    /// reads EOF), as the kubelet's runtime does after the first attach.
    pub async fn detach_stdin(&self) {
        if self.stdin_once && self.stdin_used.load(Ordering::Relaxed) {
            self.stdin.lock().await.take();
        }
    }
}
