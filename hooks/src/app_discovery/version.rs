//! Keptn's app version rule, short workload names and the derived trace context (§4.2, §4.3).

use crate::meta::sha256_hex;

/// `computeVersionFromWorkloads`: one workload gives its version verbatim; zero or several give
/// the first 10 hex digits of SHA-256 over `<name>-<version>` of each, concatenated in the given
/// (name-sorted) order with no separator.
pub fn app_version<'a>(workloads: &[(&'a str, &'a str)]) -> String {
    if let [(_, version)] = workloads {
        return (*version).to_owned();
    }
    let mut text = String::new();
    for (name, version) in workloads {
        text.push_str(name);
        text.push('-');
        text.push_str(version);
    }
    sha256_hex(text.as_bytes())[..10].to_owned()
}

/// The workload name without a leading `<app>-`.
pub fn short_name<'a>(workload: &'a str, app: &str) -> &'a str {
    workload
        .strip_prefix(app)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(workload)
}

/// A W3C `traceparent` that is the same on every sync of one app version.
pub fn derived_traceparent(namespace: &str, app: &str, version: &str) -> String {
    let h = sha256_hex(format!("{namespace}/{app}/{version}").as_bytes());
    format!("00-{}-{}-01", &h[..32], &h[32..48])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_4_2_empty_set_hash_matches_keptn() {
        assert_eq!(app_version(&[]), "e3b0c44298");
    }

    #[test]
    fn rule_4_2_single_workload_version_verbatim() {
        assert_eq!(
            app_version(&[("podtato-head-entry", "V0.2.7+Build")]),
            "V0.2.7+Build"
        );
    }

    #[test]
    fn rule_4_2_several_workloads_hash_full_names_without_separator() {
        // sha256("app-a-1.0app-b-2.0")
        let expected = &sha256_hex(b"app-a-1.0app-b-2.0")[..10];
        assert_eq!(app_version(&[("app-a", "1.0"), ("app-b", "2.0")]), expected);
        assert_eq!(expected.len(), 10);
    }

    #[test]
    fn rule_4_2_short_names() {
        assert_eq!(short_name("shop-backend", "shop"), "backend");
        assert_eq!(short_name("backend", "shop"), "backend");
        assert_eq!(short_name("shopx", "shop"), "shopx");
        assert_eq!(short_name("shop-", "shop"), "");
    }

    #[test]
    fn rule_4_3_traceparent_is_stable_and_well_formed() {
        let a = derived_traceparent("ns", "app", "1.0");
        assert_eq!(a, derived_traceparent("ns", "app", "1.0"));
        assert_ne!(a, derived_traceparent("ns", "app", "1.1"));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(
            (parts[0], parts[1].len(), parts[2].len(), parts[3]),
            ("00", 32, 16, "01")
        );
    }
}
