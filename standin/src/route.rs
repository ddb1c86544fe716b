//! From an HTTP request to an answer: path → resource and verb, content negotiation, RBAC
//! faults, then the verb's handler. Everything a client sees as an error is a `Status`.

use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderMap, Method, Request};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::ops::{self, DeleteOpts, PatchKind, Propagation, WriteOpts};
use crate::reply::{self, Query, Resp};
use crate::resources::{self, Res};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::{Shared, USER};
use crate::table;
use crate::watch::{self, WatchParams};

/// Largest request body read (kubectl applies and ConfigMaps are far below it).
const BODY_LIMIT: usize = 32 << 20;

/// A resource path, parsed.
#[derive(Debug)]
pub struct Target {
    pub res: Res,
    pub ns: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
    /// Path after the subresource (pods/NAME/proxy/THIS).
    pub rest: String,
}

enum Route {
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiRoot,
    OpenApi(String),
    Resource(Target),
}

fn parse_path(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => return Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => return Some(Route::Health),
        ["api"] => return Some(Route::Api),
        ["apis"] => return Some(Route::Apis),
        ["openapi", "v3"] => return Some(Route::OpenApiRoot),
        ["openapi", "v3", rest @ ..] => return Some(Route::OpenApi(rest.join("/"))),
        ["apis", g] => return Some(Route::Group(g.to_string())),
        ["api", v] => return Some(Route::GroupVersion(String::new(), v.to_string())),
        ["apis", g, v] => return Some(Route::GroupVersion(g.to_string(), v.to_string())),
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let namespaced_resource = |p: &str| resources::find(group, version, p).filter(|r| r.namespaced);
    let (ns, rest) = match rest {
        ["namespaces", ns, r, tail @ ..] if namespaced_resource(r).is_some() => {
            (Some(ns.to_string()), [&[*r][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let res = resources::find(group, version, rest.first()?)?;
    Some(Route::Resource(Target {
        res,
        ns,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
        rest: rest.get(3..).map(|r| r.join("/")).unwrap_or_default(),
    }))
}

/// What the client accepts.
struct Accept {
    table: bool,
    aggregated: bool,
    json: bool,
}

fn accept(headers: &HeaderMap) -> Accept {
    let a = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    Accept {
        table: a.contains("as=table"),
        aggregated: a.contains("as=apigroupdiscoverylist"),
        json: a.is_empty() || a.contains("json") || a.contains("*/*") || a.contains("text/plain"),
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The field manager of a non-apply write: `fieldManager`, else the User-Agent's program name
/// (as the real server derives it), else "unknown".
fn manager(q: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

async fn read_body(req: Request<Incoming>) -> ApiResult<Value> {
    let ct = content_type(req.headers());
    let bytes = Limited::new(req.into_body(), BODY_LIMIT)
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?
        .to_bytes();
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        let yaml = if ct.contains("yaml") {
            " (the stand-in reads JSON bodies only; kubectl and kube send JSON)"
        } else {
            ""
        };
        ApiError::bad_request(format!("the request body is not valid JSON: {e}{yaml}"))
    })
}

/// The verb RBAC would check.
fn rbac_verb(method: &Method, t: &Target, q: &Query) -> &'static str {
    match (t.sub.as_deref(), method) {
        (Some("exec"), _) => "create",
        (Some("log"), _) => "get",
        (_, &Method::GET) if t.name.is_none() && q.flag("watch") => "watch",
        (_, &Method::GET) if t.name.is_none() => "list",
        (_, &Method::GET) => "get",
        (_, &Method::POST) => "create",
        (_, &Method::PUT) => "update",
        (_, &Method::PATCH) => "patch",
        (_, &Method::DELETE) if t.name.is_none() => "deletecollection",
        (_, &Method::DELETE) => "delete",
        _ => "get",
    }
}

/// Entry point for every request.
pub async fn handle(sh: Arc<Shared>, req: Request<Incoming>) -> Resp {
    match dispatch(sh, req).await {
        Ok(r) => r,
        Err(e) => reply::error(&e),
    }
}

async fn dispatch(sh: Arc<Shared>, req: Request<Incoming>) -> ApiResult<Resp> {
    let path = req.uri().path().to_string();
    let q = Query::parse(req.uri().query());
    let acc = accept(req.headers());
    if !acc.json {
        return Err(ApiError::not_acceptable());
    }
    let ct = content_type(req.headers());
    if ct.contains("protobuf")
        && matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
    {
        return Err(ApiError::unsupported_media_type(&ct));
    }
    let route = parse_path(&path).ok_or_else(ApiError::no_route)?;
    let get_only = |r: Resp| -> ApiResult<Resp> {
        if req.method() == Method::GET || req.method() == Method::HEAD {
            Ok(r)
        } else {
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({} {path})",
                req.method()
            )))
        }
    };
    match route {
        Route::Version => get_only(reply::json(200, &version(&sh))),
        Route::Health => get_only(reply::bytes(200, "text/plain; charset=utf-8", "ok")),
        Route::Api => get_only(if sh.opts.aggregated_discovery && acc.aggregated {
            reply::json_as(200, &resources::aggregated(true), reply::DISCOVERY_CT)
        } else {
            reply::json(
                200,
                &resources::api_versions(&format!("127.0.0.1:{}", sh.api_port)),
            )
        }),
        Route::Apis => get_only(if sh.opts.aggregated_discovery && acc.aggregated {
            reply::json_as(200, &resources::aggregated(false), reply::DISCOVERY_CT)
        } else {
            reply::json(200, &resources::api_group_list())
        }),
        Route::Group(g) => {
            let doc = resources::api_group(&g).ok_or_else(ApiError::no_route)?;
            get_only(reply::json(200, &doc))
        }
        Route::GroupVersion(g, v) => {
            let doc = resources::api_resource_list(&g, &v).ok_or_else(ApiError::no_route)?;
            get_only(reply::json(200, &doc))
        }
        Route::OpenApiRoot => get_only(reply::json(200, &resources::openapi_root())),
        Route::OpenApi(p) => {
            let doc = resources::openapi_group_version(&p, &sh.opts.git_version())
                .ok_or_else(ApiError::no_route)?;
            get_only(reply::json(200, &doc))
        }
        Route::Resource(t) => resource(sh, req, t, q, acc).await,
    }
}

fn version(sh: &Shared) -> Value {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    json!({
        "major": "1",
        "minor": sh.opts.minor,
        "gitVersion": sh.opts.git_version(),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-22T16:00:00Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": format!("linux/{arch}"),
    })
}

fn not_allowed(method: &Method, t: &Target) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method} {}{})",
        t.res.group_resource(),
        t.sub
            .as_deref()
            .map(|s| format!("/{s}"))
            .unwrap_or_default()
    ))
}

async fn resource(
    sh: Arc<Shared>,
    req: Request<Incoming>,
    t: Target,
    q: Query,
    acc: Accept,
) -> ApiResult<Resp> {
    let method = req.method().clone();
    let verb = rbac_verb(&method, &t, &q);
    if sh
        .faults
        .is_forbidden(verb, t.res.plural, t.res.group, t.sub.as_deref())
    {
        return Err(ApiError::forbidden(
            t.res,
            t.sub.as_deref(),
            t.name.as_deref(),
            verb,
            t.ns.as_deref(),
            USER,
        ));
    }
    if t.res.namespaced && t.ns.is_none() && t.name.is_some() {
        return Err(ApiError::no_route());
    }
    if let Some(sub) = t.sub.as_deref() {
        if t.res.sub(sub).is_none() {
            return Err(ApiError::no_route());
        }
    }
    if !t.res.stored {
        if method != Method::GET {
            return Err(not_allowed(&method, &t));
        }
        return crate::metrics::handle(&sh, &t, &q);
    }
    let ns = t.ns.clone().unwrap_or_default();
    let mgr = manager(&q, req.headers());
    let dry_run = q.get("dryRun").is_some_and(|v| !v.is_empty());
    match (method.clone(), t.name.as_deref(), t.sub.as_deref()) {
        (Method::GET, None, None) => list_or_watch(sh, &t, &q, &acc),
        (Method::GET, Some(name), None | Some("status")) => {
            let o = sh
                .store
                .get(t.res, &ns, name)
                .ok_or_else(|| ApiError::not_found(t.res, name))?;
            if acc.table {
                let rv = sh.store.rv();
                return Ok(reply::json_as(
                    200,
                    &table::table(t.res, &[o], rv),
                    reply::TABLE_CT,
                ));
            }
            Ok(reply::json(200, &o))
        }
        (_, Some(name), Some("log")) if method == Method::GET => {
            crate::logs::handle(&sh, &ns, name, &q)
        }
        (_, Some(name), Some("exec")) => Ok(crate::exec::handle(sh.clone(), req, &ns, name, &q)),
        (_, Some(name), Some("proxy")) => crate::proxy::handle(sh.clone(), req, &t, name).await,
        (_, Some(name), Some("scale")) => scale(&sh, req, &t, &ns, name, &mgr).await,
        (Method::POST, None, None) => {
            let body = read_body(req).await?;
            let o = ops::create(
                &sh,
                t.res,
                &ns,
                body,
                WriteOpts {
                    manager: &mgr,
                    subresource: None,
                    dry_run,
                },
            )?;
            Ok(reply::json(201, &o))
        }
        (Method::PUT, Some(name), sub @ (None | Some("status") | Some("finalize"))) => {
            let body = read_body(req).await?;
            if sub == Some("finalize") {
                let fin = body
                    .pointer("/spec/finalizers")
                    .cloned()
                    .unwrap_or(json!([]));
                let w = sh.store.update(t.res, "", name, |o| {
                    o["spec"]["finalizers"] = fin;
                    Ok(())
                })?;
                return Ok(reply::json(200, w.object()));
            }
            let o = ops::replace(
                &sh,
                t.res,
                &ns,
                name,
                body,
                WriteOpts {
                    manager: &mgr,
                    subresource: sub,
                    dry_run,
                },
            )?;
            Ok(reply::json(200, &o))
        }
        (Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let ct = content_type(req.headers());
            let kind = match ct.as_str() {
                "application/merge-patch+json" => PatchKind::Merge,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/json-patch+json" => PatchKind::Json,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                    PatchKind::Apply {
                        force: q.flag("force"),
                    }
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let body = read_body(req).await?;
            let mgr = if matches!(kind, PatchKind::Apply { .. }) {
                q.get("fieldManager").unwrap_or("").to_string()
            } else {
                mgr
            };
            let (o, created) = ops::patch(
                &sh,
                t.res,
                &ns,
                name,
                kind,
                body,
                WriteOpts {
                    manager: &mgr,
                    subresource: sub,
                    dry_run,
                },
            )?;
            Ok(reply::json(if created { 201 } else { 200 }, &o))
        }
        (Method::DELETE, Some(name), None) => {
            let d = delete_opts(req, &q, dry_run).await?;
            let o = ops::delete(&sh, t.res, &ns, name, &d)?;
            Ok(reply::json(200, &o))
        }
        (Method::DELETE, None, None) => {
            let d = delete_opts(req, &q, dry_run).await?;
            let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
            let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?;
            let (objs, _) = sh.store.list(t.res, t.ns.as_deref());
            let mut items = Vec::new();
            for o in objs
                .iter()
                .filter(|o| labels.matches_object(o) && fields.matches(o))
            {
                let name = crate::store::name_of(o);
                if let Ok(d) = ops::delete(&sh, t.res, crate::store::namespace_of(o), name, &d) {
                    items.push((*d).clone());
                }
            }
            Ok(reply::json(
                200,
                &json!({
                    "kind": t.res.list_kind(), "apiVersion": t.res.api_version(),
                    "metadata": {"resourceVersion": sh.store.rv().to_string()}, "items": items,
                }),
            ))
        }
        _ => Err(not_allowed(&method, &t)),
    }
}

async fn delete_opts(req: Request<Incoming>, q: &Query, dry_run: bool) -> ApiResult<DeleteOpts> {
    let body = read_body(req).await?;
    let policy = q.get("propagationPolicy").map(str::to_string).or_else(|| {
        body.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let propagation = match policy.as_deref() {
        None | Some("") | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )))
        }
    };
    let orphan = body.get("orphanDependents").and_then(Value::as_bool) == Some(true);
    Ok(DeleteOpts {
        grace: q
            .int("gracePeriodSeconds")?
            .or_else(|| body.get("gracePeriodSeconds").and_then(Value::as_i64)),
        propagation: if orphan {
            Propagation::Orphan
        } else {
            propagation
        },
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        dry_run: dry_run
            || body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
    })
}

fn list_or_watch(sh: Arc<Shared>, t: &Target, q: &Query, acc: &Accept) -> ApiResult<Resp> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?;
    if q.flag("watch") {
        let since = match q.get("resourceVersion") {
            None | Some("") | Some("0") => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resourceVersion {v:?}: the stand-in's versions are integers"
                ))
            })?),
        };
        // kube asks 290 s, kubectl 300..600 s; without one the real server picks 30..60 min
        let timeout = q.int("timeoutSeconds")?.filter(|t| *t > 0).unwrap_or(1800);
        return Ok(watch::start(
            sh.clone(),
            WatchParams {
                res: t.res,
                ns: t.ns.clone(),
                labels,
                fields,
                since,
                timeout: Duration::from_secs(timeout as u64),
                bookmarks: q.flag("allowWatchBookmarks"),
                as_table: acc.table,
            },
        ));
    }
    let (objs, rv) = sh.store.list(t.res, t.ns.as_deref());
    let items: Vec<_> = objs
        .into_iter()
        .filter(|o| labels.matches_object(o) && fields.matches(o))
        .collect();
    if acc.table {
        return Ok(reply::json_as(
            200,
            &table::table(t.res, &items, rv),
            reply::TABLE_CT,
        ));
    }
    Ok(reply::json(
        200,
        &json!({
            "kind": t.res.list_kind(),
            "apiVersion": t.res.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items.iter().map(|o| o.as_ref()).collect::<Vec<&Value>>(),
        }),
    ))
}

/// deployments/NAME/scale: an `autoscaling/v1` Scale over `spec.replicas`.
async fn scale(
    sh: &Shared,
    req: Request<Incoming>,
    t: &Target,
    ns: &str,
    name: &str,
    mgr: &str,
) -> ApiResult<Resp> {
    let method = req.method().clone();
    let as_scale = |o: &Value| {
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": ns, "uid": o["metadata"]["uid"],
                         "resourceVersion": o["metadata"]["resourceVersion"],
                         "creationTimestamp": o["metadata"]["creationTimestamp"]},
            "spec": {"replicas": o["spec"]["replicas"]},
            "status": {"replicas": o["status"]["replicas"].as_i64().unwrap_or(0),
                       "selector": crate::table::selector_query(o.pointer("/spec/selector"))},
        })
    };
    match method {
        Method::GET => {
            let o = sh
                .store
                .get(t.res, ns, name)
                .ok_or_else(|| ApiError::not_found(t.res, name))?;
            Ok(reply::json(200, &as_scale(&o)))
        }
        Method::PUT | Method::PATCH => {
            let ct = content_type(req.headers());
            let body = read_body(req).await?;
            let old = sh
                .store
                .get(t.res, ns, name)
                .ok_or_else(|| ApiError::not_found(t.res, name))?;
            let mut s = as_scale(&old);
            if method == Method::PUT {
                s = body;
            } else if ct == "application/json-patch+json" {
                return Err(ApiError::unsupported_media_type(&ct));
            } else {
                crate::patch::merge(&mut s, &body);
            }
            let replicas = s.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
            let (o, _) = ops::patch(
                sh,
                t.res,
                ns,
                name,
                PatchKind::Merge,
                json!({"spec": {"replicas": replicas}}),
                WriteOpts::by(mgr),
            )?;
            Ok(reply::json(200, &as_scale(&o)))
        }
        _ => Err(not_allowed(&method, t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let Some(Route::Resource(t)) = parse_path("/api/v1/namespaces/nginx/pods/p/exec") else {
            panic!("exec path")
        };
        assert_eq!(
            (
                t.res.plural,
                t.ns.as_deref(),
                t.name.as_deref(),
                t.sub.as_deref()
            ),
            ("pods", Some("nginx"), Some("p"), Some("exec"))
        );
        let Some(Route::Resource(t)) = parse_path("/api/v1/namespaces/nginx") else {
            panic!("ns")
        };
        assert_eq!(
            (t.res.plural, t.ns, t.name.as_deref()),
            ("namespaces", None, Some("nginx"))
        );
        let Some(Route::Resource(t)) = parse_path("/api/v1/namespaces/nginx/status") else {
            panic!("ns status")
        };
        assert_eq!(
            (t.name.as_deref(), t.sub.as_deref()),
            (Some("nginx"), Some("status"))
        );
        let Some(Route::Resource(t)) = parse_path("/apis/apps/v1/deployments") else {
            panic!("all ns")
        };
        assert_eq!((t.res.plural, t.ns), ("deployments", None));
        let Some(Route::Resource(t)) =
            parse_path("/api/v1/namespaces/n/pods/p:8080/proxy/start/now")
        else {
            panic!("proxy")
        };
        assert_eq!(
            (t.name.as_deref(), t.rest.as_str()),
            (Some("p:8080"), "start/now")
        );
        assert!(parse_path("/apis/nope/v1/things").is_none());
        assert!(matches!(parse_path("/apis/apps"), Some(Route::Group(_))));
    }
}
