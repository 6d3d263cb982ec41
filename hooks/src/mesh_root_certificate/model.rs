//! The MeshRootCertificate as both cert-rotation hooks read it, the Secrets they handle, and the
//! rules they share: roles, providers, the valid combinations of MRCs in use, leaf validity.

use crate::contract::{
    lenient_string, null_as_default, owned_map, Object, ObjectMeta, RawString, Text,
};
use crate::meta::PreviousConditions;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use time::Duration;

pub const MRC_API: &str = "config.openservicemesh.io/v1alpha2";
pub const MRC_KEY: &str = "MeshRootCertificate.config.openservicemesh.io/v1alpha2";
pub const MANAGER_API: &str = "metahooks.dev/v1alpha1";
pub const MANAGER_KEY: &str = "CertificateManager.metahooks.dev/v1alpha1";
pub const SECRET_KEY: &str = "Secret.v1";
pub const CONFIGMAP_KEY: &str = "ConfigMap.v1";
pub use crate::meta::LABEL_MANAGED_BY as MANAGED_BY;
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";
const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MrcSpec {
    #[serde(default)]
    pub role: Value,
    #[serde(default)]
    pub trust_domain: Value,
    #[serde(default)]
    pub spiffe_enabled: Value,
    #[serde(default)]
    pub provider: Value,
}

#[derive(Debug, Default, Deserialize)]
pub struct MrcStatus<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_string")]
    pub state: Option<Text<'a>>,
    #[serde(default)]
    pub conditions: PreviousConditions,
}

pub type Mrc<'a> = Object<'a, MrcSpec, MrcStatus<'a>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Active,
    Passive,
    Inactive,
}

/// `spec.role`: absent or null is inactive; anything else unknown is an error naming it.
pub fn role(spec: &MrcSpec) -> Result<Role, String> {
    match &spec.role {
        Value::Null => Ok(Role::Inactive),
        Value::String(s) if s == "active" => Ok(Role::Active),
        Value::String(s) if s == "passive" => Ok(Role::Passive),
        Value::String(s) if s == "inactive" => Ok(Role::Inactive),
        Value::String(s) => Err(s.clone()),
        other => Err(other.to_string()),
    }
}

/// The trust domain, `cluster.local` when absent.
pub fn trust_domain(spec: &MrcSpec) -> &str {
    spec.trust_domain.as_str().unwrap_or(DEFAULT_TRUST_DOMAIN)
}

pub fn spiffe_enabled(spec: &MrcSpec) -> bool {
    spec.spiffe_enabled.as_bool().unwrap_or(false)
}

/// Which certificate provider an MRC names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    /// Tresor with the name of its CA Secret.
    Tresor(String),
    Vault,
    CertManager,
}

/// What is wrong with `spec.provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderProblem {
    Missing,
    Multiple,
    TresorWithoutSecretName,
}

impl ProviderProblem {
    pub fn message(self) -> &'static str {
        match self {
            ProviderProblem::Missing => {
                "spec.provider names no provider (tresor, vault or certManager)"
            }
            ProviderProblem::Multiple => "spec.provider names more than one provider",
            ProviderProblem::TresorWithoutSecretName => {
                "spec.provider.tresor.ca.secretRef.name is missing"
            }
        }
    }
}

/// The providers present in `spec.provider` (keys with a non-null value), in spec order.
pub fn provider_keys(provider: &Value) -> Vec<&'static str> {
    ["tresor", "vault", "certManager"]
        .into_iter()
        .filter(|k| provider.get(*k).is_some_and(|v| !v.is_null()))
        .collect()
}

pub fn provider(spec: &MrcSpec) -> Result<Provider, ProviderProblem> {
    match provider_keys(&spec.provider).as_slice() {
        [] => Err(ProviderProblem::Missing),
        ["tresor"] => tresor_secret_name(&spec.provider)
            .map(|n| Provider::Tresor(n.to_owned()))
            .ok_or(ProviderProblem::TresorWithoutSecretName),
        ["vault"] => Ok(Provider::Vault),
        ["certManager"] => Ok(Provider::CertManager),
        _ => Err(ProviderProblem::Multiple),
    }
}

/// `provider.tresor.ca.secretRef.name` when it is a non-empty string.
pub fn tresor_secret_name(provider: &Value) -> Option<&str> {
    provider
        .pointer("/tresor/ca/secretRef/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Why a set of MRCs in use cannot be rotated through (cert-rotation.md §3.1 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadCombination {
    NoMrcInUse,
    TooManyMrcsInUse,
    NoActiveMrc,
}

impl BadCombination {
    pub fn reason(self) -> &'static str {
        match self {
            BadCombination::NoMrcInUse => "NoMRCInUse",
            BadCombination::TooManyMrcsInUse => "TooManyMRCsInUse",
            BadCombination::NoActiveMrc => "NoActiveMRC",
        }
    }
}

/// Checks the roles of the MRCs in use (active or passive): valid sets are {A}, {A,P}, {A,A}.
pub fn check_combination(in_use: &[Role]) -> Result<(), BadCombination> {
    match in_use.len() {
        0 => Err(BadCombination::NoMrcInUse),
        1 | 2 if in_use.contains(&Role::Active) => Ok(()),
        1 | 2 => Err(BadCombination::NoActiveMrc),
        _ => Err(BadCombination::TooManyMrcsInUse),
    }
}

/// A Secret or a ConfigMap: string data (base64 for Secrets), type for Secrets. The values stay
/// in the request, as its raw JSON strings.
#[derive(Debug, Default, Deserialize)]
pub struct DataObject<'a> {
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub data: BTreeMap<Text<'a>, RawString<'a>>,
}

impl<'a> DataObject<'a> {
    /// A `data` value (base64 for a Secret).
    pub fn value(&self, key: &str) -> Option<Cow<'a, str>> {
        self.data.get(key).map(RawString::text)
    }
}

/// A Secret or ConfigMap in a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataObjectOut<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: MetaOut,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub data: BTreeMap<Text<'a>, DataValue<'a>>,
}

/// A value of a Secret or ConfigMap in a response: made by the hook, or written back as the
/// request had it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum DataValue<'a> {
    Made(String),
    Observed(RawString<'a>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaOut {
    pub name: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl<'a> DataObjectOut<'a> {
    /// An observed object returned as observed: type, data, labels and annotations; no
    /// server-set metadata, no ownerReferences, no last-applied annotation.
    pub fn observed(kind: &'static str, obj: &DataObject<'a>, namespace: &str) -> Self {
        let mut annotations = owned_map(&obj.metadata.annotations);
        annotations.remove(LAST_APPLIED);
        DataObjectOut {
            api_version: "v1",
            kind,
            metadata: MetaOut {
                name: obj.metadata.name.to_string(),
                namespace: obj.metadata.namespace_or(namespace).to_owned(),
                labels: owned_map(&obj.metadata.labels),
                annotations,
            },
            type_: obj.type_.clone(),
            data: obj
                .data
                .iter()
                .map(|(k, v)| (k.clone(), DataValue::Observed(*v)))
                .collect(),
        }
    }
}

/// Standard base64 with padding, as Secret data.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A leaf `validity`: one or more `<integer><h|m|s>` groups; under 10 minutes counts as 10.
pub fn parse_validity(s: &str) -> Option<Duration> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().ok()?;
        digits.clear();
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    if !digits.is_empty() || s.is_empty() {
        return None;
    }
    Some(Duration::seconds(total.max(600)))
}

/// The default leaf validity.
pub const DEFAULT_VALIDITY: Duration = Duration::hours(24);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_3_4_validity_groups_and_floor() {
        assert_eq!(parse_validity("24h"), Some(Duration::hours(24)));
        assert_eq!(parse_validity("1h30m"), Some(Duration::minutes(90)));
        assert_eq!(parse_validity("90s"), Some(Duration::minutes(10)));
        assert_eq!(parse_validity("0h"), Some(Duration::minutes(10)));
        for bad in ["", "24", "h", "1d", "1.5h", "-1h"] {
            assert_eq!(parse_validity(bad), None, "{bad}");
        }
    }

    #[test]
    fn rule_3_1_combinations() {
        use Role::*;
        assert_eq!(check_combination(&[]), Err(BadCombination::NoMrcInUse));
        assert_eq!(check_combination(&[Active]), Ok(()));
        assert_eq!(check_combination(&[Active, Passive]), Ok(()));
        assert_eq!(check_combination(&[Active, Active]), Ok(()));
        assert_eq!(
            check_combination(&[Passive]),
            Err(BadCombination::NoActiveMrc)
        );
        assert_eq!(
            check_combination(&[Passive, Passive]),
            Err(BadCombination::NoActiveMrc)
        );
        assert_eq!(
            check_combination(&[Active, Active, Passive]),
            Err(BadCombination::TooManyMrcsInUse)
        );
    }
}
