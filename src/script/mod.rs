//! wrk's Lua scripting API (its SCRIPTING document) on archbench's engine: a setup state
//! that runs `setup(thread)` and `done(...)`, and one state per worker thread that runs
//! `init(args)`, `request()`, `response(...)` and `delay()`, as wrk keeps them.
//!
//! A script without `request()` costs nothing per request: its request is built once per
//! thread and sent as the engine sends any request. Scripts are trusted code, as in wrk.

mod hook;
mod response;
mod state;
mod stats;
mod thread;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mlua::{Function, Lua, Table, Value};
use thiserror::Error;

use crate::engine::hook::{HookError, Hooks, WorkerScript};
use crate::stats::RunResult;
use state::Source;
use thread::{ThreadHandle, ThreadShared};

/// `-s FILE` and the arguments after `--`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptFile {
    pub path: PathBuf,
    pub args: Vec<String>,
}

/// A script that cannot run, or failed in done().
#[derive(Debug, Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}; check the path")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// It does not load, or its top level fails: `file:line: message`.
    #[error("{0}")]
    Load(String),
    /// setup(), init() or resolving the target failed.
    #[error("{0}")]
    Setup(String),
    /// The first request() did not give whole requests.
    #[error("{0}")]
    Request(String),
    /// done() failed (after the load: its results are kept).
    #[error("{0}")]
    Done(String),
    #[error("archbench's wrk table failed to load: {0}; this is a bug in archbench")]
    Bug(String),
}

impl ScriptError {
    /// Found before any load started: the user's to fix, exit status 2.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ScriptError::Done(_) | ScriptError::Bug(_))
    }
}

/// What all the states of one run share: the first failure, which stops every worker.
#[derive(Debug, Default)]
struct RunState {
    failed: AtomicBool,
    error: Mutex<Option<String>>,
}

impl RunState {
    fn fail(&self, message: String) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        e.get_or_insert(message);
        self.failed.store(true, Ordering::Relaxed);
    }
}

/// A script for one load: its setup state, and the thread states made for the load's workers.
pub struct Session {
    src: Arc<Source>,
    main: Lua,
    /// Every thread state made (done()'s thread:get reads them after the load).
    threads: Mutex<Vec<Lua>>,
    /// The workers' scripts, made (setup and init run) before the load; a later load of the
    /// same session (a comparison's next run) makes new ones.
    prepared: Mutex<Option<Vec<WorkerScript>>>,
    run: Arc<RunState>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("script", &self.src.name)
            .finish_non_exhaustive()
    }
}

/// A Lua error as one line: `file:line: message`, the location taken from the traceback when
/// the message (one of ours, raised in Rust) has none.
pub(crate) fn message(e: &mlua::Error, script: &str) -> String {
    let first = |s: &str| s.lines().next().unwrap_or("").to_string();
    match e {
        mlua::Error::CallbackError { traceback, cause } => {
            let inner = message(cause, script);
            if inner.starts_with(script) {
                return inner;
            }
            let at = traceback
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with(&format!("{script}:")))
                .and_then(|l| l.rsplit_once(": in ").map(|(loc, _)| loc.to_string()));
            match at {
                Some(loc) => format!("{loc}: {inner}"),
                None => format!("{script}: {inner}"),
            }
        }
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => first(m),
        mlua::Error::SyntaxError { message, .. } => first(message),
        other => format!("{script}: {}", first(&other.to_string())),
    }
}

/// Script functions running on the calling thread before the load (the chunk, setup, init,
/// the first request): a Ctrl-C meanwhile has no loop to stop, and LuaJIT's compiled loops
/// cannot be interrupted, so whoever handles the signal asks [`starting`] to know.
static STARTING: AtomicUsize = AtomicUsize::new(0);

/// Whether a script is running its functions before the load (see [`STARTING`]).
pub fn starting() -> bool {
    STARTING.load(Ordering::Relaxed) > 0
}

/// Marks the script's start for as long as it lives.
struct Starting;

impl Starting {
    fn begin() -> Starting {
        STARTING.fetch_add(1, Ordering::Relaxed);
        Starting
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        STARTING.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session {
    /// Loads the script, resolves the target in its setup state and makes one state per
    /// worker thread (setup and init run): every failure here comes before any load.
    pub fn start(
        file: &ScriptFile,
        url: &str,
        target: &crate::http::Target,
        headers: &[(String, String)],
        threads: usize,
    ) -> Result<Session, ScriptError> {
        let _starting = Starting::begin();
        let name = file.path.display().to_string();
        let text = std::fs::read(&file.path).map_err(|source| ScriptError::Read {
            path: name.clone(),
            source,
        })?;
        let port = state::written_port(url);
        let scheme = match target.scheme {
            crate::http::Scheme::Http => "http",
            crate::http::Scheme::Https => "https",
        };
        let src = Arc::new(Source {
            name,
            text,
            url: url.to_string(),
            scheme: scheme.to_string(),
            host: target.host.clone(),
            service: port.clone().unwrap_or_else(|| scheme.to_string()),
            port,
            path: target.path.clone(),
            headers: headers.to_vec(),
            args: file.args.clone(),
        });
        let main = state::new_state(&src)?;
        let session = Session {
            main,
            threads: Mutex::new(Vec::new()),
            prepared: Mutex::new(None),
            run: Arc::new(RunState::default()),
            src,
        };
        session.resolve()?;
        let workers = session.make_workers(threads)?;
        *session.lock_prepared() = Some(workers);
        flush_lua_output();
        Ok(session)
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, Option<Vec<WorkerScript>>> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn setup_error(&self, e: &mlua::Error) -> ScriptError {
        ScriptError::Setup(message(e, &self.src.name))
    }

    /// wrk.resolve in the setup state: wrk.addrs, the addresses that accept a connection.
    fn resolve(&self) -> Result<(), ScriptError> {
        let wrk: Table = self
            .main
            .globals()
            .get("wrk")
            .map_err(|e| self.setup_error(&e))?;
        let resolve: Function = wrk.get("resolve").map_err(|e| self.setup_error(&e))?;
        resolve
            .call::<()>((self.src.host.as_str(), self.src.service.as_str()))
            .map_err(|e| self.setup_error(&e))?;
        let addrs: Table = wrk.get("addrs").map_err(|e| self.setup_error(&e))?;
        if addrs.raw_len() == 0 {
            return Err(ScriptError::Setup(format!(
                "unable to connect to {}:{}; is the server up?",
                self.src.host, self.src.service
            )));
        }
        Ok(())
    }

    // Long: the order of wrk's own start, step by step (states, setup, init, the first
    // request and what it decides for every thread), is clearest read in one place.
    fn make_workers(&self, threads: usize) -> Result<Vec<WorkerScript>, ScriptError> {
        let err = |e: mlua::Error| self.setup_error(&e);
        let main_wrk: Table = self.main.globals().get("wrk").map_err(err)?;
        let setup: Function = main_wrk.get("setup").map_err(err)?;
        // Copied out at once: a borrowed userdata cannot be borrowed again by setup().
        let first_addr = main_wrk
            .get::<Table>("addrs")
            .and_then(|t| t.get::<mlua::UserDataRef<state::Addr>>(1))
            .map(|a| a.0)
            .map_err(err)?;
        let mut made = Vec::with_capacity(threads);
        for _ in 0..threads {
            let lua = state::new_state(&self.src)?;
            let shared = Arc::new(ThreadShared {
                lua: lua.weak(),
                addr: Mutex::new(first_addr),
                stop: AtomicBool::new(false),
            });
            let wrk: Table = lua.globals().get("wrk").map_err(err)?;
            wrk.set("thread", ThreadHandle(shared.clone()))
                .map_err(err)?;
            setup
                .call::<()>(ThreadHandle(shared.clone()))
                .map_err(err)?;
            let args = lua.create_table().map_err(err)?;
            args.raw_set(0, self.src.url.as_str()).map_err(err)?;
            for (k, a) in self.src.args.iter().enumerate() {
                args.raw_set(k + 1, a.as_str()).map_err(err)?;
            }
            let init: Function = wrk.get("init").map_err(err)?;
            init.call::<()>(args).map_err(err)?;
            self.threads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(lua.clone());
            made.push((lua, wrk, shared));
        }
        let mut scripts = Vec::with_capacity(threads);
        let mut pipeline = None;
        for (lua, wrk, shared) in made {
            let globals = lua.globals();
            let function = |name: &str| match globals.get::<Value>(name) {
                Ok(Value::Function(f)) => Some(f),
                _ => None,
            };
            let custom = function("request");
            let dynamic = custom.is_some();
            let request = match custom {
                Some(f) => f,
                None => wrk.get("request").map_err(err)?,
            };
            let response = function("response");
            let delay = function("delay");
            let mut hook = hook::LuaHook {
                request,
                response,
                delay,
                thread: shared.clone(),
                run: self.run.clone(),
                name: self.src.name.clone(),
                _lua: lua.clone(),
            };
            // As wrk: the first thread's first request says how many are pipelined (and is
            // a request() call like any other); a static one is the request of its thread.
            let mut bytes = Vec::new();
            let first = pipeline.is_none();
            if first || !dynamic {
                use crate::engine::hook::WorkerHook as _;
                hook.request(0, &mut bytes)
                    .map_err(|e| ScriptError::Request(e.0))?;
            }
            if first {
                let n = hook::count_requests(&bytes).map_err(|why| {
                    ScriptError::Request(format!("{}: request(): {why}", self.src.name))
                })?;
                pipeline = Some(n);
            }
            scripts.push(WorkerScript {
                addr: Some(shared.addr()),
                head_requests: !dynamic && bytes.starts_with(b"HEAD "),
                request: Some(bytes.into()),
                dynamic,
                pipeline: pipeline.unwrap_or(1),
                wants_responses: hook.response.is_some(),
                delays: hook.delay.is_some(),
                outcomes: false,
                hook: Box::new(hook),
            });
        }
        Ok(scripts)
    }

    /// The first error a hook raised during the load (the load stopped at it).
    pub fn error(&self) -> Option<String> {
        self.run
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// done(summary, latency, requests) in the setup state, when the script defines it.
    pub fn done(&self, r: &RunResult) -> Result<(), ScriptError> {
        let err = |e: mlua::Error| ScriptError::Done(message(&e, &self.src.name));
        let Ok(Value::Function(done)) = self.main.globals().get::<Value>("done") else {
            return Ok(());
        };
        let lua = &self.main;
        let summary = lua.create_table().map_err(err)?;
        let e = &r.errors;
        let errors = lua.create_table().map_err(err)?;
        for (k, v) in [
            ("connect", e.connect + e.tls),
            ("read", e.read + e.protocol),
            ("write", e.write),
            ("status", r.totals.non_2xx_3xx),
            ("timeout", e.timeout),
        ] {
            errors.set(k, v as f64).map_err(err)?;
        }
        for (k, v) in [
            ("duration", (r.totals.elapsed_s * 1e6).round()),
            ("requests", r.totals.requests as f64),
            ("bytes", r.totals.bytes_read as f64),
        ] {
            summary.set(k, v).map_err(err)?;
        }
        summary.set("errors", errors).map_err(err)?;
        let latency = stats::Stats {
            name: "latency",
            histogram: r.histograms.total.0.clone(),
        };
        let requests = stats::Stats {
            name: "requests",
            histogram: r.histograms.worker_rate.0.clone(),
        };
        // Lua prints through C's stdio: what the report wrote goes first, as in wrk.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let called = done.call::<()>((summary, latency, requests)).map_err(err);
        flush_lua_output();
        called
    }
}

/// Writes out what scripts printed (Lua's print and io.write buffer in C's stdio, which
/// Rust's own stdout does not share), so it comes before what archbench prints next.
pub fn flush_lua_output() {
    // SAFETY: fflush(NULL) flushes every C output stream; no pointer is dereferenced.
    unsafe {
        libc::fflush(std::ptr::null_mut());
    }
}

impl Hooks for Session {
    fn workers(&self, threads: usize) -> Result<Vec<WorkerScript>, HookError> {
        match self.lock_prepared().take() {
            Some(w) if w.len() == threads => Ok(w),
            _ => self
                .make_workers(threads)
                .map_err(|e| HookError(e.to_string())),
        }
    }

    fn failure(&self) -> Option<String> {
        self.error()
    }

    fn flags(&self) -> Vec<(&'static str, String)> {
        let mut f = vec![("script", self.src.name.clone())];
        f.extend(self.src.args.iter().map(|a| ("script_args", a.clone())));
        f
    }

    fn done(&self, result: &RunResult) -> Result<(), HookError> {
        Session::done(self, result).map_err(|e| HookError(e.to_string()))
    }

    fn reports(&self) -> bool {
        matches!(
            self.main.globals().get::<Value>("done"),
            Ok(Value::Function(_))
        )
    }
}
