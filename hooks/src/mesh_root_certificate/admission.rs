//! `/mesh-root-certificate/validate` and `/mesh-root-certificate/mutate` (cert-rotation.md §6):
//! rules that need only the object under admission. Rules across MRCs are the sync hooks' job.

use super::model::{provider_keys, DEFAULT_TRUST_DOMAIN};
use crate::contract::{map_only, null_as_default, AdmissionRequest, AdmissionResponse, PatchOp};
use serde::Deserialize;
use serde_json::{json, Map, Value};

const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";
const ALLOW_DELETE: &str = "metahooks.dev/allow-delete";

/// The parts of an object under admission that the rules below read. The rest (managedFields,
/// labels, owner references) is skipped unread. The object and its metadata are maps (a 400
/// otherwise, as everywhere); each field read is taken as any JSON, and the rules say what
/// another type than the one expected means.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct Admitted {
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: AdmittedMeta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default)]
    pub status: Value,
}

/// The metadata the rules read: the name and namespace a denial names, and the annotations.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct AdmittedMeta {
    #[serde(default)]
    pub name: Value,
    #[serde(default)]
    pub namespace: Value,
    #[serde(default)]
    pub annotations: Value,
}

map_only! {
    impl['de] Admitted;
    impl['de] AdmittedMeta;
}

fn is_mrc(req: &AdmissionRequest<Admitted>) -> bool {
    req.kind.kind == "MeshRootCertificate"
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn non_empty(v: &Value, pointer: &str) -> bool {
    text(v, pointer).is_some_and(|s| !s.is_empty())
}

/// Role with absent/null read as inactive; `Err` carries an unknown value's text.
fn role_of(spec: &Value) -> Result<&str, String> {
    match spec.get("role") {
        None | Some(Value::Null) => Ok("inactive"),
        Some(Value::String(s)) if matches!(s.as_str(), "active" | "passive" | "inactive") => Ok(s),
        Some(Value::String(s)) => Err(s.clone()),
        Some(other) => Err(other.to_string()),
    }
}

/// The first broken provider field, if any (`provider-fields`).
fn provider_fields(provider: &Value, which: &str) -> Option<&'static str> {
    let p = provider.get(which).unwrap_or(&Value::Null);
    match which {
        "tresor" => {
            if !non_empty(p, "/ca/secretRef/name") {
                return Some("spec.provider.tresor.ca.secretRef.name must not be empty");
            }
            if !non_empty(p, "/ca/secretRef/namespace") {
                return Some("spec.provider.tresor.ca.secretRef.namespace must not be empty");
            }
            None
        }
        "vault" => {
            if !non_empty(p, "/host") {
                return Some("spec.provider.vault.host must not be empty");
            }
            if !non_empty(p, "/role") {
                return Some("spec.provider.vault.role must not be empty");
            }
            if !matches!(text(p, "/protocol"), Some("http" | "https")) {
                return Some("spec.provider.vault.protocol must be http or https");
            }
            if !p
                .get("port")
                .and_then(Value::as_u64)
                .is_some_and(|n| (1..=65535).contains(&n))
            {
                return Some("spec.provider.vault.port must be between 1 and 65535");
            }
            for (pointer, message) in [
                (
                    "/token/secretKeyRef/name",
                    "spec.provider.vault.token.secretKeyRef.name must not be empty",
                ),
                (
                    "/token/secretKeyRef/key",
                    "spec.provider.vault.token.secretKeyRef.key must not be empty",
                ),
                (
                    "/token/secretKeyRef/namespace",
                    "spec.provider.vault.token.secretKeyRef.namespace must not be empty",
                ),
            ] {
                if !non_empty(p, pointer) {
                    return Some(message);
                }
            }
            None
        }
        _ => {
            if !non_empty(p, "/issuerName") {
                return Some("spec.provider.certManager.issuerName must not be empty");
            }
            if !matches!(text(p, "/issuerKind"), Some("Issuer" | "ClusterIssuer")) {
                return Some(
                    "spec.provider.certManager.issuerKind must be Issuer or ClusterIssuer",
                );
            }
            if !non_empty(p, "/issuerGroup") {
                return Some("spec.provider.certManager.issuerGroup must not be empty");
            }
            None
        }
    }
}

fn create_rule(spec: &Value) -> Option<(&'static str, String)> {
    if !non_empty(spec, "/trustDomain") {
        return Some((
            "trust-domain-empty",
            "spec.trustDomain must not be empty".into(),
        ));
    }
    let provider = spec.get("provider").unwrap_or(&Value::Null);
    let named = |k: &str| provider.get(k).is_some_and(|v| !v.is_null());
    match provider_keys(named).as_slice() {
        [] => {
            return Some((
                "provider-missing",
                "spec.provider must name tresor, vault or certManager".into(),
            ))
        }
        [one] => {
            if let Some(message) = provider_fields(provider, one) {
                return Some(("provider-fields", message.into()));
            }
        }
        _ => {
            return Some((
                "provider-multiple",
                "spec.provider must name exactly one provider".into(),
            ))
        }
    }
    role_of(spec).err().map(|r| {
        (
            "role-invalid",
            format!("spec.role '{r}' must be active, passive or inactive"),
        )
    })
}

fn update_rule(old: &Value, new: &Value) -> Option<(&'static str, String)> {
    let field = |spec: &Value, k: &str| spec.get(k).cloned().unwrap_or(Value::Null);
    if field(old, "provider") != field(new, "provider") {
        return Some(("provider-immutable", "spec.provider cannot change".into()));
    }
    let domain = |spec: &Value| {
        text(spec, "/trustDomain")
            .unwrap_or(DEFAULT_TRUST_DOMAIN)
            .to_owned()
    };
    if domain(old) != domain(new) {
        return Some((
            "trust-domain-immutable",
            "spec.trustDomain cannot change".into(),
        ));
    }
    let spiffe = |spec: &Value| {
        spec.get("spiffeEnabled")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    if spiffe(old) != spiffe(new) {
        return Some((
            "spiffe-immutable",
            "spec.spiffeEnabled cannot change".into(),
        ));
    }
    let new_role = match role_of(new) {
        Ok(r) => r,
        Err(r) => {
            return Some((
                "role-invalid",
                format!("spec.role '{r}' must be active, passive or inactive"),
            ))
        }
    };
    match (role_of(old).unwrap_or("inactive"), new_role) {
        ("active", "inactive") => Some((
            "role-active-to-inactive",
            "spec.role cannot go from active to inactive; set it to passive first".into(),
        )),
        ("inactive", "active") => Some((
            "role-inactive-to-active",
            "spec.role cannot go from inactive to active; set it to passive first".into(),
        )),
        _ => None,
    }
}

fn delete_rule(req: &AdmissionRequest<Admitted>, old: &Admitted) -> Option<(&'static str, String)> {
    let allowed_by_annotation = old
        .metadata
        .annotations
        .get(ALLOW_DELETE)
        .and_then(Value::as_str)
        == Some("true");
    if req.user_info.username == NAMESPACE_CONTROLLER || allowed_by_annotation {
        return None;
    }
    let status = &old.status;
    let in_use_condition = status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type") == Some(&json!("InUse")) && c.get("status") == Some(&json!("True"))
            })
        });
    let busy_state = matches!(
        text(status, "/state"),
        Some("active" | "issuingRollout" | "validatingRollout" | "issuingRollback")
    );
    if role_of(&old.spec) == Ok("active") || in_use_condition || busy_state {
        Some((
            "delete-in-use",
            "it is active or in use; make it inactive first, or annotate it metahooks.dev/allow-delete: \"true\"".into(),
        ))
    } else {
        None
    }
}

/// The validating webhook: only the first failing rule is reported.
pub fn validate(req: &AdmissionRequest<Admitted>) -> AdmissionResponse {
    if !is_mrc(req) {
        return AdmissionResponse::allow(&req.uid);
    }
    let object = req.object.as_ref().or(req.old_object.as_ref());
    let meta = |own: fn(&AdmittedMeta) -> &Value, given: &Option<String>| {
        object
            .and_then(|o| own(&o.metadata).as_str())
            .or(given.as_deref())
            .unwrap_or_default()
            .to_owned()
    };
    let failed = match req.operation.as_str() {
        "CREATE" => req.object.as_ref().and_then(|o| create_rule(&o.spec)),
        // A change of status or metadata alone passes, even of an MRC stored with a spec these
        // rules would refuse now (one created before the webhook was installed).
        "UPDATE" => match (&req.old_object, &req.object) {
            (Some(old), Some(new)) if old.spec != new.spec => update_rule(&old.spec, &new.spec),
            _ => None,
        },
        "DELETE" => req
            .old_object
            .as_ref()
            .and_then(|old| delete_rule(req, old)),
        _ => None,
    };
    match failed {
        None => AdmissionResponse::allow(&req.uid),
        Some((key, explanation)) => AdmissionResponse::deny(
            &req.uid,
            403,
            format!(
                "{key}: MeshRootCertificate {}/{}: {explanation}",
                meta(|m| &m.namespace, &req.namespace),
                meta(|m| &m.name, &req.name)
            ),
        ),
    }
}

/// The mutating webhook: defaults for absent fields on CREATE.
pub fn mutate(req: &AdmissionRequest<Admitted>) -> AdmissionResponse {
    let allow = AdmissionResponse::allow(&req.uid);
    if !is_mrc(req) || req.operation != "CREATE" {
        return allow;
    }
    let Some(object) = req.object.as_ref() else {
        return allow;
    };
    let defaults = [
        ("role", json!("inactive")),
        ("trustDomain", json!(DEFAULT_TRUST_DOMAIN)),
        ("spiffeEnabled", json!(false)),
    ];
    let ops = match &object.spec {
        Value::Object(spec) => defaults
            .into_iter()
            .filter(|(k, _)| spec.get(*k).is_none_or(Value::is_null))
            .map(|(k, v)| PatchOp::add(format!("/spec/{k}"), v))
            .collect(),
        _ => {
            let spec: Map<String, Value> = defaults
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            vec![PatchOp::add("/spec", Value::Object(spec))]
        }
    };
    allow.with_patch(&ops)
}
