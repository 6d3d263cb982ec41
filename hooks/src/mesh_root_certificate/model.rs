//! The MeshRootCertificate as both cert-rotation hooks read it, the Secrets they handle, and the
//! rules they share: roles, providers, the valid combinations of MRCs in use, leaf validity.

use crate::contract::{
    lenient_string, map_only, null_as_default, MetaOut, Named, Object, ObjectMeta, RawString, Text,
};
use crate::json::Json;
use crate::meta::{is_dns1123_subdomain, PreviousConditions};
use crate::pki::LeafDigest;
use base64::Engine;
use serde::{Deserialize, Serialize};
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

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct MrcSpec<'a> {
    #[serde(default, borrow)]
    pub role: Json<'a>,
    #[serde(default, borrow)]
    pub trust_domain: Json<'a>,
    #[serde(default, borrow)]
    pub spiffe_enabled: Json<'a>,
    #[serde(default, borrow)]
    pub provider: Json<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct MrcStatus<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_string")]
    pub state: Option<Text<'a>>,
    #[serde(default)]
    pub conditions: PreviousConditions,
}

map_only! {
    impl['de, 'a] MrcSpec<'a> where ['de: 'a];
    impl['de, 'a] MrcStatus<'a> where ['de: 'a];
}

pub type Mrc<'a> = Object<'a, MrcSpec<'a>, MrcStatus<'a>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Active,
    Passive,
    Inactive,
}

/// `spec.role`: absent or null is inactive; anything else unknown is an error naming it.
pub fn role(spec: &MrcSpec) -> Result<Role, String> {
    match &spec.role {
        Json::Null => Ok(Role::Inactive),
        Json::String(s) if s == "active" => Ok(Role::Active),
        Json::String(s) if s == "passive" => Ok(Role::Passive),
        Json::String(s) if s == "inactive" => Ok(Role::Inactive),
        Json::String(s) => Err(s.to_string()),
        other => Err(serde_json::to_string(other).unwrap_or_default()),
    }
}

/// The trust domain, `cluster.local` when absent.
pub fn trust_domain<'s>(spec: &'s MrcSpec) -> &'s str {
    spec.trust_domain.as_str().unwrap_or(DEFAULT_TRUST_DOMAIN)
}

pub fn spiffe_enabled(spec: &MrcSpec) -> bool {
    matches!(spec.spiffe_enabled, Json::Bool(true))
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
    /// A name the API server takes for no Secret: none can be generated or supplied.
    TresorSecretNameInvalid,
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
            ProviderProblem::TresorSecretNameInvalid => {
                "spec.provider.tresor.ca.secretRef.name is not a Secret name (a DNS-1123 \
                 subdomain), so no CA Secret can have it"
            }
        }
    }
}

/// The providers `spec.provider` names, in spec order: those for which `named` (the key is
/// present with a non-null value) holds.
pub fn provider_keys(named: impl Fn(&str) -> bool) -> Vec<&'static str> {
    ["tresor", "vault", "certManager"]
        .into_iter()
        .filter(|k| named(k))
        .collect()
}

pub fn provider(spec: &MrcSpec) -> Result<Provider, ProviderProblem> {
    let named = |k: &str| spec.provider.get(k).is_some_and(|v| !v.is_null());
    match provider_keys(named).as_slice() {
        [] => Err(ProviderProblem::Missing),
        ["tresor"] => match tresor_secret_name(&spec.provider) {
            Some(n) if is_dns1123_subdomain(n) => Ok(Provider::Tresor(n.to_owned())),
            Some(_) => Err(ProviderProblem::TresorSecretNameInvalid),
            None => Err(ProviderProblem::TresorWithoutSecretName),
        },
        ["vault"] => Ok(Provider::Vault),
        ["certManager"] => Ok(Provider::CertManager),
        _ => Err(ProviderProblem::Multiple),
    }
}

/// `provider.tresor.ca.secretRef.name` when it is a non-empty string.
pub fn tresor_secret_name<'s>(provider: &'s Json) -> Option<&'s str> {
    ["tresor", "ca", "secretRef", "name"]
        .into_iter()
        .try_fold(provider, |json, key| json.get(key))
        .and_then(Json::as_str)
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
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct DataObject<'a> {
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub data: BTreeMap<Text<'a>, RawString<'a>>,
    /// For a leaf Secret, its values' digest once cert-rotation checked it.
    #[serde(skip)]
    pub leaf_digest: LeafDigest,
}

map_only! {
    impl['de, 'a] DataObject<'a> where ['de: 'a];
}

impl Named for DataObject<'_> {
    fn name(&self) -> Option<&str> {
        Some(&self.metadata.name)
    }
}

impl<'a> DataObject<'a> {
    /// A `data` value (base64 for a Secret).
    pub fn value(&self, key: &str) -> Option<Cow<'_, str>> {
        self.data.get(key).map(RawString::text)
    }
}

/// A Secret or ConfigMap in a response.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataObjectOut<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: MetaOut<'a>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub data: BTreeMap<Text<'a>, DataValue<'a>>,
}

/// A value of a Secret or ConfigMap in a response: made by the hook, or already JSON text
/// (written back as the request had it, or made once for many objects, see
/// [`DataValue::shared`]).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DataValue<'a> {
    Made(String),
    Raw(RawString<'a>),
}

impl DataValue<'static> {
    /// A value the hook makes once and writes into many objects of one response (the trust
    /// bundle into every leaf Secret): escaped as JSON once, then copied as it is.
    pub fn shared(text: String) -> Self {
        match RawString::written(&text) {
            Some(raw) => DataValue::Raw(raw),
            None => DataValue::Made(text),
        }
    }
}

impl<'a> DataObjectOut<'a> {
    /// An observed object returned as observed: type, data, labels and annotations; no
    /// server-set metadata, no ownerReferences, no last-applied annotation.
    pub fn observed(kind: &'static str, obj: &'a DataObject<'a>, namespace: &'a str) -> Self {
        DataObjectOut {
            api_version: "v1",
            kind,
            metadata: MetaOut::observed(&obj.metadata, namespace, |k| k == LAST_APPLIED),
            type_: obj.type_.clone(),
            data: obj
                .data
                .iter()
                .map(|(k, v)| (k.clone(), DataValue::Raw(v.clone())))
                .collect(),
        }
    }
}

/// Standard base64 with padding, as Secret data.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The longest leaf `validity` accepted: the lifetime of the CAs the MRC hook makes (87600h).
/// A longer one is an invalid spec, which also keeps every leaf's end inside the dates a
/// certificate can hold.
pub const MAX_VALIDITY: Duration = crate::pki::CA_VALIDITY;

/// Why a `validity` text is not a leaf validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadValidity {
    /// Not one or more `<integer><h|m|s>` groups.
    NotADuration,
    /// Longer than [`MAX_VALIDITY`].
    TooLong,
}

/// A leaf `validity`: one or more `<integer><h|m|s>` groups; under 10 minutes counts as 10, over
/// [`MAX_VALIDITY`] is refused.
pub fn parse_validity(s: &str) -> Result<Duration, BadValidity> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(BadValidity::NotADuration),
        };
        if digits.is_empty() {
            return Err(BadValidity::NotADuration);
        }
        // Digits only, so only a number too large for an i64 fails to parse.
        let n: i64 = digits.parse().map_err(|_| BadValidity::TooLong)?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|seconds| total.checked_add(seconds))
            .ok_or(BadValidity::TooLong)?;
    }
    if !digits.is_empty() || s.is_empty() {
        return Err(BadValidity::NotADuration);
    }
    let validity = Duration::seconds(total.max(600));
    if validity > MAX_VALIDITY {
        return Err(BadValidity::TooLong);
    }
    Ok(validity)
}

/// The default leaf validity.
pub const DEFAULT_VALIDITY: Duration = Duration::hours(24);

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> MrcSpec<'_> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn rule_4_2_spec_fields_are_read_from_any_json_shape() {
        assert_eq!(role(&spec("{}")), Ok(Role::Inactive));
        assert_eq!(role(&spec(r#"{"role": null}"#)), Ok(Role::Inactive));
        assert_eq!(role(&spec(r#"{"role": "active"}"#)), Ok(Role::Active));
        assert_eq!(role(&spec(r#"{"role": "standby"}"#)), Err("standby".into()));
        assert_eq!(role(&spec(r#"{"role": 5}"#)), Err("5".into()));
        assert_eq!(
            role(&spec(r#"{"role": {"b": 1, "a": [true]}}"#)),
            Err(r#"{"a":[true],"b":1}"#.into())
        );
        assert!(spiffe_enabled(&spec(r#"{"spiffeEnabled": true}"#)));
        assert!(!spiffe_enabled(&spec(r#"{"spiffeEnabled": "true"}"#)));
        assert!(!spiffe_enabled(&spec("{}")));
        assert_eq!(trust_domain(&spec(r#"{"trustDomain": "td"}"#)), "td");
        assert_eq!(
            trust_domain(&spec(r#"{"trustDomain": 5}"#)),
            DEFAULT_TRUST_DOMAIN
        );
        let tresor = r#"{"provider": {"tresor": {"ca": {"secretRef": {"name": "osm-ca"}}}}}"#;
        assert_eq!(
            provider(&spec(tresor)),
            Ok(Provider::Tresor("osm-ca".into()))
        );
        let cases = [
            (
                r#"{"provider": {"tresor": null, "vault": {}}}"#,
                Ok(Provider::Vault),
            ),
            (
                r#"{"provider": {"certManager": {}}}"#,
                Ok(Provider::CertManager),
            ),
            ("{}", Err(ProviderProblem::Missing)),
            (
                r#"{"provider": {"tresor": {}, "vault": {}}}"#,
                Err(ProviderProblem::Multiple),
            ),
            (
                r#"{"provider": {"tresor": {"ca": {"secretRef": {"name": ""}}}}}"#,
                Err(ProviderProblem::TresorWithoutSecretName),
            ),
            (
                r#"{"provider": {"tresor": {"ca": {"secretRef": {"name": "Osm_CA"}}}}}"#,
                Err(ProviderProblem::TresorSecretNameInvalid),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(provider(&spec(text)), want, "{text}");
        }
    }

    #[test]
    fn rule_3_4_validity_groups_and_floor() {
        assert_eq!(parse_validity("24h"), Ok(Duration::hours(24)));
        assert_eq!(parse_validity("1h30m"), Ok(Duration::minutes(90)));
        assert_eq!(parse_validity("90s"), Ok(Duration::minutes(10)));
        assert_eq!(parse_validity("0h"), Ok(Duration::minutes(10)));
        for bad in ["", "24", "h", "1d", "1.5h", "-1h", "1hm"] {
            assert_eq!(parse_validity(bad), Err(BadValidity::NotADuration), "{bad}");
        }
    }

    /// Up to ten years; longer, even past what an i64 of seconds holds, is refused as too long
    /// instead of overflowing the leaf's end date.
    #[test]
    fn validity_at_most_ten_years() {
        assert_eq!(parse_validity("87600h"), Ok(MAX_VALIDITY));
        assert_eq!(parse_validity("87599h60m"), Ok(MAX_VALIDITY));
        for long in [
            "87600h1s",
            "99999999999h",
            "9223372036854775807s",
            "2562047788015216h",
            "99999999999999999999h",
        ] {
            assert_eq!(parse_validity(long), Err(BadValidity::TooLong), "{long}");
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
