//! The CertificateManager spec, validated (cert-rotation.md §3.1 step 1).

use crate::json::Json;
use crate::mesh_root_certificate::model::{
    parse_validity, BadValidity, DEFAULT_VALIDITY, MAX_VALIDITY,
};
use crate::meta::{is_certificate_dns_name, is_dns1123_subdomain};
use foldhash::{HashSet, HashSetExt};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerSpec {
    pub config_map_name: String,
    pub certificates: Vec<Certificate>,
}

/// One leaf certificate to keep issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    pub secret_name: String,
    pub common_name: String,
    pub dns_names: Vec<String>,
    pub validity: Duration,
}

/// Validates the spec; the error names the first field in the way.
pub fn parse(spec: &Json) -> Result<ManagerSpec, String> {
    let config_map_name = match spec.get("trustBundle").and_then(|t| t.get("configMapName")) {
        Some(Json::String(s)) if is_dns1123_subdomain(s) => s.to_string(),
        Some(Json::String(_)) => {
            return Err("spec.trustBundle.configMapName is not a DNS-1123 subdomain".into())
        }
        _ => return Err("spec.trustBundle.configMapName is missing".into()),
    };
    let entries: &[Json] = match spec.get("certificates") {
        None | Some(Json::Null) => &[],
        Some(Json::Array(a)) => a,
        Some(_) => return Err("spec.certificates must be a list".into()),
    };
    let mut seen = HashSet::new();
    let mut certificates = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("spec.certificates[{i}]");
        let text = |k: &str| entry.get(k).and_then(Json::as_str);
        let secret_name = match text("secretName") {
            Some(s) if is_dns1123_subdomain(s) => s.to_owned(),
            Some(_) => return Err(format!("{at}.secretName is not a DNS-1123 name")),
            None => return Err(format!("{at}.secretName is missing")),
        };
        if !seen.insert(secret_name.clone()) {
            return Err(format!("{at}.secretName '{secret_name}' is used twice"));
        }
        let common_name = match text("commonName") {
            Some(s) if !s.is_empty() && s.len() <= 64 => s.to_owned(),
            Some(s) if !s.is_empty() => {
                return Err(format!("{at}.commonName is longer than 64 bytes"))
            }
            _ => return Err(format!("{at}.commonName is missing")),
        };
        let dns_names = match entry.get("dnsNames") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(names)) => {
                let mut out = Vec::with_capacity(names.len());
                for (j, n) in names.iter().enumerate() {
                    match n.as_str() {
                        Some(s) if is_certificate_dns_name(s) => out.push(s.to_owned()),
                        _ => return Err(format!("{at}.dnsNames[{j}] is not a DNS name")),
                    }
                }
                out
            }
            Some(_) => return Err(format!("{at}.dnsNames must be a list")),
        };
        // Without dnsNames the commonName is the leaf's DNS name (§3.4), which X.509 writes as
        // an IA5String: ASCII only. Refused here, where the message names the field, rather
        // than when issuing, which would blame the signing CA.
        if dns_names.is_empty() && !common_name.is_ascii() {
            return Err(format!(
                "{at}.commonName is not ASCII, and without dnsNames it is the leaf's DNS name"
            ));
        }
        let validity = match entry.get("validity") {
            None | Some(Json::Null) => DEFAULT_VALIDITY,
            Some(Json::String(s)) => parse_validity(s).map_err(|bad| match bad {
                BadValidity::NotADuration => {
                    format!("{at}.validity '{s}' is not a duration such as 24h or 1h30m")
                }
                BadValidity::TooLong => format!(
                    "{at}.validity '{s}' is longer than {}h",
                    MAX_VALIDITY.whole_hours()
                ),
            })?,
            Some(_) => {
                return Err(format!(
                    "{at}.validity is not a duration such as 24h or 1h30m"
                ))
            }
        };
        certificates.push(Certificate {
            secret_name,
            common_name,
            dns_names,
            validity,
        });
    }
    Ok(ManagerSpec {
        config_map_name,
        certificates,
    })
}

/// What the MRC sync reads of a CertificateManager's spec: the longest leaf validity it asks
/// for, if any parse (the MRC grace period, cert-rotation.md §4.3), worked out as the spec is
/// decoded, the rest skipped. Any JSON is taken, as a spec the manager's own sync refuses may
/// still be in the namespace: a spec that is not a map, or whose `certificates` is not a list,
/// asks for none; an entry that is not a map, or has no `validity` or a null one, for the
/// default; a `validity` that is not a duration string within bounds, for none. A key given
/// twice counts as its last, as everywhere a hook decodes a map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LongestValidity(pub Option<Duration>);

impl<'de> Deserialize<'de> for LongestValidity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Validities::Spec.deserialize(d).map(LongestValidity)
    }
}

/// The level of a manager spec [`LongestValidity`] reads a value at; each reads to the longest
/// validity its value asks for.
#[derive(Clone, Copy)]
enum Validities {
    Spec,
    Certificates,
    Entry,
    Validity,
}

impl Validities {
    /// What a value of a JSON type this level does not read asks for.
    fn other(self) -> Option<Duration> {
        match self {
            Validities::Entry => Some(DEFAULT_VALIDITY),
            _ => None,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Validities {
    type Value = Option<Duration>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Validities {
    type Value = Option<Duration>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (read, inner) = match self {
            Validities::Spec => (Some("certificates"), Validities::Certificates),
            Validities::Entry => (Some("validity"), Validities::Validity),
            _ => (None, self),
        };
        let mut longest = self.other();
        while let Some(is_read) = map.next_key_seed(KeyIs(read))? {
            if is_read {
                longest = map.next_value_seed(inner)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(longest)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if let Validities::Certificates = self {
            let mut longest = None;
            while let Some(entry) = seq.next_element_seed(Validities::Entry)? {
                longest = longest.max(entry);
            }
            return Ok(longest);
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(self.other())
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(match self {
            Validities::Validity => parse_validity(s).ok(),
            _ => self.other(),
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(match self {
            Validities::Validity => Some(DEFAULT_VALIDITY),
            _ => self.other(),
        })
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(self.other())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(self.other())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(self.other())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(self.other())
    }
}

/// A map key, read as whether it is the one key asked for (`None`: none is), not kept.
struct KeyIs(Option<&'static str>);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(self.0 == Some(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rule_3_1_valid_spec_parses_with_defaults() {
        let spec = parse(&Json::from(json!({"trustBundle": {"configMapName": "mesh-ca"},
            "certificates": [{"secretName": "web-tls", "commonName": "web.ns.cluster.local"},
                             {"secretName": "api-tls", "commonName": "api", "dnsNames": ["api.ns.svc", "*.api.ns"], "validity": "1h30m"}]})))
        .unwrap();
        assert_eq!(spec.config_map_name, "mesh-ca");
        assert_eq!(spec.certificates[0].validity, DEFAULT_VALIDITY);
        assert_eq!(spec.certificates[1].validity, Duration::minutes(90));
        assert_eq!(spec.certificates[1].dns_names.len(), 2);
        // A commonName that is not ASCII, beside dnsNames that are.
        let spec = parse(&Json::from(json!({"trustBundle": {"configMapName": "b"},
            "certificates": [{"secretName": "a", "commonName": "café", "dnsNames": ["cafe.ns.svc"]}]})))
        .unwrap();
        assert_eq!(spec.certificates[0].common_name, "café");
        // Names Kubernetes takes for a ConfigMap and a Secret: a part past 63 characters.
        let long = format!("{}.tls", "a".repeat(64));
        let spec = parse(&Json::from(json!({"trustBundle": {"configMapName": long},
            "certificates": [{"secretName": long, "commonName": "web"}]})))
        .unwrap();
        assert_eq!(spec.config_map_name, long);
        assert_eq!(spec.certificates[0].secret_name, long);
    }

    #[test]
    fn rule_3_1_invalid_specs_name_the_field() {
        let cases = [
            (json!({}), "spec.trustBundle.configMapName is missing"),
            (
                json!({"trustBundle": {"configMapName": "Bad_Name"}}),
                "spec.trustBundle.configMapName is not a DNS-1123 subdomain",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"commonName": "x"}]}),
                "spec.certificates[0].secretName is missing",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "Leaf_TLS", "commonName": "x"}]}),
                "spec.certificates[0].secretName is not a DNS-1123 name",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x"}, {"secretName": "a", "commonName": "y"}]}),
                "spec.certificates[1].secretName 'a' is used twice",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": ""}]}),
                "spec.certificates[0].commonName is missing",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x".repeat(65)}]}),
                "spec.certificates[0].commonName is longer than 64 bytes",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "café"}]}),
                "spec.certificates[0].commonName is not ASCII, and without dnsNames it is the leaf's DNS name",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x", "dnsNames": ["no way"]}]}),
                "spec.certificates[0].dnsNames[0] is not a DNS name",
            ),
            // A label past 63 characters, which a Secret's name may have and a DNS name may not.
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x", "dnsNames": [format!("*.{}.ns", "a".repeat(64))]}]}),
                "spec.certificates[0].dnsNames[0] is not a DNS name",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x", "validity": "1d"}]}),
                "spec.certificates[0].validity '1d' is not a duration such as 24h or 1h30m",
            ),
            (
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x", "validity": "99999999999h"}]}),
                "spec.certificates[0].validity '99999999999h' is longer than 87600h",
            ),
        ];
        for (spec, message) in cases {
            assert_eq!(parse(&Json::from(spec)), Err(message.to_owned()));
        }
    }

    #[test]
    fn rule_4_3_grace_is_the_longest_validity() {
        let longest = |spec: &str| serde_json::from_str::<LongestValidity>(spec).unwrap().0;
        let cases = [
            (
                r#"{"certificates": [{"validity": "2h"}, {}, {"validity": "bogus"}]}"#,
                Some(24),
            ),
            (
                r#"{"certificates": [{"validity": "2h"}, {"validity": "30h"}]}"#,
                Some(30),
            ),
            (
                r#"{"certificates": [{"validity": "2h"}, {"validity": null}]}"#,
                Some(24),
            ),
            // An entry that is not a map asks for the default, as one without a validity.
            (r#"{"certificates": [{"validity": "2h"}, 7]}"#, Some(24)),
            (r#"{"certificates": [{"validity": "2h"}, true]}"#, Some(24)),
            (r#"{"certificates": [{"validity": "2h"}, -1]}"#, Some(24)),
            (r#"{"certificates": [{"validity": "2h"}, 1.5]}"#, Some(24)),
            (r#"{"certificates": [{"validity": "2h"}, "x"]}"#, Some(24)),
            // A validity that is not a string asks for none; escapes are read.
            (
                r#"{"certificates": [{"validity": 48}, {"validity": "3\u0068"}]}"#,
                Some(3),
            ),
            // The last of a key given twice counts.
            (
                r#"{"certificates": [{"validity": "2h", "validity": "5h"}]}"#,
                Some(5),
            ),
            (
                r#"{"certificates": [{"validity": "5h"}], "certificates": []}"#,
                None,
            ),
            (
                r#"{"certificates": [], "trustBundle": {"certificates": [{}]}}"#,
                None,
            ),
            (r#"{"certificates": {"validity": "2h"}}"#, None),
            (r#"["certificates"]"#, None),
            (r#""spec""#, None),
            ("null", None),
            ("{}", None),
            // Too long is invalid, as "bogus" is: that manager issues nothing with it.
            (r#"{"certificates": [{"validity": "99999999999h"}]}"#, None),
        ];
        for (spec, hours) in cases {
            assert_eq!(longest(spec), hours.map(Duration::hours), "{spec}");
        }
    }
}
