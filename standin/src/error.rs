//! API errors as the real server words them: every failure a client sees is a `Status` object
//! with the real `reason` and message, because archbench builds its one-line errors from them.

use serde_json::{json, Value};

use crate::resources::ResourceDef;

/// A failed API call: HTTP code, `Status.reason`, message, optional `details`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    fn name_details(res: &ResourceDef, name: &str) -> Value {
        let mut d = json!({"name": name, "kind": res.plural});
        if !res.group.is_empty() {
            d["group"] = json!(res.group);
        }
        d
    }

    /// `deployments.apps "x" not found`
    pub fn not_found(res: &ResourceDef, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.group_resource()),
        )
        .with_details(Self::name_details(res, name))
    }

    /// A path the server does not serve.
    pub fn no_route() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(res: &ResourceDef, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.group_resource()),
        )
        .with_details(Self::name_details(res, name))
    }

    /// An update whose `resourceVersion` precondition is stale.
    pub fn conflict(res: &ResourceDef, name: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                res.group_resource()
            ),
        )
        .with_details(Self::name_details(res, name))
    }

    /// 422 with field causes: `Deployment.apps "x" is invalid: spec.replicas: Invalid value: …`.
    pub fn invalid(res: &ResourceDef, name: &str, causes: &[(String, String)]) -> ApiError {
        let kind = if res.group.is_empty() {
            res.kind.to_string()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let message = if text.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", text[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", text.join(", "))
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f}))
            .collect();
        let mut details = Self::name_details(res, name);
        details["kind"] = json!(res.kind);
        details["causes"] = json!(causes);
        ApiError::new(422, "Invalid", message).with_details(details)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json, application/apply-patch+yaml, application/merge-patch+json, \
                 application/strategic-merge-patch+json (the stand-in does not read {content_type})"
            ),
        )
    }

    pub fn not_acceptable() -> ApiError {
        ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, \
             application/json;as=Table;v=v1;g=meta.k8s.io",
        )
    }

    /// The RBAC denial text: `deployments.apps "x" is forbidden: User "u" cannot patch resource
    /// "deployments" in API group "apps" in the namespace "nginx"`.
    pub fn forbidden(
        res: &ResourceDef,
        sub: Option<&str>,
        name: Option<&str>,
        verb: &str,
        ns: Option<&str>,
        user: &str,
    ) -> ApiError {
        let subject = match name {
            Some(n) => format!("{} \"{n}\"", res.group_resource()),
            None => res.group_resource(),
        };
        let resource = match sub {
            Some(s) => format!("{}/{s}", res.plural),
            None => res.plural.to_string(),
        };
        let scope = match ns {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        let mut details = json!({"kind": res.plural});
        if let Some(n) = name {
            details["name"] = json!(n);
        }
        if !res.group.is_empty() {
            details["group"] = json!(res.group);
        }
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
                res.group
            ),
        )
        .with_details(details)
    }

    /// A watch or list from a resourceVersion older than what the server keeps.
    pub fn expired(requested: u64, oldest: u64) -> ApiError {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// The `Status` object sent as a body or inside a watch `ERROR` event.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
