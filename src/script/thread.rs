//! The thread object of wrk's setup(): `thread.addr`, `thread:get`, `thread:set`,
//! `thread:stop()`, and the copying of plain values between two Lua states.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mlua::{Lua, MetaMethod, UserData, UserDataMethods, Value, WeakLua};

use super::state::Addr;

/// What the setup state and a worker share of one thread.
pub(super) struct ThreadShared {
    /// The thread's own state; weak, so its own `wrk.thread` does not keep it alive (the
    /// session holds it).
    pub lua: WeakLua,
    pub addr: Mutex<SocketAddr>,
    /// thread:stop() was called.
    pub stop: AtomicBool,
}

impl ThreadShared {
    pub fn addr(&self) -> SocketAddr {
        *self.addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn state(&self) -> mlua::Result<Lua> {
        self.lua
            .try_upgrade()
            .ok_or_else(|| mlua::Error::RuntimeError("the thread's state is gone".into()))
    }
}

#[derive(Clone)]
pub(super) struct ThreadHandle(pub Arc<ThreadShared>);

impl UserData for ThreadHandle {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("get", |lua, this, name: String| {
            let own = this.0.state()?;
            let v: Value = own.globals().get(name.as_str())?;
            Plain::from_value(&v, &name, 0)?.into_value(lua)
        });
        methods.add_method("set", |_, this, (name, value): (String, Value)| {
            let plain = Plain::from_value(&value, &name, 0)?;
            let own = this.0.state()?;
            own.globals().set(name, plain.into_value(&own)?)
        });
        methods.add_method("stop", |_, this, ()| {
            this.0.stop.store(true, Ordering::Relaxed);
            Ok(())
        });
        methods.add_meta_method(MetaMethod::Index, |_, this, key: String| {
            match key.as_str() {
                "addr" => Ok(Some(Addr(this.0.addr()))),
                other => Err(mlua::Error::RuntimeError(format!(
                    "thread has no field '{other}' (wrk's thread has addr, get, set, stop)"
                ))),
            }
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |_, this, (key, value): (String, Value)| {
                let addr = match (&key[..], &value) {
                    ("addr", Value::UserData(ud)) => ud.borrow::<Addr>().ok().map(|a| a.0),
                    _ => None,
                };
                match addr {
                    Some(a) => {
                        *this.0.addr.lock().unwrap_or_else(|p| p.into_inner()) = a;
                        Ok(())
                    }
                    None => Err(mlua::Error::RuntimeError(format!(
                        "cannot set '{key}' to a {} on thread (only thread.addr, to an address of wrk.lookup)",
                        value.type_name()
                    ))),
                }
            },
        );
    }
}

/// Nesting of tables copied by get/set beyond which the copy is refused (a cycle).
const MAX_DEPTH: usize = 32;

/// A value that can pass between states: what wrk's thread:get/set transfer.
enum Plain {
    Nil,
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(Vec<u8>),
    Table(Vec<(Plain, Plain)>),
}

impl Plain {
    fn from_value(v: &Value, name: &str, depth: usize) -> mlua::Result<Plain> {
        Ok(match v {
            Value::Nil => Plain::Nil,
            Value::Boolean(b) => Plain::Bool(*b),
            Value::Integer(i) => Plain::Int(*i),
            Value::Number(n) => Plain::Num(*n),
            Value::String(s) => Plain::Str(s.as_bytes().to_vec()),
            Value::Table(t) if depth < MAX_DEPTH => {
                let mut pairs = Vec::new();
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pairs.push((
                        Plain::from_value(&k, name, depth + 1)?,
                        Plain::from_value(&v, name, depth + 1)?,
                    ));
                }
                Plain::Table(pairs)
            }
            other => {
                return Err(mlua::Error::RuntimeError(format!(
                    "thread:get/set of '{name}': only booleans, nil, numbers, strings and tables of them pass between threads, not a {}",
                    other.type_name()
                )))
            }
        })
    }

    fn into_value(self, lua: &Lua) -> mlua::Result<Value> {
        Ok(match self {
            Plain::Nil => Value::Nil,
            Plain::Bool(b) => Value::Boolean(b),
            Plain::Int(i) => Value::Number(i as f64),
            Plain::Num(n) => Value::Number(n),
            Plain::Str(s) => Value::String(lua.create_string(s)?),
            Plain::Table(pairs) => {
                let t = lua.create_table()?;
                for (k, v) in pairs {
                    t.raw_set(k.into_value(lua)?, v.into_value(lua)?)?;
                }
                Value::Table(t)
            }
        })
    }
}
