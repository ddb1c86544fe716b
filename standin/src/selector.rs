//! Label and field selectors: the query-string syntax (`app=x,tier in (a,b),!canary`) and the
//! `LabelSelector` objects of workload specs.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Op::Eq(v), Some(x)) => x == v,
            (Op::Eq(_), None) => false,
            // `!=` and `notin` also match objects without the label, as in Kubernetes.
            (Op::NotEq(v), x) => x != Some(v.as_str()),
            (Op::In(vs), Some(x)) => vs.iter().any(|v| v == x),
            (Op::In(_), None) => false,
            (Op::NotIn(vs), x) => x.is_none_or(|x| !vs.iter().any(|v| v == x)),
            (Op::Exists, x) => x.is_some(),
            (Op::DoesNotExist, x) => x.is_none(),
            (Op::Gt(n), Some(x)) => x.parse::<i64>().is_ok_and(|x| x > *n),
            (Op::Lt(n), Some(x)) => x.parse::<i64>().is_ok_and(|x| x < *n),
            (Op::Gt(_) | Op::Lt(_), None) => false,
        }
    }
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn set_values(rest: &str, term: &str) -> ApiResult<Vec<String>> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(term))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn bad(term: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: found '{term}', expected: in, notin, =, ==, !=, gt, lt"
    ))
}

impl LabelSelector {
    /// The `labelSelector` query syntax.
    pub fn parse(s: &str) -> ApiResult<LabelSelector> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let req = if let Some(key) = term.strip_prefix('!') {
                Requirement {
                    key: key.trim().to_string(),
                    op: Op::DoesNotExist,
                }
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement {
                    key: k.trim().to_string(),
                    op: Op::NotEq(v.trim().to_string()),
                }
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement {
                    key: k.trim().to_string(),
                    op: Op::Eq(v.trim().to_string()),
                }
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                Requirement {
                    key: k.trim().to_string(),
                    op: Op::NotIn(set_values(rest, term)?),
                }
            } else if let Some((k, rest)) = term.split_once(" in ") {
                Requirement {
                    key: k.trim().to_string(),
                    op: Op::In(set_values(rest, term)?),
                }
            } else if term.contains(['(', ')', ' ']) {
                return Err(bad(term));
            } else {
                Requirement {
                    key: term.to_string(),
                    op: Op::Exists,
                }
            };
            if req.key.is_empty() {
                return Err(bad(term));
            }
            reqs.push(req);
        }
        Ok(LabelSelector { reqs })
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`). A missing selector
    /// matches nothing in workload specs; callers decide, this matches everything.
    pub fn from_object(sel: &Value) -> LabelSelector {
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Requirement {
                    key: k.clone(),
                    op: Op::Eq(v.as_str().unwrap_or_default().to_string()),
                });
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                if let Some(r) = expression(e) {
                    reqs.push(r);
                }
            }
        }
        LabelSelector { reqs }
    }

    /// A node selector term's `matchExpressions` (same operators plus Gt/Lt).
    pub fn from_expressions(exprs: &[Value]) -> LabelSelector {
        LabelSelector {
            reqs: exprs.iter().filter_map(expression).collect(),
        }
    }

    /// `spec.selector` of a Service or `nodeSelector`: a plain map, all must equal.
    pub fn from_map(m: &Value) -> LabelSelector {
        let reqs = m
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| Requirement {
                        key: k.clone(),
                        op: Op::Eq(v.as_str().unwrap_or_default().to_string()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        LabelSelector { reqs }
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Against a labels map (`metadata.labels`, possibly absent).
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        self.reqs
            .iter()
            .all(|r| r.matches(labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str)))
    }

    /// Against an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels"))
    }
}

fn expression(e: &Value) -> Option<Requirement> {
    let key = e.get("key")?.as_str()?.to_string();
    let values: Vec<String> = e
        .get("values")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let first_num = || values.first().and_then(|v| v.parse::<i64>().ok());
    let op = match e.get("operator")?.as_str()? {
        "In" => Op::In(values),
        "NotIn" => Op::NotIn(values),
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        "Gt" => Op::Gt(first_num()?),
        "Lt" => Op::Lt(first_num()?),
        _ => return None,
    };
    Some(Requirement { key, op })
}

/// A parsed field selector (`metadata.name=x,status.phase!=Running`).
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> ApiResult<FieldSelector> {
        let mut terms = Vec::new();
        for term in split_terms(s) {
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            terms.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    /// Fields are looked up by their dotted path; absent fields compare as "" (so
    /// `spec.nodeName=` selects unscheduled pods, as on a real server).
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(path, eq, want)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let got = match obj.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels() -> Value {
        json!({"app": "nginx-multiarch", "arch": "amd64", "tier": "web"})
    }

    #[test]
    fn label_selector_syntax() {
        let l = labels();
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m(""));
        assert!(m("app=nginx-multiarch"));
        assert!(m("app==nginx-multiarch,arch=amd64"));
        assert!(!m("arch=arm64"));
        assert!(m("arch!=arm64"));
        assert!(m("missing!=x"), "!= matches objects without the label");
        assert!(m("arch in (arm64, amd64)"));
        assert!(!m("arch notin (amd64)"));
        assert!(m("missing notin (x)"));
        assert!(m("tier"));
        assert!(!m("!tier"));
        assert!(m("!canary,arch in (amd64),app"));
        assert!(LabelSelector::parse("arch in amd64").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn label_selector_objects() {
        let l = labels();
        let sel = json!({"matchLabels": {"arch": "amd64"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]});
        assert!(LabelSelector::from_object(&sel).matches(Some(&l)));
        let sel =
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]});
        assert!(!LabelSelector::from_object(&sel).matches(Some(&l)));
        let node = json!({"cpus": "8"});
        let gt = [json!({"key": "cpus", "operator": "Gt", "values": ["4"]})];
        assert!(LabelSelector::from_expressions(&gt).matches(Some(&node)));
        assert!(LabelSelector::from_map(&json!({"arch": "amd64"})).matches(Some(&l)));
        assert!(!LabelSelector::from_map(&json!({"arch": "amd64"})).matches(None));
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "p", "namespace": "nginx"},
            "spec": {"nodeName": "aks-arm-0"}, "status": {"phase": "Running"}});
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&pod);
        assert!(m("metadata.name=p"));
        assert!(m("metadata.name==p,metadata.namespace=nginx"));
        assert!(!m("metadata.name=q"));
        assert!(m("status.phase!=Pending"));
        assert!(m("spec.nodeName=aks-arm-0"));
        assert!(!m("spec.nodeName="));
        assert!(FieldSelector::parse("nonsense").is_err());
        let unscheduled = json!({"metadata": {"name": "u"}, "spec": {}});
        assert!(FieldSelector::parse("spec.nodeName=")
            .unwrap()
            .matches(&unscheduled));
    }
}
