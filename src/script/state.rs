//! One Lua state as wrk makes it: the standard libraries, the `wrk` table filled in from the
//! URL and the -H headers, then the user's script run once.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use mlua::{Lua, MetaMethod, Table, UserData, UserDataMethods};

use super::ScriptError;

const PRELUDE: &str = include_str!("prelude.lua");
/// How long wrk.connect tries an address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What every state of a run is made from.
#[derive(Debug)]
pub(super) struct Source {
    /// The script's path as given: its chunk name, so messages read `path:line: …`.
    pub name: String,
    pub text: Vec<u8>,
    pub url: String,
    pub scheme: String,
    pub host: String,
    /// The port as written in the URL; None when it names none (wrk.port is nil then).
    pub port: Option<String>,
    /// What wrk.lookup is asked for: the port, else the scheme.
    pub service: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// A network address of `wrk.lookup`, `wrk.connect` and `thread.addr`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Addr(pub SocketAddr);

impl UserData for Addr {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // wrk writes host and port numerically, without brackets.
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(format!("{}:{}", this.0.ip(), this.0.port()))
        });
    }
}

/// The port written in `url`'s authority, if any (`http://h:8080/` → 8080).
pub(super) fn written_port(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (_, port) = hostport.rsplit_once(':')?;
    (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !hostport.ends_with(']'))
        .then(|| port.to_string())
}

/// A new state with the script loaded and run once.
pub(super) fn new_state(src: &Source) -> Result<Lua, ScriptError> {
    let lua = Lua::new();
    let bug = |e: mlua::Error| ScriptError::Bug(e.to_string());
    let wrk: Table = lua
        .load(PRELUDE)
        .set_name("=archbench's wrk table")
        .eval()
        .map_err(bug)?;
    fill(&lua, &wrk, src).map_err(bug)?;
    lua.load(src.text.as_slice())
        .set_name(format!("@{}", src.name))
        .exec()
        .map_err(|e| ScriptError::Load(super::message(&e, &src.name)))?;
    Ok(lua)
}

fn fill(lua: &Lua, wrk: &Table, src: &Source) -> mlua::Result<()> {
    wrk.set("scheme", src.scheme.as_str())?;
    wrk.set("host", src.host.as_str())?;
    wrk.set("port", src.port.as_deref())?;
    wrk.set("path", src.path.as_str())?;
    let headers: Table = wrk.get("headers")?;
    for (name, value) in &src.headers {
        headers.set(name.as_str(), value.as_str())?;
    }
    wrk.set("lookup", lua.create_function(lookup)?)?;
    wrk.set(
        "connect",
        lua.create_function(|_, addr: mlua::UserDataRef<Addr>| {
            Ok(TcpStream::connect_timeout(&addr.0, CONNECT_TIMEOUT).is_ok())
        })?,
    )?;
    let globals = lua.globals();
    globals.set("wrk", wrk)?;
    // `require "wrk"` finds the same table, as in wrk.
    let loaded: Table = globals.get::<Table>("package")?.get("loaded")?;
    loaded.set("wrk", wrk)?;
    Ok(())
}

/// wrk.lookup(host, service): every address of the pair, as getaddrinfo gives them.
fn lookup(lua: &Lua, (host, service): (String, String)) -> mlua::Result<Table> {
    let port: u16 = match service.as_str() {
        "http" => 80,
        "https" => 443,
        s => s.parse().map_err(|_| {
            mlua::Error::RuntimeError(format!(
                "wrk.lookup: unknown service {s:?} (a port number, http or https)"
            ))
        })?,
    };
    let addrs = (host.as_str(), port).to_socket_addrs().map_err(|e| {
        mlua::Error::RuntimeError(format!("unable to resolve {host}:{service} {e}"))
    })?;
    let t = lua.create_table()?;
    for (k, a) in addrs.enumerate() {
        t.raw_set(k + 1, Addr(a))?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::written_port;

    #[test]
    fn the_port_is_the_one_written() {
        assert_eq!(
            written_port("http://127.0.0.1:8080/x").as_deref(),
            Some("8080")
        );
        assert_eq!(written_port("http://127.0.0.1/x:9").as_deref(), None);
        assert_eq!(written_port("http://u:p@h/").as_deref(), None);
        assert_eq!(written_port("http://[::1]:81").as_deref(), Some("81"));
        assert_eq!(written_port("http://[::1]/").as_deref(), None);
    }
}
