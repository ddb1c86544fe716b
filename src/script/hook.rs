//! A worker thread's script as the engine calls it (engine::hook::WorkerHook).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, Lua, Value};

use super::thread::ThreadShared;
use super::{message, RunState};
use crate::engine::hook::{HookError, WorkerHook};

/// Longest delay() honoured: longer ones are surely a unit mistake (it is milliseconds).
const MAX_DELAY_MS: f64 = 3_600_000.0;

pub(super) struct LuaHook {
    pub request: Function,
    pub response: Option<Function>,
    pub delay: Option<Function>,
    pub thread: Arc<ThreadShared>,
    pub run: Arc<RunState>,
    pub name: String,
    /// Keeps the thread's state alive while the worker runs.
    pub _lua: Lua,
}

impl LuaHook {
    fn error(&self, e: &mlua::Error) -> HookError {
        HookError(message(e, &self.name))
    }
}

impl WorkerHook for LuaHook {
    fn request(&mut self, _conn: usize, out: &mut Vec<u8>) -> Result<(), HookError> {
        match self.request.call::<Value>(()) {
            Ok(Value::String(s)) => {
                out.extend_from_slice(&s.as_bytes());
                Ok(())
            }
            Ok(other) => Err(HookError(format!(
                "{}: request() must return the request as a string, not a {}",
                self.name,
                other.type_name()
            ))),
            Err(e) => Err(self.error(&e)),
        }
    }

    fn response(&mut self, raw: &[u8]) -> Result<(), HookError> {
        let Some(f) = &self.response else {
            return Ok(());
        };
        let Some(r) = super::response::split(raw) else {
            return Ok(());
        };
        let call = || -> mlua::Result<()> {
            let lua = &self._lua;
            let headers = lua.create_table()?;
            for (name, value) in &r.headers {
                headers.raw_set(lua.create_string(name)?, lua.create_string(value)?)?;
            }
            let body = lua.create_string(&r.body[..])?;
            f.call::<()>((r.status, headers, body))
        };
        call().map_err(|e| self.error(&e))
    }

    fn delay(&mut self) -> Result<Duration, HookError> {
        let Some(f) = &self.delay else {
            return Ok(Duration::ZERO);
        };
        let ms = match f.call::<Value>(()) {
            Ok(Value::Number(n)) => n,
            Ok(Value::Integer(i)) => i as f64,
            Ok(Value::Nil) => 0.0,
            Ok(other) => {
                return Err(HookError(format!(
                    "{}: delay() must return milliseconds, not a {}",
                    self.name,
                    other.type_name()
                )))
            }
            Err(e) => return Err(self.error(&e)),
        };
        if !ms.is_finite() || ms > MAX_DELAY_MS {
            return Err(HookError(format!(
                "{}: delay() returned {ms} ms; at most an hour",
                self.name
            )));
        }
        Ok(Duration::from_secs_f64(ms.max(0.0) / 1000.0))
    }

    fn stop_requested(&self) -> bool {
        self.thread.stop.load(Ordering::Relaxed) || self.run.failed.load(Ordering::Relaxed)
    }

    fn failed(&mut self, error: HookError) {
        self.run.fail(error.0);
    }
}

/// Why `bytes` is no request, in the script's terms: a request line of other than three
/// words is a space in `wrk.method` or `wrk.path` (httparse would call the third word a bad
/// version).
fn not_a_request(bytes: &[u8], e: httparse::Error) -> String {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let words = line.trim_end_matches('\r').split(' ').count();
    if words != 3 {
        return format!(
            "not an HTTP request: its request line {:?} has {words} words where a method, a path and a version are 3 (a space in wrk.method or wrk.path?)",
            line.trim_end_matches('\r')
        );
    }
    format!("not an HTTP request ({e})")
}

/// How many whole requests `bytes` holds (several when pipelined), or why it holds none.
pub(super) fn count_requests(mut bytes: &[u8]) -> Result<usize, String> {
    let mut n = 0;
    while !bytes.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(bytes) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Err("incomplete request".into()),
            Err(e) => return Err(not_a_request(bytes, e)),
        };
        let mut body = 0usize;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                body = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or("invalid Content-Length")?;
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(
                    "a chunked request body is not supported; give a Content-Length".into(),
                );
            }
        }
        let end = len
            .checked_add(body)
            .filter(|&e| e <= bytes.len())
            .ok_or("the body is shorter than its Content-Length")?;
        bytes = &bytes[end..];
        n += 1;
    }
    if n == 0 {
        return Err("an empty request".into());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::count_requests;

    #[test]
    fn a_space_in_the_method_is_named_not_taken_for_a_bad_version() {
        let e = count_requests(b"GE T / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap_err();
        assert!(
            e.contains("\"GE T / HTTP/1.1\" has 4 words") && e.contains("wrk.method"),
            "{e}"
        );
    }

    #[test]
    fn pipelined_requests_are_counted() {
        let one = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(count_requests(one), Ok(1));
        let three = [
            &b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            one,
            b"GET /3 HTTP/1.1\r\n\r\n",
        ]
        .concat();
        assert_eq!(count_requests(&three), Ok(3));
        assert!(count_requests(b"").is_err());
        assert!(count_requests(b"GET / HTTP/1.1\r\n").is_err());
        assert!(count_requests(b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab").is_err());
    }
}
