//! The one table of served resources. Routing, discovery (legacy and aggregated), the OpenAPI
//! v3 stubs and error messages all read it, so a resource is added in one place.

use serde_json::{json, Value};

/// A subresource as discovery lists it.
#[derive(Debug)]
pub struct SubDef {
    pub name: &'static str,
    /// Kind of the subresource's body (`Pod` for log, `Scale` for scale …).
    pub kind: &'static str,
    /// Group/version of that kind when it differs from the parent's (`Scale` is autoscaling/v1).
    pub group_version: Option<(&'static str, &'static str)>,
    pub verbs: &'static [&'static str],
}

/// A served resource.
#[derive(Debug)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [SubDef],
    /// `metadata.generation` counts spec changes (workloads), as on a real server.
    pub generation: bool,
    /// False for computed resources (metrics) that are never stored.
    pub stored: bool,
}

pub type Res = &'static ResourceDef;

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS: SubDef = SubDef {
    name: "status",
    kind: "",
    group_version: None,
    verbs: &["get", "patch", "update"],
};
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

macro_rules! res {
    ($g:expr, $v:expr, $plural:expr, $singular:expr, $kind:expr, $ns:expr, $short:expr, $cat:expr, $subs:expr, $gen:expr) => {
        ResourceDef {
            group: $g,
            version: $v,
            plural: $plural,
            singular: $singular,
            kind: $kind,
            namespaced: $ns,
            short_names: $short,
            categories: $cat,
            verbs: ALL_VERBS,
            subresources: $subs,
            generation: $gen,
            stored: true,
        }
    };
}

pub static NAMESPACES: ResourceDef = res!(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    false,
    &["ns"],
    &[],
    &[
        STATUS,
        SubDef {
            name: "finalize",
            kind: "Namespace",
            group_version: None,
            verbs: &["update"]
        }
    ],
    false
);
pub static NODES: ResourceDef = res!(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    false,
    &["no"],
    &[],
    &[STATUS],
    false
);
pub static PODS: ResourceDef = res!(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    true,
    &["po"],
    &["all"],
    &[
        STATUS,
        SubDef {
            name: "log",
            kind: "Pod",
            group_version: None,
            verbs: &["get"]
        },
        SubDef {
            name: "exec",
            kind: "PodExecOptions",
            group_version: None,
            verbs: &["create", "get"]
        },
        SubDef {
            name: "proxy",
            kind: "PodProxyOptions",
            group_version: None,
            verbs: PROXY_VERBS
        },
    ],
    false
);
pub static SERVICES: ResourceDef = res!(
    "",
    "v1",
    "services",
    "service",
    "Service",
    true,
    &["svc"],
    &["all"],
    &[
        STATUS,
        SubDef {
            name: "proxy",
            kind: "ServiceProxyOptions",
            group_version: None,
            verbs: PROXY_VERBS
        }
    ],
    false
);
pub static CONFIGMAPS: ResourceDef = res!(
    "",
    "v1",
    "configmaps",
    "configmap",
    "ConfigMap",
    true,
    &["cm"],
    &[],
    &[],
    false
);
pub static SECRETS: ResourceDef = res!(
    "",
    "v1",
    "secrets",
    "secret",
    "Secret",
    true,
    &[],
    &[],
    &[],
    false
);
pub static EVENTS: ResourceDef = res!(
    "",
    "v1",
    "events",
    "event",
    "Event",
    true,
    &["ev"],
    &[],
    &[],
    false
);
pub static SERVICEACCOUNTS: ResourceDef = res!(
    "",
    "v1",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    true,
    &["sa"],
    &[],
    &[],
    false
);
pub static ENDPOINTS: ResourceDef = res!(
    "",
    "v1",
    "endpoints",
    "endpoints",
    "Endpoints",
    true,
    &["ep"],
    &[],
    &[],
    false
);
pub static DEPLOYMENTS: ResourceDef = res!(
    "apps",
    "v1",
    "deployments",
    "deployment",
    "Deployment",
    true,
    &["deploy"],
    &["all"],
    &[
        STATUS,
        SubDef {
            name: "scale",
            kind: "Scale",
            group_version: Some(("autoscaling", "v1")),
            verbs: &["get", "patch", "update"]
        }
    ],
    true
);
pub static JOBS: ResourceDef = res!(
    "batch",
    "v1",
    "jobs",
    "job",
    "Job",
    true,
    &[],
    &["all"],
    &[STATUS],
    true
);
pub static POD_METRICS: ResourceDef = ResourceDef {
    group: "metrics.k8s.io",
    version: "v1beta1",
    plural: "pods",
    singular: "",
    kind: "PodMetrics",
    namespaced: true,
    short_names: &[],
    categories: &[],
    verbs: &["get", "list"],
    subresources: &[],
    generation: false,
    stored: false,
};
pub static NODE_METRICS: ResourceDef = ResourceDef {
    group: "metrics.k8s.io",
    version: "v1beta1",
    plural: "nodes",
    singular: "",
    kind: "NodeMetrics",
    namespaced: false,
    short_names: &[],
    categories: &[],
    verbs: &["get", "list"],
    subresources: &[],
    generation: false,
    stored: false,
};

pub static ALL: &[&ResourceDef] = &[
    &NAMESPACES,
    &NODES,
    &PODS,
    &SERVICES,
    &CONFIGMAPS,
    &SECRETS,
    &EVENTS,
    &SERVICEACCOUNTS,
    &ENDPOINTS,
    &DEPLOYMENTS,
    &JOBS,
    &POD_METRICS,
    &NODE_METRICS,
];

impl ResourceDef {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        group_version(self.group, self.version)
    }

    /// `pods` or `deployments.apps`, as error messages name resources.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s.name == "status")
    }

    pub fn sub(&self, name: &str) -> Option<&'static SubDef> {
        self.subresources.iter().find(|s| s.name == name)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Same resource (the table holds each once, so pointer identity would do; this reads
    /// better in a match).
    pub fn is(&self, other: &ResourceDef) -> bool {
        std::ptr::eq(self, other)
    }
}

pub fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

pub fn find(group: &str, version: &str, plural: &str) -> Option<Res> {
    ALL.iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Groups other than the core group, each with its versions, in table order.
fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in ALL.iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) if !vs.contains(&r.version) => vs.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(group, v), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0].clone()})
}

/// `GET /api`: `APIVersions`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `GET /apis`: `APIGroupList`.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = groups().iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/GROUP`: `APIGroup`.
pub fn api_group(group: &str) -> Option<Value> {
    let (g, vs) = groups().into_iter().find(|(g, _)| *g == group)?;
    let mut doc = group_doc(g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `GET /api/v1`, `GET /apis/GROUP/VERSION`: `APIResourceList`, subresources as `pods/log`.
pub fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in ALL
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            doc["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            doc["categories"] = json!(r.categories);
        }
        resources.push(doc);
        for s in r.subresources {
            let mut sub = json!({
                "name": format!("{}/{}", r.plural, s.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": if s.kind.is_empty() { r.kind } else { s.kind },
                "verbs": s.verbs,
            });
            if let Some((g, v)) = s.group_version {
                sub["group"] = json!(g);
                sub["version"] = json!(v);
            }
            resources.push(sub);
        }
    }
    if resources.is_empty() {
        return None;
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": resources,
    }))
}

/// The aggregated discovery document (`apidiscovery.k8s.io/v2`): `/api` holds the core group,
/// `/apis` the others.
pub fn aggregated(core: bool) -> Value {
    let gs: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        groups()
    };
    let items: Vec<Value> = gs
        .iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = ALL
                        .iter()
                        .filter(|r| r.group == *g && r.version == *v)
                        .map(|r| aggregated_resource(r))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(r: &ResourceDef) -> Value {
    let subs: Vec<Value> = r
        .subresources
        .iter()
        .map(|s| {
            let (g, v) = s.group_version.unwrap_or((r.group, r.version));
            json!({
                "subresource": s.name,
                "responseKind": {"group": g, "version": v, "kind": if s.kind.is_empty() { r.kind } else { s.kind }},
                "verbs": s.verbs,
            })
        })
        .collect();
    let mut doc = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    if !subs.is_empty() {
        doc["subresources"] = json!(subs);
    }
    doc
}

/// Path prefix of a group-version in OpenAPI v3 (`api/v1`, `apis/apps/v1`).
fn openapi_gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: one entry per group-version. kubectl's apply needs it to decide on
/// server-side field validation.
pub fn openapi_root() -> Value {
    let mut paths = serde_json::Map::new();
    for r in ALL {
        let p = openapi_gv_path(r.group, r.version);
        paths.entry(p.clone()).or_insert_with(
            || json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=STANDIN1")}),
        );
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/api/v1` …: a PATCH operation per resource with its group-version-kind and
/// a `fieldValidation` parameter, which is what kubectl 1.32 looks for; no schemas (kubectl
/// then leaves validation to the server).
pub fn openapi_group_version(path: &str, server_version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for r in ALL
        .iter()
        .filter(|r| openapi_gv_path(r.group, r.version) == path && r.stored)
    {
        let item = if r.namespaced {
            format!("/{path}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("/{path}/{}/{{name}}", r.plural)
        };
        paths.insert(
            item,
            json!({"patch": {
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
            }}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
    }))
}
