//! Optional ETags on Metacontroller hook answers (`--etag`; contract §12 item 10).
//!
//! With a hook's `webhook.etag.enabled`, Metacontroller keeps the last answer per parent with its
//! `ETag`, sends that tag back as `If-None-Match`, and on a 304 uses the kept answer instead of a
//! body. The hook is still run on every request: the tag is the SHA-256 of the answer worked out
//! now, so a 304 goes out only when that answer is byte for byte the one Metacontroller kept, and
//! can never stand in for an answer that the clock or the request has changed since.

use http::HeaderValue;
use metahooks_hooks::meta::sha256_hex;

/// The strong entity tag of an answer: its SHA-256 in hex, quoted.
pub fn of(answer: &[u8]) -> HeaderValue {
    let tag = format!("\"{}\"", sha256_hex(answer));
    HeaderValue::try_from(tag).expect("hex digits and quotes are valid header bytes")
}

/// Whether an `If-None-Match` value names `tag` (RFC 9110 §13.1.2: a comma-separated list, weak
/// comparison, so `W/"x"` names `"x"`). `*` names nothing here: a 304 must stand for one
/// particular answer, and a full answer is never wrong.
pub fn named_by(if_none_match: &HeaderValue, tag: &HeaderValue) -> bool {
    let tag = tag.as_bytes();
    if_none_match
        .as_bytes()
        .split(|&b| b == b',')
        .map(|listed| listed.trim_ascii())
        .map(|listed| listed.strip_prefix(b"W/").unwrap_or(listed))
        .any(|listed| listed == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_is_the_quoted_hex_sha256_of_the_answer() {
        // SHA-256 of the empty string.
        assert_eq!(
            of(b""),
            "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\""
        );
        assert_ne!(of(b"{\"status\":{}}"), of(b"{\"status\":{ }}"));
    }

    #[test]
    fn if_none_match_names_the_tag_alone_in_a_list_or_weak() {
        let tag = of(b"{}");
        let t = tag.to_str().unwrap();
        let names = |value: &str| named_by(&HeaderValue::from_str(value).unwrap(), &tag);
        assert!(names(t));
        assert!(names(&format!("\"other\", {t}")));
        assert!(names(&format!("W/{t}")));
        assert!(names(&format!("  {t}\t")));
        assert!(!names("*"));
        assert!(!names(""));
        assert!(!names(&t[1..t.len() - 1]), "unquoted");
        assert!(!names(of(b"{ }").to_str().unwrap()));
    }
}
