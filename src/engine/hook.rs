//! The seam a script (wrk's Lua API) plugs into: the worker calls a [`WorkerHook`] for its
//! requests, responses and delays only when the plan carries [`Hooks`]; without them the
//! worker's path is the one it always had (one shared request, no call per request).
//!
//! The engine knows nothing of Lua: `script` implements these traits, `cli` hands them over.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What went wrong in a hook: already worded for the user (a script's `file:line: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError(pub String);

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HookError {}

/// One worker thread's script.
pub trait WorkerHook: Send {
    /// Called for each request of connection `conn` when [`WorkerScript::dynamic`]: the
    /// bytes to send (one or several pipelined requests) written into `out`, which the caller
    /// has cleared.
    fn request(&mut self, conn: usize, out: &mut Vec<u8>) -> Result<(), HookError>;
    /// Called with each response as it arrived (head and body, still chunked if it was) when
    /// [`WorkerScript::wants_responses`].
    fn response(&mut self, raw: &[u8]) -> Result<(), HookError>;
    /// Called before each request when [`WorkerScript::delays`]: how long to wait first.
    fn delay(&mut self) -> Result<Duration, HookError>;
    /// The script asked this worker to stop (`thread:stop()`), or a script failed anywhere in
    /// the run: the worker ends its loop as at its deadline.
    fn stop_requested(&self) -> bool;
    /// A hook failed: the run stops and `error` is what the user is told.
    fn failed(&mut self, error: HookError);
    /// When [`WorkerScript::outcomes`]: connection `conn`'s request was answered with
    /// `status` after `total_us` (or failed: None). Must not allocate.
    fn outcome(&mut self, _conn: usize, _answer: Option<(u16, u64)>) {}
}

/// What a worker gets from the script: its hook, and what the script decided before the load.
pub struct WorkerScript {
    pub hook: Box<dyn WorkerHook>,
    /// Where this worker connects (`thread.addr`, which `setup` may change); None: the plan's.
    pub addr: Option<SocketAddr>,
    /// The request bytes of a script without `request()`, built once (as wrk does); None:
    /// the plan's.
    pub request: Option<Arc<[u8]>>,
    /// `request()` is defined: called for every request.
    pub dynamic: bool,
    /// Requests in one `request()` result; a connection reads this many responses per write.
    pub pipeline: usize,
    /// Every request is HEAD (a response without a body follows).
    pub head_requests: bool,
    pub wants_responses: bool,
    pub delays: bool,
    /// Tell the hook how each request ended ([`WorkerHook::outcome`]).
    pub outcomes: bool,
}

/// Makes one script per worker thread of a run, and is told the run's result.
pub trait Hooks: Send + Sync + fmt::Debug {
    fn workers(&self, threads: usize) -> Result<Vec<WorkerScript>, HookError>;
    /// The first failure of a hook during the last run (which stopped it).
    fn failure(&self) -> Option<String>;
    /// After the run and its report: the script's own report (wrk's done()).
    fn done(&self, result: &crate::stats::RunResult) -> Result<(), HookError>;
    /// Whether [`Hooks::done`] reports anything (a script that defines done()), so a caller
    /// reporting several runs heads each one's report only when there is one.
    fn reports(&self) -> bool {
        false
    }
    /// What chose these hooks, as (argument id, value) pairs in order (`script` FILE then each
    /// `script_args` A, or `mix` FILE): for the stored plan and the reproduce line, which
    /// spells each id as the parser does.
    fn flags(&self) -> Vec<(&'static str, String)>;
    /// A request mix's figures per entry, of the last run (for the result).
    fn entries(&self) -> Vec<crate::stats::EntryResult> {
        Vec::new()
    }
}

/// A worker's script and what it keeps per connection: the bytes of its current request(s)
/// when `request()` builds them, the response read so far when `response()` wants it, and
/// how many responses of a pipelined write are still due. Sized once, reused per request.
pub(super) struct Scripted {
    pub script: WorkerScript,
    pub requests: Vec<Vec<u8>>,
    pub responses: Vec<Vec<u8>>,
    pub pending: Vec<usize>,
}

impl Scripted {
    pub fn new(script: WorkerScript, connections: usize) -> Scripted {
        Scripted {
            script,
            requests: vec![Vec::new(); connections],
            responses: vec![Vec::new(); connections],
            pending: vec![0; connections],
        }
    }

    /// A new request on connection `i`: its bytes from `request()` when the script builds
    /// them. False when the script failed or stopped the thread (no request goes out).
    pub fn begin(&mut self, i: usize) -> bool {
        if self.stopped() {
            return false;
        }
        self.pending[i] = self.script.pipeline;
        self.responses[i].clear();
        if !self.script.dynamic {
            return true;
        }
        let out = &mut self.requests[i];
        out.clear();
        match self.script.hook.request(i, out) {
            Ok(()) => true,
            Err(e) => {
                self.script.hook.failed(e);
                false
            }
        }
    }

    /// Bytes of connection `i`'s current request: the script's own, or `shared`.
    pub fn request<'a>(&'a self, i: usize, shared: &'a [u8]) -> &'a [u8] {
        if self.script.dynamic {
            &self.requests[i]
        } else {
            shared
        }
    }

    /// Response bytes of connection `i` as they are framed, kept for `response()`.
    pub fn received(&mut self, i: usize, bytes: &[u8]) {
        if self.script.wants_responses {
            self.responses[i].extend_from_slice(bytes);
        }
    }

    /// A response of connection `i` ended: `response()` called with it. True when more of a
    /// pipelined write are due on the connection.
    pub fn response_done(&mut self, i: usize) -> bool {
        if self.script.wants_responses {
            if let Err(e) = self.script.hook.response(&self.responses[i]) {
                self.script.hook.failed(e);
            }
            self.responses[i].clear();
        }
        self.pending[i] = self.pending[i].saturating_sub(1);
        self.pending[i] > 0
    }

    /// `delay()` before connection's next request, when the script defines it.
    pub fn delay(&mut self) -> Option<Duration> {
        if !self.script.delays {
            return None;
        }
        match self.script.hook.delay() {
            Ok(d) => Some(d),
            Err(e) => {
                self.script.hook.failed(e);
                None
            }
        }
    }

    /// How connection `i`'s request ended, when the hook wants to know.
    pub fn outcome(&mut self, i: usize, answer: Option<(u16, u64)>) {
        if self.script.outcomes {
            self.script.hook.outcome(i, answer);
        }
    }

    pub fn stopped(&self) -> bool {
        self.script.hook.stop_requested()
    }
}
