//! Wire types of the Metacontroller hook contract (composite and decorator sync/finalize,
//! customize) and of AdmissionReview v1, with the decode and encode helpers every hook uses.
//!
//! Requests are decoded leniently (unknown fields ignored, absent maps empty) into structs that
//! name only what the hooks read; object maps accept the v1 (`name`, `ns/name`) and v2 (`ns/name`)
//! keys alike because the keys are never read. Responses serialize only the fields the contract
//! defines, with integers where Kubernetes stores integers, so strict (v2) decoding accepts them.

mod admission;
mod composite;
mod customize;
mod decorator;
mod map_only;
mod object;
mod object_map;
mod patch;
mod spans;

pub use admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, AdmissionReviewResponse,
    GroupVersionKind, ReviewVersion, StatusDetails, UserInfo,
};
pub use composite::{CompositeRequest, CompositeResponse};
pub use customize::{CustomizeRequest, CustomizeResponse, LabelSelector, RelatedResourceRule};
pub use decorator::{DecoratorRequest, DecoratorResponse};
pub(crate) use map_only::{map_only, MapOnly};
pub use object::{
    lenient_string, named, null_as_default, parent_namespace, without, ControllerRef, Lenient,
    MetaOut, NameMeta, Named, Object, ObjectMeta, OwnerReference, RawJson, RawString, Strings,
    Text,
};
pub(crate) use object_map::{object_maps, other_type};
pub use object_map::{ObjectMap, Objects};
pub use patch::{escape_pointer, PatchOp};
pub(crate) use spans::differing;
pub use spans::{
    decodes_as, spliced, Change, Edit, GroupWise, Nested, ObjectSpan, ObjectSpans, ObjectWise,
    Reshape, Section, Slot,
};

use crate::RequestError;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Decodes a request body, naming the JSON path of the first thing that does not fit.
/// Trailing bytes after the JSON document are an error.
///
/// Good requests are decoded once without path tracking (which costs an allocation per map key
/// visited, skipped fields included); only a request that fails is decoded again, with
/// `serde_path_to_error`, to name where.
///
/// A body that is UTF-8 throughout (every request Metacontroller or the API server sends) is
/// checked as a whole first, which is one fast pass, and then read as text, so that serde_json
/// does not check the UTF-8 of every string it reads again. Any other body is read as bytes,
/// exactly as before: a bad string the hook reads is an error naming its path.
pub fn decode<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, RequestError> {
    let decoded = match std::str::from_utf8(body) {
        Ok(text) => read(serde_json::Deserializer::from_str(text)),
        Err(_) => read(serde_json::Deserializer::from_slice(body)),
    };
    match decoded {
        Ok(value) => Ok(value),
        Err(_) if body.starts_with(UTF8_BOM) => Err(RequestError::new(
            ".",
            "the request starts with a UTF-8 byte order mark, which RFC 8259 (section 8.1) \
             forbids before JSON sent over a network; remove it",
        )),
        Err(plain) => Err(explain::<T>(body)
            .unwrap_or_else(|| RequestError::new(".", redact_strings(&plain.to_string())))),
    }
}

/// The UTF-8 encoding of U+FEFF, which editors on some systems put at the start of a file.
/// serde_json refuses it, as RFC 8259 lets a parser do; only the error names it.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// One document of type `T` and nothing after it.
fn read<'de, R, T>(mut de: serde_json::Deserializer<R>) -> serde_json::Result<T>
where
    R: serde_json::de::Read<'de>,
    T: Deserialize<'de>,
{
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// The error of a body that failed to decode, with its JSON path; `None` if, against
/// expectation, it decodes with path tracking.
fn explain<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Option<RequestError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let err = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => {
            return de
                .end()
                .err()
                .map(|e| RequestError::new(".", redact_strings(&e.to_string())))
        }
        Err(e) => e,
    };
    let message = redact_strings(&err.inner().to_string());
    let path = err.path().to_string();
    // serde names a missing field in the message; put it in the path as well.
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_owned);
    Some(match missing {
        Some(field) if path == "." => RequestError::new(field, message),
        Some(field) => RequestError::new(format!("{path}.{field}"), message),
        None => RequestError::new(path, message),
    })
}

/// serde quotes the offending string in type errors (`invalid type: string "…", expected …`);
/// that string may be Secret data, so it is cut out of every message that leaves a hook.
fn redact_strings(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("string \"") {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let quoted = &rest[at + "string \"".len()..];
        let mut escaped = false;
        let mut end = quoted.len();
        for (i, c) in quoted.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = i + 1;
                    break;
                }
                _ => escaped = false,
            }
        }
        rest = &quoted[end.min(quoted.len())..];
    }
    out.push_str(rest);
    out
}

/// The longest `resyncAfterSeconds` a response asks for: 100 years of 365 days. Metacontroller
/// turns the seconds into a Go `time.Duration`, int64 nanoseconds, which cannot hold more than
/// about 292 years; past that the conversion's result is implementation-dependent (a negative
/// delay on amd64, which re-queues at once), and a hook asking the same again would sync in a
/// loop. Every delay a valid spec leads to is shorter (a leaf's renewal and an MRC's grace are
/// at most ten years); only a discovery window of over a century is cut, and asked again then.
pub const MAX_RESYNC_AFTER_SECONDS: u64 = 100 * 365 * 86_400;

/// Writes a `resyncAfterSeconds` capped at [`MAX_RESYNC_AFTER_SECONDS`].
fn capped_resync<S: serde::Serializer>(seconds: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match seconds {
        Some(n) => s.serialize_u64((*n).min(MAX_RESYNC_AFTER_SECONDS)),
        None => s.serialize_none(),
    }
}

/// Encodes a response. The wire types serialize infallibly (string keys, no floats that could be
/// NaN), so a failure here is a programming error reported as a request error rather than a panic.
pub fn encode<T: Serialize>(response: &T) -> Result<Vec<u8>, RequestError> {
    let mut out = Vec::with_capacity(4096);
    serde_json::to_writer(&mut out, response).map_err(not_encoded)?;
    Ok(out)
}

/// Writes part of a response ahead of time, as JSON text to be copied in as it is; fails only
/// as [`encode`] does.
pub fn encode_raw<T: Serialize + ?Sized>(part: &T) -> Result<Box<RawValue>, RequestError> {
    serde_json::value::to_raw_value(part).map_err(not_encoded)
}

fn not_encoded(e: serde_json::Error) -> RequestError {
    RequestError::new(".", format!("response could not be encoded: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Probe {
        parent: ProbeParent,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct ProbeParent {
        generation: i64,
    }

    #[test]
    fn decode_names_the_path_and_hides_string_values() {
        let e = decode::<Probe>(br#"{"parent": {"generation": "-----BEGIN PRIVATE KEY-----\"x"}}"#)
            .unwrap_err();
        assert_eq!(e.path, "parent.generation");
        assert!(
            e.message
                .starts_with("invalid type: a string, expected i64"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("PRIVATE"));
    }

    /// A lenient string tells a string (borrowed or unescaped) from null and from any other
    /// JSON type.
    #[test]
    fn lenient_strings_tell_absent_from_other_types() {
        fn read(text: &str) -> object::Lenient<'_> {
            decode(text.as_bytes()).unwrap()
        }
        assert_eq!(read(r#""v1""#).as_str(), Some("v1"));
        assert_eq!(read(r#""v\u0031""#).as_str(), Some("v1"));
        assert_eq!(read("null"), object::Lenient::Absent);
        for other in ["true", "-1", "1", "1.5", "[1, [2]]", r#"{"a": {"b": 1}}"#] {
            assert_eq!(read(other), object::Lenient::Other, "{other}");
        }
    }

    /// An object's namespace, or the parent's when it has none or an empty one.
    #[test]
    fn an_empty_namespace_is_the_parents() {
        fn meta(text: &str) -> ObjectMeta<'_> {
            decode(text.as_bytes()).unwrap()
        }
        assert_eq!(
            meta(r#"{"name": "a", "namespace": "x"}"#).namespace_or("p"),
            "x"
        );
        assert_eq!(
            meta(r#"{"name": "a", "namespace": ""}"#).namespace_or("p"),
            "p"
        );
        assert_eq!(meta(r#"{"name": "a"}"#).namespace_or("p"), "p");
    }

    /// Written metadata leaves out empty label and annotation maps.
    #[test]
    fn written_metadata_leaves_out_empty_maps() {
        let meta: ObjectMeta =
            decode(br#"{"name": "a", "labels": {"k": "v"}, "annotations": {"x": "1"}}"#).unwrap();
        let written = |dropped: &dyn Fn(&str) -> bool| {
            serde_json::to_value(MetaOut::observed(&meta, "ns", dropped)).unwrap()
        };
        assert_eq!(
            written(&|_| false),
            serde_json::json!({"name": "a", "namespace": "ns", "labels": {"k": "v"}, "annotations": {"x": "1"}})
        );
        assert_eq!(
            written(&|_| true),
            serde_json::json!({"name": "a", "namespace": "ns", "labels": {"k": "v"}})
        );
    }

    /// A borrowed string shows as the string does.
    #[test]
    fn text_debugs_as_its_string() {
        assert_eq!(format!("{:?}", Text::from("a\"b")), r#""a\"b""#);
    }

    /// A parent's namespace must be there and not be empty.
    #[test]
    fn a_parent_needs_a_namespace() {
        let ns = |text: Option<&str>| text.map(|t| Text::from(t.to_owned()));
        assert_eq!(parent_namespace(&ns(Some("x")), "parent", "K"), Ok("x"));
        for missing in [None, Some("")] {
            let err = parent_namespace(&ns(missing), "object", "K").unwrap_err();
            assert_eq!(err.path, "object.metadata.namespace");
            assert_eq!(err.message, "missing: K is a namespaced kind");
        }
    }

    /// serde quotes strings as Rust's `{:?}` does: a backslash doubled, a quote escaped.
    #[test]
    fn redaction_ends_each_quoted_string_at_its_closing_quote() {
        assert_eq!(
            redact_strings(r#"invalid type: string "k\\", expected i64 at line 1 column 9"#),
            "invalid type: a string, expected i64 at line 1 column 9"
        );
        assert_eq!(
            redact_strings(r#"string "a\"b" and string "c" end"#),
            "a string and a string end"
        );
    }

    #[test]
    fn decode_puts_a_missing_field_into_the_path() {
        let e = decode::<Probe>(br#"{"parent": {}}"#).unwrap_err();
        assert_eq!(e.path, "parent.generation");
        let e = decode::<Probe>(br#"{}"#).unwrap_err();
        assert_eq!(e.path, "parent");
    }

    #[test]
    fn raw_strings_read_their_value_and_are_written_back_byte_for_byte() {
        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        struct Data<'a> {
            #[serde(borrow)]
            data: std::collections::BTreeMap<String, RawString<'a>>,
        }
        let body = br#"{"data": {"plain": "TFMwdA==", "escaped": "a\/b\u0041\n"}}"#;
        let d: Data = decode(body).unwrap();
        assert_eq!(d.data["plain"].text(), "TFMwdA==");
        assert!(matches!(
            d.data["plain"].text(),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(d.data["escaped"].text(), "a/bA\n");
        assert_eq!(format!("{:?}", d.data["plain"]), "RawString(10 bytes)");
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"data":{"escaped":"a\/b\u0041\n","plain":"TFMwdA=="}}"#,
            "written back as sent, escapes included"
        );
        let made = RawString::written("a\"b\n").unwrap();
        assert_eq!(
            made.text(),
            "a\"b\n",
            "a made string reads back as its value"
        );
        assert_eq!(
            serde_json::to_string(&made).unwrap(),
            r#""a\"b\n""#,
            "a made string is written as the JSON string of its value"
        );
        for (value, kind) in [
            ("1", "number"),
            ("null", "null"),
            ("true", "boolean"),
            ("{}", "map"),
            ("[]", "sequence"),
        ] {
            let body = format!(r#"{{"data": {{"tls.crt": {value}}}}}"#);
            let e = decode::<Data>(body.as_bytes()).unwrap_err();
            assert_eq!(e.path, "data.tls.crt");
            assert!(
                e.message.contains(kind) && e.message.contains("expected a string"),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn metadata_strings_are_borrowed_unless_escaped() {
        use std::borrow::Cow;
        let body = br#"{"name": "web", "namespace": "shop", "annotations": null,
            "labels": {"app": "w\u0065b", "team\/x": "a"}}"#;
        let meta: ObjectMeta = decode(body).unwrap();
        assert!(matches!(meta.name.0, Cow::Borrowed("web")));
        assert_eq!(meta.namespace_or("default"), "shop");
        assert_eq!(meta.labels.get("app").map(Text::as_str), Some("web"));
        assert!(matches!(meta.labels["app"].0, Cow::Owned(_)));
        assert_eq!(meta.labels.get("team/x").map(Text::as_str), Some("a"));
        assert!(meta.annotations.is_empty());
        let e = decode::<ObjectMeta>(br#"{"name": 5}"#).unwrap_err();
        assert_eq!(e.path, "name");
        assert!(e.message.contains("expected a string"), "{}", e.message);
        // Lenient strings too: unescaped when they need it, absent when not strings.
        let meta: ObjectMeta =
            decode(br#"{"creationTimestamp": "2026-06-01T00:00:00\u005a"}"#).unwrap();
        assert_eq!(
            meta.creation_timestamp.as_deref(),
            Some("2026-06-01T00:00:00Z")
        );
        let meta: ObjectMeta = decode(br#"{"creationTimestamp": 5}"#).unwrap();
        assert!(meta.creation_timestamp.is_none());
    }

    #[test]
    fn metadata_gives_the_controlling_owner_when_asked_and_skips_owners_otherwise() {
        type Owned<'a> = ObjectMeta<'a, ControllerRef<'a>>;
        let body = br#"{"name": "shop", "ownerReferences": [
            {"kind": "ConfigMap", "name": "c", "uid": "1"},
            {"kind": "AppDiscovery", "name": "d", "uid": "2", "controller": false},
            {"kind": "AppDiscovery", "name": "e", "uid": "3", "controller": true},
            {"kind": "AppDiscovery", "name": "f", "uid": "4", "controller": true}]}"#;
        let meta: Owned = decode(body).unwrap();
        let owner = meta.owner_references.0.unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("AppDiscovery", "e")
        );
        assert_eq!(owner.uid, "3");
        for none in [
            &br#"{"ownerReferences": null}"#[..],
            br#"{"ownerReferences": []}"#,
            br#"{}"#,
            br#"{"ownerReferences": [{"uid": "1", "controller": null}]}"#,
        ] {
            let meta: Owned = decode(none).unwrap();
            assert_eq!(meta.owner_references, ControllerRef(None));
        }
        let e = decode::<Owned>(br#"{"ownerReferences": {"uid": "1"}}"#).unwrap_err();
        assert_eq!(e.path, "ownerReferences");
        assert!(
            e.message.contains("expected a list of owner references"),
            "{}",
            e.message
        );
        let e = decode::<Owned>(br#"{"ownerReferences": [{"uid": 1}]}"#).unwrap_err();
        assert_eq!(e.path, "ownerReferences[0].uid");
        // Unread by default, whatever they hold.
        let meta: ObjectMeta = decode(br#"{"name": "x", "ownerReferences": 5}"#).unwrap();
        assert_eq!(meta.name, "x");
    }

    #[test]
    fn decode_reads_utf8_bodies_as_text_and_other_bodies_as_bytes() {
        use std::borrow::Cow;
        // UTF-8 throughout: read as text, strings still borrowed.
        let meta: ObjectMeta = decode("{\"name\": \"w\u{e9}b\"}".as_bytes()).unwrap();
        assert!(matches!(meta.name.0, Cow::Borrowed("w\u{e9}b")));
        // A bad byte in a string the hook reads is an error naming its path, as before.
        let e = decode::<ObjectMeta>(b"{\"uid\": \"x\", \"name\": \"w\xffb\"}").unwrap_err();
        assert_eq!(e.path, "name");
        assert!(e.message.contains("invalid unicode"), "{}", e.message);
        // In a string no hook reads, it passes unread, as it did before.
        let meta: ObjectMeta = decode(b"{\"name\": \"web\", \"skipped\": \"\xff\"}").unwrap();
        assert_eq!(meta.name.as_str(), "web");
        // Trailing bytes after a document are an error on both readers.
        assert!(decode::<ObjectMeta>(b"{} \xff").is_err());
        assert!(decode::<ObjectMeta>(b"{} x").is_err());
    }

    #[test]
    fn decode_names_a_byte_order_mark() {
        let e = decode::<ObjectMeta>(b"\xEF\xBB\xBF{\"name\": \"web\"}").unwrap_err();
        assert_eq!(e.path, ".");
        assert!(e.message.contains("byte order mark"), "{}", e.message);
        // Only at the start: inside a string the same bytes are the character U+FEFF.
        let meta: ObjectMeta = decode("{\"name\": \"\u{feff}web\"}".as_bytes()).unwrap();
        assert_eq!(meta.name.as_str(), "\u{feff}web");
    }

    #[test]
    fn decode_rejects_trailing_bytes_and_deep_nesting() {
        assert!(decode::<Value>(b"{} x").is_err());
        let deep = "[".repeat(10_000);
        assert!(decode::<Value>(deep.as_bytes()).is_err());
    }
}
