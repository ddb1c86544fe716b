//! The object store: every object as JSON under (resource, namespace, name), one global
//! resourceVersion counter, and a bounded ring of change events that watches read from.
//!
//! All writes go through [`Store::write`], a read-modify-write under one lock, so metadata rules
//! live here once: uid and creationTimestamp are kept, `generation` counts spec changes of
//! workloads, a write that changes nothing keeps the old resourceVersion and sends no event
//! (server-side apply's idempotence depends on it), and an object marked for deletion goes
//! away when its last finalizer does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::ids;
use crate::resources::{self, Res};

pub type Obj = Arc<Value>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watches replay it. `prev` lets a filtered watch turn "stopped matching" into
/// DELETED and "started matching" into ADDED, as the real watch cache does.
#[derive(Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub res: Res,
    pub ns: String,
    pub obj: Obj,
    pub prev: Option<Obj>,
}

type Key = (&'static str, &'static str, String, String);

fn key(res: Res, ns: &str, name: &str) -> Key {
    (res.group, res.plural, ns.to_string(), name.to_string())
}

struct Inner {
    rv: u64,
    objects: BTreeMap<Key, (Res, Obj)>,
    ring: VecDeque<Event>,
    cap: usize,
    /// resourceVersion of the newest event pushed out of the ring (0: none yet); a watch from
    /// an older version has missed events and gets 410 Expired.
    dropped_through: u64,
}

/// What a write did.
pub enum Written {
    /// Nothing changed; the stored object (with its old resourceVersion).
    Unchanged(Obj),
    Created(Obj),
    Updated(Obj),
    /// The write removed the last finalizer of an object being deleted.
    Deleted(Obj),
}

impl Written {
    pub fn object(&self) -> &Obj {
        match self {
            Written::Unchanged(o)
            | Written::Created(o)
            | Written::Updated(o)
            | Written::Deleted(o) => o,
        }
    }

    pub fn into_object(self) -> Obj {
        match self {
            Written::Unchanged(o)
            | Written::Created(o)
            | Written::Updated(o)
            | Written::Deleted(o) => o,
        }
    }
}

pub struct Store {
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

/// Namespace of an object as stored ("" for cluster-scoped).
pub fn namespace_of(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Equal apart from what every write changes anyway (resourceVersion, managedFields times).
fn same_content(a: &Value, b: &Value) -> bool {
    fn stripped(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            md.remove("resourceVersion");
            if let Some(Value::Array(mf)) = md.get_mut("managedFields") {
                for e in mf {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    }
    stripped(a) == stripped(b)
}

impl Store {
    pub fn new(ring_capacity: usize) -> Store {
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                ring: VecDeque::new(),
                cap: ring_capacity.max(1),
                dropped_through: 0,
            }),
            notify: watch::channel(1).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere must not take the whole API server down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current (newest) resourceVersion.
    pub fn rv(&self) -> u64 {
        self.lock().rv
    }

    /// Wakes watchers and controllers without a change (a fault switch was flipped).
    pub fn poke(&self) {
        self.notify.send_modify(|_| ());
    }

    /// Wakes on every change (the value is the new resourceVersion).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    pub fn get(&self, res: Res, ns: &str, name: &str) -> Option<Obj> {
        self.lock()
            .objects
            .get(&key(res, ns, name))
            .map(|(_, o)| o.clone())
    }

    /// Objects of one resource (in one namespace, or all), ordered by namespace and name, with
    /// the resourceVersion they are consistent with.
    pub fn list(&self, res: Res, ns: Option<&str>) -> (Vec<Obj>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .iter()
            .filter(|((g, p, n, _), _)| {
                *g == res.group && *p == res.plural && ns.is_none_or(|ns| n == ns)
            })
            .map(|(_, (_, o))| o.clone())
            .collect();
        (items, inner.rv)
    }

    /// Every object, with its resource (garbage collection, namespace termination).
    pub fn all(&self) -> Vec<(Res, Obj)> {
        self.lock().objects.values().cloned().collect()
    }

    /// Read-modify-write of one object under the store lock. `f` sees the stored object (None
    /// when absent) and returns the new content, or None to leave it alone. `f` must not call
    /// back into the store.
    pub fn write(
        &self,
        res: Res,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Value>) -> ApiResult<Option<Value>>,
    ) -> ApiResult<Written> {
        let mut inner = self.lock();
        let k = key(res, ns, name);
        let old = inner.objects.get(&k).map(|(_, o)| o.clone());
        let Some(new) = f(old.as_deref())? else {
            return match old {
                Some(o) => Ok(Written::Unchanged(o)),
                None => Err(ApiError::not_found(res, name)),
            };
        };
        let out = Self::commit(&mut inner, res, k, old, new);
        let rv = inner.rv;
        drop(inner);
        self.notify.send_replace(rv);
        Ok(out)
    }

    /// Create; AlreadyExists when the name is taken.
    pub fn create(&self, res: Res, obj: Value) -> ApiResult<Obj> {
        let ns = namespace_of(&obj).to_string();
        let name = name_of(&obj).to_string();
        let w = self.write(res, &ns, &name, |old| match old {
            Some(_) => Err(ApiError::already_exists(res, &name)),
            None => Ok(Some(obj)),
        })?;
        Ok(w.into_object())
    }

    /// Update through a closure that edits a copy; NotFound when absent.
    pub fn update(
        &self,
        res: Res,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut Value) -> ApiResult<()>,
    ) -> ApiResult<Written> {
        self.write(res, ns, name, |old| {
            let Some(old) = old else {
                return Err(ApiError::not_found(res, name));
            };
            let mut new = old.clone();
            f(&mut new)?;
            Ok(Some(new))
        })
    }

    fn commit(inner: &mut Inner, res: Res, k: Key, old: Option<Obj>, mut new: Value) -> Written {
        if !new.get("metadata").is_some_and(Value::is_object) {
            new["metadata"] = json!({});
        }
        new["metadata"]["name"] = json!(k.3);
        if res.namespaced {
            new["metadata"]["namespace"] = json!(k.2);
        }
        new["apiVersion"] = json!(res.api_version());
        new["kind"] = json!(res.kind);
        match &old {
            Some(old) => {
                for f in ["uid", "creationTimestamp"] {
                    if let Some(v) = old.pointer(&format!("/metadata/{f}")) {
                        new["metadata"][f] = v.clone();
                    }
                }
                if res.generation {
                    let g = old
                        .pointer("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    let bump = old.get("spec") != new.get("spec");
                    new["metadata"]["generation"] = json!(g + i64::from(bump));
                }
                if same_content(old, &new) {
                    return Written::Unchanged(old.clone());
                }
            }
            None => {
                // admission may have chosen the uid already (a Job's selector names it)
                if new
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .is_none()
                {
                    new["metadata"]["uid"] = json!(ids::uid());
                }
                new["metadata"]["creationTimestamp"] = json!(clock::now());
                if res.generation {
                    new["metadata"]["generation"] = json!(1);
                }
            }
        }
        inner.rv += 1;
        let rv = inner.rv;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let non_empty = |p: &str| {
            new.pointer(p)
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
        };
        // a namespace also waits for its spec.finalizers (emptied by the namespace controller)
        let finalizers = non_empty("/metadata/finalizers")
            || (res.is(&resources::NAMESPACES) && non_empty("/spec/finalizers"));
        let obj: Obj = Arc::new(new);
        if deleting && !finalizers && old.is_some() {
            inner.objects.remove(&k);
            Self::push(inner, res, EventType::Deleted, obj.clone(), old);
            return Written::Deleted(obj);
        }
        inner.objects.insert(k, (res, obj.clone()));
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        Self::push(inner, res, kind, obj.clone(), old.clone());
        if old.is_some() {
            Written::Updated(obj)
        } else {
            Written::Created(obj)
        }
    }

    fn push(inner: &mut Inner, res: Res, kind: EventType, obj: Obj, prev: Option<Obj>) {
        let ns = namespace_of(&obj).to_string();
        inner.ring.push_back(Event {
            rv: inner.rv,
            kind,
            res,
            ns,
            obj,
            prev,
        });
        while inner.ring.len() > inner.cap {
            if let Some(e) = inner.ring.pop_front() {
                inner.dropped_through = e.rv;
            }
        }
    }

    /// Removes an object now (no finalizers, no grace); the DELETED event carries it with a
    /// fresh resourceVersion, as a real server sends it.
    pub fn remove(&self, res: Res, ns: &str, name: &str) -> Option<Obj> {
        let mut inner = self.lock();
        let (_, old) = inner.objects.remove(&key(res, ns, name))?;
        inner.rv += 1;
        let rv = inner.rv;
        let mut gone = (*old).clone();
        gone["metadata"]["resourceVersion"] = json!(rv.to_string());
        let gone = Arc::new(gone);
        Self::push(&mut inner, res, EventType::Deleted, gone.clone(), Some(old));
        drop(inner);
        self.notify.send_replace(rv);
        Some(gone)
    }

    /// Events newer than `rv`, oldest first; Err(oldest kept) when some were already dropped.
    pub fn events_after(&self, rv: u64) -> Result<Vec<Event>, ApiError> {
        let inner = self.lock();
        if rv < inner.dropped_through {
            let oldest = inner.ring.front().map_or(inner.rv, |e| e.rv);
            return Err(ApiError::expired(rv, oldest));
        }
        let start = inner.ring.partition_point(|e| e.rv <= rv);
        Ok(inner.ring.iter().skip(start).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, DEPLOYMENTS};

    fn deployment(replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "namespace": "nginx"}, "spec": {"replicas": replicas}})
    }

    #[test]
    fn metadata_rules() {
        let s = Store::new(100);
        let d = s.create(&DEPLOYMENTS, deployment(1)).unwrap();
        assert_eq!(d["metadata"]["generation"], 1);
        let uid = d["metadata"]["uid"].clone();
        let rv = d["metadata"]["resourceVersion"].clone();
        // identical content: nothing written, same resourceVersion
        let w = s.update(&DEPLOYMENTS, "nginx", "d", |_| Ok(())).unwrap();
        assert!(matches!(w, Written::Unchanged(_)));
        assert_eq!(w.object()["metadata"]["resourceVersion"], rv);
        // status only: new resourceVersion, same generation
        let w = s
            .update(&DEPLOYMENTS, "nginx", "d", |o| {
                o["status"] = json!({"replicas": 1});
                Ok(())
            })
            .unwrap();
        assert_ne!(w.object()["metadata"]["resourceVersion"], rv);
        assert_eq!(w.object()["metadata"]["generation"], 1);
        // spec: generation + 1, uid kept
        let w = s
            .update(&DEPLOYMENTS, "nginx", "d", |o| {
                o["spec"]["replicas"] = json!(2);
                Ok(())
            })
            .unwrap();
        assert_eq!(w.object()["metadata"]["generation"], 2);
        assert_eq!(w.object()["metadata"]["uid"], uid);
        assert!(s.create(&DEPLOYMENTS, deployment(1)).is_err());
    }

    #[test]
    fn last_finalizer_deletes() {
        let s = Store::new(100);
        let cm = json!({"metadata": {"name": "c", "namespace": "n", "finalizers": ["x"]}});
        s.create(&CONFIGMAPS, cm).unwrap();
        s.update(&CONFIGMAPS, "n", "c", |o| {
            o["metadata"]["deletionTimestamp"] = json!(clock::now());
            Ok(())
        })
        .unwrap();
        assert!(s.get(&CONFIGMAPS, "n", "c").is_some());
        let w = s
            .update(&CONFIGMAPS, "n", "c", |o| {
                o["metadata"]["finalizers"] = json!([]);
                Ok(())
            })
            .unwrap();
        assert!(matches!(w, Written::Deleted(_)));
        assert!(s.get(&CONFIGMAPS, "n", "c").is_none());
    }

    #[test]
    fn old_resource_version_expires() {
        let s = Store::new(3);
        let start = s.rv();
        for i in 0..5 {
            let cm = json!({"metadata": {"name": format!("c{i}"), "namespace": "n"}});
            s.create(&CONFIGMAPS, cm).unwrap();
        }
        let err = s.events_after(start).err().expect("events were dropped");
        assert_eq!(err.code, 410);
        assert_eq!(err.reason, "Expired");
        let recent = s.events_after(s.rv() - 2).unwrap();
        assert_eq!(recent.len(), 2);
        assert!(s.events_after(s.rv()).unwrap().is_empty());
    }
}
