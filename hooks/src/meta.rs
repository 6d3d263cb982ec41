//! Kubernetes conventions shared by the controllers: conditions, timestamps, DNS names, hashes.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

/// The Kubernetes recommended label naming who manages an object.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// A metav1.Condition, in the field order the API server uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub last_transition_time: String,
    /// One of the hook's own words, never text from the request (it labels `/metrics`).
    pub reason: &'static str,
    pub message: String,
}

/// The conditions of a previous status, read leniently: anything that is not a list of objects
/// with string `type`, `status` and `lastTransitionTime` is simply not there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreviousConditions(Vec<(String, String, String)>);

impl<'de> Deserialize<'de> for PreviousConditions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(PreviousConditions::from_value(&Value::deserialize(d)?))
    }
}

impl PreviousConditions {
    /// Reads `status.conditions` of a previous status held as a JSON value.
    pub fn from_value(value: &Value) -> Self {
        let list = value.as_array().map(Vec::as_slice).unwrap_or(&[]);
        let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
        PreviousConditions(
            list.iter()
                .filter_map(|c| {
                    Some((
                        text(c, "type")?,
                        text(c, "status")?,
                        text(c, "lastTransitionTime").unwrap_or_default(),
                    ))
                })
                .collect(),
        )
    }

    /// Builds a condition, keeping the previous `lastTransitionTime` of the same type while its
    /// status is unchanged (so that a resync writes the same status), else stamping `now`.
    pub fn condition(
        &self,
        type_: &str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
        observed_generation: Option<i64>,
        now: OffsetDateTime,
    ) -> Condition {
        let status = if status { "True" } else { "False" };
        let last_transition_time = self
            .0
            .iter()
            .find(|(t, s, ltt)| t == type_ && s == status && !ltt.is_empty())
            .map_or_else(|| rfc3339(now), |(_, _, ltt)| ltt.clone());
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            observed_generation,
            last_transition_time,
            reason,
            message: message.into(),
        }
    }
}

/// RFC 3339 in UTC with whole seconds and `Z`, as Kubernetes writes timestamps.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let fmt = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.checked_to_offset(UtcOffset::UTC)
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| String::from("1970-01-01T00:00:00Z"))
}

/// Parses an RFC 3339 timestamp (fractions and offsets allowed) into UTC. A time that UTC
/// cannot hold (`9999-12-31T23:00:00-05:00` is in the year 10000 there) is not one.
pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()?
        .checked_to_offset(UtcOffset::UTC)
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `text` as a JSON string, escaped exactly as serde_json escapes it: `"` and `\\`,
/// the short forms `\b \f \n \r \t`, other control characters as `\u00XX`; nothing else
/// (`/` and non-ASCII stay as they are).
pub fn write_json_str(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut plain = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape: &str = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[plain..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&text[plain..]);
    out.push('"');
}

/// The most bytes a label value holds: the API server refuses an object with a longer one.
pub const LABEL_VALUE_MAX_LEN: usize = 63;

/// Lowercase alphanumerics and `-`, alphanumeric at both ends: the shape of a label, whatever
/// its length.
fn is_label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.iter().all(|c| alnum(c) || *c == b'-')
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
}

/// A DNS-1123 label: lowercase alphanumerics and `-`, 1 to 63 characters, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_shaped(s)
}

/// A DNS-1123 subdomain as Kubernetes checks an object's name (`IsDNS1123Subdomain`): parts of a
/// label's shape joined by dots, at most 253 characters in all. Unlike a DNS name's labels, a
/// part may be longer than 63 characters: a Secret may be named so, and refusing the name would
/// refuse what the API server takes.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shaped)
}

/// A DNS name: DNS-1123 labels (each at most 63 characters) joined by dots, at most 253 in all.
pub fn is_dns_name(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A DNS name a certificate can hold: a DNS name, optionally after a leading `*.` (a wildcard).
pub fn is_certificate_dns_name(s: &str) -> bool {
    is_dns_name(s.strip_prefix("*.").unwrap_or(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn json_strings_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b"))
            .collect();
        texts.extend(
            [
                "",
                "é/ü ☃ \u{1F600}",
                "\"quoted\\path\"",
                "\u{7f}\u{80}\u{2028}",
            ]
            .map(String::from),
        );
        for text in texts {
            let mut out = String::new();
            write_json_str(&text, &mut out);
            assert_eq!(out, serde_json::to_string(&text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn condition_keeps_transition_time_while_status_is_unchanged() {
        let prev: PreviousConditions = serde_json::from_value(serde_json::json!([
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]))
        .unwrap();
        let now = datetime!(2026-02-02 10:00:00.5 UTC);
        let same = prev.condition("Ready", true, "Synced", "", Some(3), now);
        assert_eq!(same.last_transition_time, "2026-01-01T00:00:00Z");
        let flipped = prev.condition("Ready", false, "InvalidSpec", "x", Some(3), now);
        assert_eq!(flipped.last_transition_time, "2026-02-02T10:00:00Z");
    }

    #[test]
    fn previous_conditions_tolerate_garbage() {
        let now = time::macros::datetime!(2026-02-02 10:00:00 UTC);
        for garbage in [r#""not a list""#, r#"[1, {"type": 2}]"#] {
            let prev: PreviousConditions = serde_json::from_str(garbage).unwrap();
            let c = prev.condition("Ready", true, "Synced", "", None, now);
            assert_eq!(c.last_transition_time, "2026-02-02T10:00:00Z");
        }
    }

    #[test]
    fn sha256_of_empty_string() {
        assert!(sha256_hex(b"").starts_with("e3b0c44298fc1c14"));
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("A"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("my.app-1"));
        assert!(!is_dns1123_subdomain("my..app"));
        assert!(!is_dns1123_subdomain(""));
        assert!(!is_dns1123_subdomain("my.App"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        // A part past 63 characters: an object's name, not a DNS name.
        let long_part = format!("{}.x", "a".repeat(64));
        assert!(is_dns1123_subdomain(&long_part));
        assert!(!is_dns_name(&long_part));
        assert!(is_dns_name(&format!("{}.x", "a".repeat(63))));
        assert!(!is_dns_name(""));
        assert!(!is_dns_name("a..b"));
        assert!(!is_dns_name(&format!(
            "{}.{}",
            "a".repeat(63),
            "b".repeat(190)
        )));
    }

    #[test]
    fn timestamps_round_trip() {
        let t = parse_rfc3339("2026-03-04T05:06:07.123+01:00").unwrap();
        assert_eq!(rfc3339(t), "2026-03-04T04:06:07Z");
        assert_eq!(t.offset(), UtcOffset::UTC);
        assert!(parse_rfc3339("yesterday").is_none());
        // In UTC this is in the year 10000, which no timestamp here can hold.
        assert!(parse_rfc3339("9999-12-31T23:00:00-05:00").is_none());
        assert!(parse_rfc3339("9999-12-31T23:00:00Z").is_some());
    }
}
