//! The CertificateManager spec, validated (cert-rotation.md §3.1 step 1).

use crate::json::Json;
use crate::mesh_root_certificate::model::{
    parse_validity, BadValidity, DEFAULT_VALIDITY, MAX_VALIDITY,
};
use crate::meta::is_dns1123_subdomain;
use foldhash::{HashSet, HashSetExt};
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

/// A DNS name in a certificate: a DNS-1123 subdomain, optionally with a leading `*.`.
fn is_dns_name(s: &str) -> bool {
    is_dns1123_subdomain(s.strip_prefix("*.").unwrap_or(s))
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
                        Some(s) if is_dns_name(s) => out.push(s.to_owned()),
                        _ => return Err(format!("{at}.dnsNames[{j}] is not a DNS name")),
                    }
                }
                out
            }
            Some(_) => return Err(format!("{at}.dnsNames must be a list")),
        };
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

/// The longest leaf validity a manager spec asks for, if any parse (the MRC grace period).
pub fn longest_validity(spec: &Json) -> Option<Duration> {
    spec.get("certificates")?
        .as_array()?
        .iter()
        .filter_map(|c| match c.get("validity") {
            None | Some(Json::Null) => Some(DEFAULT_VALIDITY),
            Some(v) => v.as_str().and_then(|s| parse_validity(s).ok()),
        })
        .max()
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
                json!({"trustBundle": {"configMapName": "b"}, "certificates": [{"secretName": "a", "commonName": "x", "dnsNames": ["no way"]}]}),
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
        let spec =
            Json::from(json!({"certificates": [{"validity": "2h"}, {}, {"validity": "bogus"}]}));
        assert_eq!(longest_validity(&spec), Some(Duration::hours(24)));
        assert_eq!(longest_validity(&Json::from(json!({}))), None);
        // Too long is invalid, as "bogus" is: that manager issues nothing with it.
        let spec = Json::from(json!({"certificates": [{"validity": "99999999999h"}]}));
        assert_eq!(longest_validity(&spec), None);
    }
}
